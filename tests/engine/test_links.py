"""Links between memories (link, unlink, get_links, explore_related) and analyze_knowledge:
real files in temporary vaults, an Obsidian-style vault, the engine in process and the real MCP
client over stdio."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.engine.health import _tag_key
from spellbook.errors import NoteNotFoundError, SpellbookError
from spellbook.index.catalog import Catalog
from tests.helpers.engine import open_engine
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.stdio import call, error

ROADMAP = "\ufeff# Roadmap\r\n\r\n## Q3\r\n\r\nShip the [[Projects]] page. #area/sub\r\n"  # BOM, CRLF, no frontmatter


@pytest.fixture
def obsidian(vault: Path) -> Path:
    """A vault as a person keeps it in Obsidian: wikilinks in bodies, aliases, nested #tags,
    notes with and without frontmatter, a typed relation written by hand."""
    (vault / "people").mkdir()
    (vault / "people" / "Minji Kim.md").write_text(
        "---\naliases: [Minji]\ntags: [team/design]\ncontext: shop\n---\n# Minji Kim\n\nDesigner of the shop.\n"
    )
    (vault / "Projects.md").write_text(
        "# Projects\n\nLed by [[Minji]]; see [[Roadmap#Q3]] and [[Nowhere]]. #area/sub\n```\n[[Not a link]]\n```\n"
    )
    (vault / "Roadmap.md").write_bytes(ROADMAP.encode())
    (vault / "ops").mkdir()
    (vault / "ops" / "Deploy.md").write_text(
        '---\ntitle: Deploy\ntags: [Deploy]\ncontext: shop\nsupersedes:\n  - "[[Deploy old]]"\n'
        "link_reasons:\n  supersedes:\n    Deploy old: ArgoCD replaced Jenkins\n---\nDeploys go through ArgoCD.\n"
    )
    (vault / "ops" / "Deploy old.md").write_text(
        "---\ntags: [deploys]\nupdated: 2020-01-01T00:00:00+00:00\n---\nDeploys went through Jenkins jobs.\n"
    )
    (vault / "ci.md").write_text("---\ntags: [ci-cd]\n---\nPipelines run on every push. See [[cicd]].\n")
    (vault / "cicd.md").write_text("---\ntags: [cicd]\n---\nPipelines run on every push, twice.\n")
    (vault / "Lonely.md").write_text("A thought about nothing in particular, linked to nothing.\n")
    return vault


def ids(engine: Engine) -> dict[str, str]:
    return {m["path"]: m["id"] for m in engine.list_memories(limit=200)["memories"]}


def test_link_writes_an_obsidian_wikilink_and_keeps_the_body_bytes(obsidian: Path, engine: Engine) -> None:
    engine.reconcile()
    by_path = ids(engine)
    out = engine.link(by_path["Roadmap.md"], by_path["Projects.md"], "depends_on", reason="the page ships first")
    assert out["changed"] and out["link"] == "[[Projects]]"
    data = (obsidian / "Roadmap.md").read_bytes().decode()
    assert data.startswith("\ufeff---\r\nid: h-") and '\r\ndepends_on:\r\n  - "[[Projects]]"\r\n' in data
    assert "link_reasons:\r\n  depends_on:\r\n    Projects: the page ships first\r\n" in data
    assert data.endswith("---\r\n" + ROADMAP.removeprefix("\ufeff"))  # the body, byte for byte
    assert out["version"] == engine.get_memories([out["source"]])["memories"][0]["version"]
    # the id written into the file is the one it was found under: it keeps working
    links = engine.get_links(by_path["Roadmap.md"])["links"]
    assert {
        "relation": "depends_on",
        "target": "Projects",
        "resolved": True,
        "id": by_path["Projects.md"],
        "path": "Projects.md",
        "title": "Projects",
        "reason": "the page ships first",
    } in links
    backlinks = engine.get_links(by_path["Projects.md"])["backlinks"]
    assert {(b["path"], b["relation"]) for b in backlinks} == {("Roadmap.md", "depends_on"), ("Roadmap.md", "wikilink")}


def test_link_twice_changes_nothing_and_unlink_removes_key_and_reason(engine: Engine, vault: Path) -> None:
    a = engine.scribe("Use uv for Python environments.", title="Python envs", category="dev", tags=["python"])
    b = engine.scribe("Use pip-tools for locking.", title="Locking", category="dev", tags=["python"])
    first = engine.link(a["id"], b["id"])
    file = vault / a["path"]
    before = file.read_bytes()
    again = engine.link(a["id"], b["id"])
    assert not again["changed"] and again["version"] == first["version"] and file.read_bytes() == before
    assert before.decode().count("[[Locking]]") == 1
    engine.link(a["id"], b["id"], reason="both about Python tooling")
    assert "link_reasons:\n  related:\n    Locking: both about Python tooling\n" in file.read_text()
    engine.link(a["id"], b["id"], "extends")
    removed = engine.unlink(a["id"], b["id"], "related")
    assert removed["removed"] == [{"relation": "related", "link": "[[Locking]]"}]
    text = file.read_text()
    assert "related:" not in text and "link_reasons" not in text and 'extends:\n  - "[[Locking]]"\n' in text
    assert [link["relation"] for link in engine.get_links(a["id"])["links"]] == ["extends"]
    nothing = engine.unlink(a["id"], b["id"], "related")
    assert not nothing["changed"] and "no related link" in nothing["note"]
    engine.unlink(a["id"], b["id"])
    assert engine.get_links(a["id"])["links"] == [] and "extends" not in file.read_text()


def test_link_errors_say_what_to_do(obsidian: Path, engine: Engine) -> None:
    engine.reconcile()
    by_path = ids(engine)
    deploy = by_path["ops/Deploy.md"]
    with pytest.raises(NoteNotFoundError, match="link target.*memorize or list_memories"):
        engine.link(deploy, "0123456789abcdef")
    with pytest.raises(NoteNotFoundError, match="source"):
        engine.link("nope", deploy)
    with pytest.raises(SpellbookError, match="cannot link to itself"):
        engine.link(deploy, deploy)
    with pytest.raises(SpellbookError, match="relation must be one of related, supersedes"):
        engine.link(deploy, by_path["Lonely.md"], "likes")
    with pytest.raises(SpellbookError, match="get_links"):
        engine.unlink(deploy, "Never linked")
    (obsidian / "Odd.md").write_text("---\nrelated: {a: 1}\n---\nOdd.\n")
    (obsidian / "Broken.md").write_text("---\ntitle: [unclosed\n---\nBroken.\n")
    engine.reconcile()
    by_path = ids(engine)
    before = (obsidian / "Odd.md").read_bytes()
    with pytest.raises(SpellbookError, match="'related' holds a dict, not a list"):
        engine.link(by_path["Odd.md"], deploy)
    with pytest.raises(SpellbookError, match="malformed YAML"):
        engine.link(by_path["Broken.md"], deploy)
    assert not engine.unlink(by_path["Odd.md"], deploy)["changed"]  # all relations: the odd key is left be
    with pytest.raises(SpellbookError, match="'related' holds a dict"):
        engine.unlink(by_path["Odd.md"], deploy, "related")
    assert (obsidian / "Odd.md").read_bytes() == before


def test_a_broken_link_can_be_unlinked_by_its_text(obsidian: Path, engine: Engine) -> None:
    (obsidian / "Stub.md").write_text('---\nrelated:\n  - "[[Gone note]]"\n  - "[[Lonely]]"\n---\nStub.\n')
    engine.reconcile()
    by_path = ids(engine)
    links = engine.get_links(by_path["Stub.md"])["links"]
    assert [(x["target"], x["resolved"]) for x in links] == [("Gone note", False), ("Lonely", True)]
    engine.unlink(by_path["Stub.md"], "gone note")
    assert (obsidian / "Stub.md").read_text().startswith('---\nrelated:\n  - "[[Lonely]]"\nid: h-')


def test_link_text_is_the_path_when_the_name_is_ambiguous(engine: Engine, vault: Path) -> None:
    a = engine.scribe("Plan for the shop.", title="Plan", category="shop")
    b = engine.scribe("Plan for the garden.", title="Plan", category="garden")
    c = engine.scribe("Weekly review.", title="Review", category="misc")
    assert engine.link(c["id"], a["id"])["link"] == "[[shop/Plan]]"
    assert engine.link(c["id"], b["id"])["link"] == "[[garden/Plan]]"
    assert {x["path"] for x in engine.get_links(c["id"])["links"]} == {a["path"], b["path"]}


def test_a_hand_edit_between_read_and_write_is_not_clobbered(engine: Engine, vault: Path, monkeypatch) -> None:
    a = engine.scribe("Cache invalidation runs nightly.", title="Cache", category="ops")
    b = engine.scribe("Nightly jobs run at 2am.", title="Nightly jobs", category="ops")
    file = vault / a["path"]
    real_read = engine.vault.read
    reads = []

    def read_then_person_saves(path: str):
        state = real_read(path)
        reads.append(path)
        if len(reads) == 1:  # the person saves in Obsidian right after Spellbook read the file
            file.write_text(file.read_text().replace("nightly.", "nightly (edited by hand).") + "\nstatus: ok\n")
        return state

    monkeypatch.setattr(engine.vault, "read", read_then_person_saves)
    engine.link(a["id"], b["id"], "depends_on")
    text = file.read_text()
    assert "nightly (edited by hand)." in text and "\nstatus: ok\n" in text  # the person's change
    assert 'depends_on:\n  - "[[Nightly jobs]]"\n' in text  # and the link, applied on top of it
    assert len(reads) >= 2  # read, conflict on write, read again (then the indexer reads it)


def test_supersedes_ranks_the_target_down(engine: Engine, vault: Path) -> None:
    old = engine.scribe("Kettle descaling uses vinegar.", title="Kettle old", category="home", importance=5)
    new = engine.scribe("Kettle descaling uses vinegar.", title="Kettle new", category="home", importance=3)
    top = engine.memorize("kettle descaling vinegar", limit=2, mode="semantic")["results"]
    assert [h["id"] for h in top] == [old["id"], new["id"]]  # importance 5 first
    engine.link(new["id"], old["id"], "supersedes")
    top = engine.memorize("kettle descaling vinegar", limit=2, mode="semantic")["results"]
    assert [h["id"] for h in top] == [new["id"], old["id"]]  # superseded (x0.5) outweighs importance
    engine.unlink(new["id"], old["id"])
    top = engine.memorize("kettle descaling vinegar", limit=2, mode="semantic")["results"]
    assert top[0]["id"] == old["id"]
    # written by hand, by name, in another note: the same
    (vault / "Later.md").write_text('---\nsupersedes: ["[[kettle OLD]]"]\n---\nSee the new kettle note.\n')
    engine.reconcile()
    top = engine.memorize("kettle descaling vinegar", limit=2, mode="semantic")["results"]
    assert top[0]["id"] == new["id"]


def test_get_links_in_an_obsidian_vault(obsidian: Path, engine: Engine) -> None:
    engine.reconcile()
    by_path = ids(engine)
    projects = engine.get_links(by_path["Projects.md"])
    assert [(x["relation"], x["target"], x.get("path")) for x in projects["links"]] == [
        ("wikilink", "Minji", "people/Minji Kim.md"),
        ("wikilink", "Roadmap", "Roadmap.md"),
        ("wikilink", "Nowhere", None),
    ]
    assert projects["links"][2]["resolved"] is False
    old = engine.get_links(by_path["ops/Deploy old.md"])
    assert old["backlinks"] == [
        {
            "id": by_path["ops/Deploy.md"],
            "path": "ops/Deploy.md",
            "title": "Deploy",
            "relation": "supersedes",
            "reason": "ArgoCD replaced Jenkins",
        }
    ]
    minji = engine.get_links(by_path["people/Minji Kim.md"])
    assert [(b["path"], b["relation"]) for b in minji["backlinks"]] == [("Projects.md", "wikilink")]
    # a link by a partial path (as Obsidian writes it when names clash) is a backlink too
    (obsidian / "a" / "b").mkdir(parents=True)
    (obsidian / "a" / "b" / "Deep.md").write_text("Deep note.\n")
    (obsidian / "Pointer.md").write_text('---\nextends: ["[[b/Deep]]"]\n---\nPoints down.\n')
    engine.reconcile()
    deep = engine.get_links(ids(engine)["a/b/Deep.md"])
    assert [(b["path"], b["relation"]) for b in deep["backlinks"]] == [("Pointer.md", "extends")]
    # get_memories lists relation links too, each target once
    full = engine.get_memories([by_path["ops/Deploy.md"]])["memories"][0]
    assert [x["target"] for x in full["links"]] == ["Deploy old"]


def test_explore_related_says_why(obsidian: Path, engine: Engine) -> None:
    engine.reconcile()
    by_path = ids(engine)
    deploy = by_path["ops/Deploy.md"]
    engine.link(by_path["ci.md"], deploy, "related", reason="pipelines deploy")
    found = {r["path"]: r for r in engine.explore_related(deploy, limit=10)["related"]}
    old = found["ops/Deploy old.md"]
    assert {"kind": "links_to", "relation": "supersedes"} in old["reasons"]
    assert "this note supersedes it" in old["why"]
    assert not any(r["kind"] == "same_tags" for r in old["reasons"])  # Deploy and deploys are two tags
    assert {"kind": "linked_from", "relation": "related"} in found["ci.md"]["reasons"]
    assert {"kind": "same_context", "context": "shop"} in found["people/Minji Kim.md"]["reasons"]
    assert all(r["why"] for r in found.values()) and "ops/Deploy.md" not in found
    scores = [r["score"] for r in engine.explore_related(deploy, limit=10)["related"]]
    assert scores == sorted(scores, reverse=True)
    # nested tags shared (an inline #area/sub and another note's #area/sub)
    roadmap = {r["path"]: r for r in engine.explore_related(by_path["Roadmap.md"])["related"]}
    assert {"kind": "same_tags", "tags": ["area/sub"]} in roadmap["Projects.md"]["reasons"]
    assert len(engine.explore_related(deploy, limit=2)["related"]) == 2


def test_analyze_knowledge_finds_each_kind_of_issue(obsidian: Path, engine: Engine) -> None:
    (obsidian / "copy").mkdir()
    shutil.copy(obsidian / "cicd.md", obsidian / "copy" / "cicd.md")  # a near-duplicate
    engine.reconcile()
    by_path = ids(engine)
    report = engine.analyze_knowledge()
    kinds: dict[str, list[dict]] = {}
    for issue in report["issues"]:
        kinds.setdefault(issue["kind"], []).append(issue)
        assert issue["action"] and issue["notes"]
    untagged = {n["path"] for n in kinds["untagged"][0]["notes"]}
    assert untagged == {"Lonely.md"}  # inline #tags count: Projects and Roadmap have #area/sub
    assert "Lonely.md" in {n["path"] for n in kinds["isolated"][0]["notes"]}
    assert "people/Minji Kim.md" not in {n["path"] for n in kinds["isolated"][0]["notes"]}  # linked by alias
    assert [n["path"] for n in kinds["stale"][0]["notes"]] == ["ops/Deploy old.md"]
    assert kinds["stale"][0]["notes"][0]["updated"].startswith("2020-01-01")
    groups = {frozenset(i["tags"]): i for i in kinds["similar_tags"]}
    assert set(groups) == {frozenset({"Deploy", "deploys"}), frozenset({"ci-cd", "cicd"})}
    assert groups[frozenset({"ci-cd", "cicd"})]["suggested"] == "cicd"  # used by more notes
    assert kinds["similar_tags"][0]["notes"][0]["id"] in by_path.values()
    pair = kinds["near_duplicate"][0]
    assert {n["path"] for n in pair["notes"]} == {"cicd.md", "copy/cicd.md"} and pair["similarity"] >= 0.8
    broken = [(i["notes"][0]["path"], i["target"], i["relation"]) for i in kinds["broken_link"]]
    assert broken == [("Projects.md", "Nowhere", "wikilink")]
    assert "unlink" not in kinds["broken_link"][0]["action"]  # a link in the text is fixed with revise
    assert report["notes"] == 9 and report["stale_days"] == 180
    shares = report["shares"]
    penalty = (
        20 * shares["untagged"]
        + 25 * shares["isolated"]
        + 15 * shares["stale"]
        + 15 * shares["near_duplicate"]
        + 15 * shares["broken_link"]
        + 10 * shares["similar_tags"]
    )
    assert 0 <= report["score"] < 100 and abs(report["score"] - (100 - penalty)) <= 1
    # fixing issues raises the score; a longer stale window drops the stale issue
    engine.link(by_path["Lonely.md"], by_path["Projects.md"])
    assert engine.analyze_knowledge()["counts"]["isolated"] < report["counts"]["isolated"]
    assert engine.analyze_knowledge(stale_days=36_500)["counts"]["stale"] == 0
    with pytest.raises(SpellbookError, match="stale_days"):
        engine.analyze_knowledge(stale_days=0)


def test_analyze_knowledge_is_bounded_and_an_empty_vault_is_healthy(engine: Engine, vault: Path) -> None:
    assert engine.analyze_knowledge()["score"] == 100
    for n in range(30):
        (vault / f"note {n:02d}.md").write_text(f"Thought number {n} about topic {n * 7}.\n")
    engine.reconcile()
    report = engine.analyze_knowledge()
    untagged = next(i for i in report["issues"] if i["kind"] == "untagged")
    assert untagged["count"] == 30 and len(untagged["notes"]) == 20 and untagged["more"] == 10
    assert report["score"] <= 55  # every note untagged and unlinked: -20 and -25
    for n in range(45):
        (vault / f"tagged {n:02d}.md").write_text(f"Tagged thought {n}. #{'Deploys' if n < 22 else 'deploy'}\n")
    engine.reconcile()
    tags = next(i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "similar_tags")
    assert tags["tags"] == {"deploy": 23, "Deploys": 22} and tags["suggested"] == "deploy"
    assert tags["count"] == 22 and len(tags["notes"]) == 20 and tags["more"] == 2


def test_system_notes_are_left_out_of_the_health_check(engine: Engine, vault: Path) -> None:
    (vault / "system").mkdir()
    (vault / "system" / "Guide.md").write_text("How to write memories.\n")
    engine.reconcile()
    assert engine.analyze_knowledge()["notes"] == 0


def test_links_survive_a_rebuilt_index(obsidian: Path, settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        by_path = ids(engine)
        engine.link(by_path["Lonely.md"], by_path["ops/Deploy.md"], "contradicts", reason="says the opposite")
        before = {p: engine.get_links(i) for p, i in by_path.items()}
    finally:
        engine.close()
    shutil.rmtree(settings.index_path)
    engine = open_engine(settings)
    try:
        assert {p: engine.get_links(i) for p, i in ids(engine).items()} == before
    finally:
        engine.close()


def test_an_index_of_the_old_format_gets_the_relation_column(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "catalog.sqlite3")
    db.execute("CREATE TABLE links (path TEXT NOT NULL, target TEXT NOT NULL)")
    db.execute("INSERT INTO links VALUES ('a.md', 'b')")
    db.commit()
    db.close()
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    try:
        assert catalog.links.links_from("a.md") == [("b", "")]
    finally:
        catalog.close()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("deploy", "deploys"),
        ("Deploy", "deploy"),
        ("ci-cd", "cicd"),
        ("ci_cd", "CI CD"),
        ("area/Subs", "area/sub"),
        ("libraries", "library"),
    ],
)
def test_tag_spellings_that_are_one_tag(a: str, b: str) -> None:
    assert _tag_key(a) == _tag_key(b)


@pytest.mark.parametrize(("a", "b"), [("process", "proces"), ("status", "statu"), ("ops", "op"), ("ci/cd", "cicd")])
def test_tag_spellings_that_stay_apart(a: str, b: str) -> None:
    assert _tag_key(a) != _tag_key(b)


# --- over the real MCP client and stdio ---------------------------------------------------------


def server(vault: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=SPELLBOOK,
        args=["serve", "--vault", str(vault), "--embedder", "hashing", "--no-watch"],
        env=child_env(),
    )


@pytest.mark.slow
def test_link_tools_over_stdio_and_after_a_restart(obsidian: Path) -> None:
    vault = obsidian
    seen: dict[str, dict] = {}

    async def first_run() -> None:
        async with Client(server(vault)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"link", "unlink", "get_links", "explore_related", "analyze_knowledge"} <= names
            listed = await call(client, "list_memories", limit=50)
            by_path = {m["path"]: m["id"] for m in listed["memories"]}
            seen["ids"] = by_path
            roadmap, projects, lonely = by_path["Roadmap.md"], by_path["Projects.md"], by_path["Lonely.md"]

            out = await call(client, "link", source=roadmap, target=projects, relation="extends", reason="adds dates")
            assert out["changed"] and out["link"] == "[[Projects]]"
            text = (vault / "Roadmap.md").read_bytes().decode()
            assert '\r\nextends:\r\n  - "[[Projects]]"\r\n' in text and text.endswith(ROADMAP.removeprefix("\ufeff"))
            again = await client.call_tool("link", {"source": roadmap, "target": projects, "relation": "extends"})
            assert not again.is_error and "Already linked" in again.content[0].text
            await call(client, "link", source=lonely, target=projects)
            await call(client, "unlink", source=lonely, target=projects)
            assert "related" not in (vault / "Lonely.md").read_text()
            await call(client, "link", source=lonely, target=roadmap, relation="contradicts")

            links = await call(client, "get_links", id=roadmap)
            assert {
                "relation": "extends",
                "target": "Projects",
                "resolved": True,
                "id": projects,
                "path": "Projects.md",
                "title": "Projects",
                "reason": "adds dates",
            } in links["links"]
            assert [(b["path"], b["relation"]) for b in links["backlinks"]] == [
                ("Lonely.md", "contradicts"),
                ("Projects.md", "wikilink"),
            ]
            explored = await call(client, "explore_related", id=projects, limit=5)
            roadmap_hit = next(r for r in explored["related"] if r["path"] == "Roadmap.md")
            assert "it extends this note" in roadmap_hit["why"] and "this note links to it" in roadmap_hit["why"]
            health = await call(client, "analyze_knowledge", stale_days=365)
            assert 0 <= health["score"] <= 100 and {i["kind"] for i in health["issues"]} >= {
                "stale",
                "similar_tags",
                "broken_link",
            }
            result = await client.call_tool("analyze_knowledge", {})
            assert result.content[0].text.startswith("Health ")

            assert "memorize or list_memories" in await error(client, "link", source=roadmap, target="missing-id")
            assert "cannot link to itself" in await error(client, "link", source=roadmap, target=roadmap)
            assert "relation" in await error(client, "link", source=roadmap, target=projects, relation="likes")
            assert "get_links" in await error(client, "unlink", source=roadmap, target="Never linked")
            assert "No memory with id" in await error(client, "get_links", id="nope")
            assert "limit" in await error(client, "explore_related", id=roadmap, limit=0)
            seen["links"] = {p: await call(client, "get_links", id=i) for p, i in by_path.items()}

    async def second_run() -> None:
        async with Client(server(vault)) as client:
            await call(client, "stats")
            after = {p: await call(client, "get_links", id=i) for p, i in seen["ids"].items()}
            assert after == seen["links"]

    anyio.run(first_run)
    shutil.rmtree(vault / ".spellbook")  # the index is derived: rebuilt from the files, links included
    anyio.run(second_run)


def test_resolving_many_links_between_writes_matches_one_lookup_at_a_time(engine: Engine, vault: Path) -> None:
    """From the second lookup between two writes on, links resolve from a map of every name
    (index/links.py ``resolve_link``): it must pick exactly the note the one-query lookup picks,
    with shared file names, titles that are other notes' aliases, numeric and non-ASCII names."""
    files = {
        "a/Plan.md": "---\ntitle: Roadmap\naliases: [Q3, 2024]\n---\nx",
        "b/c/Plan.md": "---\naliases: Roadmap\n---\ny",
        "Plan.md": "z",
        "notes/Über Café.md": "---\ntitle: Über Café\naliases: [ÜBER]\n---\nu",
        "d/under_score.md": "---\naliases: ['50%']\n---\nw",
    }
    for path, text in files.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text, encoding="utf-8")
    engine.reconcile()
    links = engine.catalog.links
    targets = [
        "Plan",
        "plan.md",
        "a/Plan",
        "c/Plan",
        "b/c/plan",
        "Roadmap",
        "roadmap",
        "Q3",
        "2024",
        "über café",
        "Über Café",
        "ÜBER",
        "über",
        "under_score",
        "under-score",
        "50%",
        "5_%",
        "%",
        " Plan ",
        "missing",
    ]

    def path_of(row):
        return row.path if row else None

    single = {t: path_of(next(iter(links.link_matches(t, 1)), None)) for t in targets}
    engine.scribe("A write moves the generation.", title="Mover")
    first = [path_of(links.resolve_link(t)) for t in targets[:1]]  # one query
    mapped = [path_of(links.resolve_link(t)) for t in targets]  # from the map
    assert first == [single[targets[0]]]
    assert dict(zip(targets, mapped)) == single
    assert single["Plan"] == "Plan.md" and single["Roadmap"] == "a/Plan.md" and single["missing"] is None


def test_titles_and_aliases_with_capital_letters_outside_ascii_are_linked(engine: Engine, vault: Path) -> None:
    """Links are compared as SQLite lowers them (ASCII letters only) on both sides: a note titled
    "Été 2024" or aliased "Über Plan" is found by its exact name (it was found by none before:
    Python lowered the note's side to "été 2024"), and by its name in other ASCII case."""
    summer = engine.scribe("Summer plans.", title="Été 2024", category="t")
    plan = engine.scribe("The plan.", title="Plan", category="t")
    file = vault / plan["path"]
    file.write_text(
        file.read_text(encoding="utf-8").replace("title: Plan\n", "title: Plan\naliases: Über Plan\n"), encoding="utf-8"
    )
    engine.reconcile()
    trip = engine.scribe(
        "See [[Été 2024]], [[ÉTé 2024]], [[été 2024]], [[Über Plan]] and [[über plan]].", title="Trip", category="t"
    )
    by_id = {m["id"]: m for m in engine.get_memories([summer["id"], plan["id"], trip["id"]])["memories"]}
    assert [b["id"] for b in by_id[summer["id"]]["backlinks"]] == [trip["id"]]
    links = {link["target"]: link for link in by_id[trip["id"]]["links"]}
    assert links["Été 2024"]["id"] == links["ÉTé 2024"]["id"] == summer["id"]
    assert links["Über Plan"]["id"] == plan["id"]
    assert links["été 2024"]["resolved"] is False and links["über plan"]["resolved"] is False  # as written there
    newer = engine.scribe("Summer plans, revised.", title="Été 2024 v2", category="t")
    engine.link(newer["id"], summer["id"], "supersedes")
    assert engine.catalog.links.superseded(engine.catalog.notes_at([summer["path"]]).values()) == {summer["path"]}
