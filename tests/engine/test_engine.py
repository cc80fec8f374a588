"""The engine against real files and real embedded Chroma (hashing embedder: plumbing, not quality)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine, ranking
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, SpellbookError
from tests.helpers.engine import CountingEmbedder, open_engine


def frontmatter(file: Path) -> dict:
    return yaml.safe_load(file.read_text(encoding="utf-8").split("---\n")[1])


def test_scribe_writes_a_markdown_file_and_memorize_finds_it(engine: Engine, vault: Path) -> None:
    body = "We deploy with **docker compose**.\n\n---\n\n```\n# not a heading\n```\n한국어 텍스트 🎉"
    out = engine.scribe(
        body,
        title="Deploy: how/why",
        category="ops",
        topic="deploy",
        tags=["#docker", "ci cd"],
        questions=["How do we deploy?"],
        importance="high",
        type="decision",
    )
    assert out["path"] == "ops/deploy/Deploy how why.md"
    file = vault / out["path"]
    text = file.read_text(encoding="utf-8")
    assert text.endswith("---\n" + body)  # body byte for byte
    meta = frontmatter(file)
    assert meta["id"] == out["id"] and meta["tags"] == ["docker", "ci-cd"] and meta["importance"] == 5
    assert "keywords" not in meta and "context" not in meta  # absent fields are omitted
    assert str(meta["created"]).endswith("+00:00") or "+" in str(meta["created"])
    hits = engine.memorize("docker compose deploy")["results"]
    assert hits[0]["id"] == out["id"] and hits[0]["path"] == out["path"]


def test_same_title_gets_a_second_file(engine: Engine, vault: Path) -> None:
    a = engine.scribe("one", title="Same", category="c")
    b = engine.scribe("two", title="Same", category="c")
    assert (a["path"], b["path"]) == ("c/Same.md", "c/Same 2.md")
    assert a["id"] != b["id"]


def test_hand_written_notes_are_memories_chunked_by_heading(engine: Engine, vault: Path) -> None:
    (vault / "journal").mkdir()
    (vault / "journal" / "Trip.md").write_text("# Trip\n\nIntro.\n\n## Food\n\nThe ramen in Fukuoka was great.\n")
    engine.reconcile()
    hit = engine.memorize("ramen Fukuoka", mode="keyword")["results"][0]
    assert hit["path"] == "journal/Trip.md" and hit["heading"] == "Trip > Food" and hit["id"].startswith("h-")


def test_revise_keeps_hand_added_keys_and_refuses_stale_versions(engine: Engine, vault: Path) -> None:
    out = engine.scribe("Original body.", title="Note", category="c")
    file = vault / out["path"]
    # a person adds a key of their own in Obsidian
    text = file.read_text().replace("category: c\n", "category: c\nmood: happy  # mine\n")
    file.write_text(text)
    with pytest.raises(FileChangedError) as err:
        engine.revise(out["id"], text="Agent's body.", version=out["version"])
    assert "mood: happy" in err.value.content  # the error holds the current content (the hub shows it, scrubbed)
    assert file.read_text() == text  # nothing written
    current = engine.get_memories([out["id"]])["memories"][0]
    revised = engine.revise(out["id"], text="Agent's body.", version=current["version"], tags=["t"])
    after = file.read_text()
    assert "mood: happy  # mine\n" in after and after.endswith("---\nAgent's body.")
    assert revised["version"] != current["version"]
    assert engine.memorize("Agent's body", mode="keyword")["results"][0]["id"] == out["id"]


def test_revise_without_version_still_merges_onto_the_file_on_disk(engine: Engine, vault: Path) -> None:
    out = engine.scribe("Body.", title="N", category="c")
    file = vault / out["path"]
    file.write_text(file.read_text().replace("title: N\n", "title: N\nrating: 5\n"))
    engine.revise(out["id"], importance=2)
    meta = frontmatter(file)
    assert meta["rating"] == 5 and meta["importance"] == 2


def test_erase_moves_the_file_to_trash_and_drops_it_from_search(engine: Engine, vault: Path) -> None:
    out = engine.scribe("Ephemeral fact about zebras.", title="Zebras", category="c")
    gone = engine.erase(out["id"])
    assert not (vault / out["path"]).exists()
    assert (vault / gone["trash_path"]).read_text().endswith("zebras.")
    assert engine.memorize("zebras")["results"] == []
    with pytest.raises(NoteNotFoundError):
        engine.get_memories([out["id"]])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.memorize("   "), "query is empty"),
        (lambda e: e.memorize("x", limit=0), "limit"),
        (lambda e: e.memorize("x", filter={"nope": 1}), "Invalid filter"),
        (lambda e: e.scribe(""), "text is empty"),
        (lambda e: e.scribe("x" * 50_001), "limit is 50,000"),
        (lambda e: e.scribe("x", importance=9), "importance"),
        (lambda e: e.scribe("x", type="rant"), "type must be one of"),
        (lambda e: e.scribe("x", tags=5), "tags must be a list"),
        (lambda e: e.scribe("x", keywords=[str(i) for i in range(101)]), "at most 100"),
        (lambda e: e.scribe("x", title="t" * 300), "title is 300"),
        (lambda e: e.revise("missing", text="x"), "No memory with id"),
        (lambda e: e.get_memories([]), "at least one id"),
    ],
)
def test_bad_input_gets_a_clear_error(engine: Engine, vault: Path, call, message: str) -> None:
    before = sorted(p for p in vault.rglob("*") if ".spellbook" not in p.parts)
    with pytest.raises(SpellbookError, match=message):
        call(engine)
    assert sorted(p for p in vault.rglob("*") if ".spellbook" not in p.parts) == before  # nothing written


def test_filters(engine: Engine) -> None:
    a = engine.scribe(
        "Alpha about caching",
        title="A",
        category="projects",
        topic="web",
        tags=["cache", "perf"],
        importance=4,
        type="decision",
        context="shop",
    )
    engine.scribe("Beta about caching", title="B", category="projects", topic="cli", tags=["cache"], importance=2)
    engine.scribe("Gamma about caching", title="G", category="people", tags=["perf"])

    def ids(**f):
        return {h["id"] for h in engine.memorize("caching", limit=10, filter=f)["results"]}

    assert ids(category="projects", topic="web") == {a["id"]}
    assert ids(tags=["cache", "perf"]) == {a["id"]}
    assert len(ids(tags_any=["cache", "perf"])) == 3
    assert ids(importance=3) == {a["id"]}
    assert ids(type="decision", context="shop") == {a["id"]}
    assert len(ids(folder="projects")) == 2
    listed = engine.list_memories({"category": "projects"}, limit=1)
    assert listed["total"] == 2 and len(listed["memories"]) == 1 and listed["next_offset"] == 1


def test_reconcile_catches_edits_made_while_down(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    out = engine.scribe("Original words about llamas.", title="Animals", category="c")
    engine.scribe("Note to delete about walruses.", title="Walrus", category="c")
    engine.close()
    file = vault / out["path"]
    file.write_text(file.read_text().replace("llamas", "alpacas"))
    (vault / "c" / "Walrus.md").unlink()
    (vault / "new.md").write_text("# New\n\nA fresh note about narwhals.\n")
    embedder = CountingEmbedder()
    engine = open_engine(settings, embedder)
    try:
        assert engine.memorize("alpacas", mode="keyword")["results"][0]["id"] == out["id"]
        assert engine.memorize("llamas", mode="keyword")["results"] == []
        assert engine.memorize("walruses", mode="keyword")["results"] == []
        assert engine.memorize("narwhals", mode="keyword")["results"][0]["path"] == "new.md"
        assert len(embedder.embedded) == 2  # only the edited and the new note were embedded
    finally:
        engine.close()


def test_unchanged_and_renamed_notes_are_not_embedded_again(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    out = engine.scribe("Stable content about otters.", title="Otters", category="c")
    engine.close()
    (vault / "moved").mkdir()
    os.replace(vault / out["path"], vault / "moved" / "Otters.md")
    embedder = CountingEmbedder()
    engine = open_engine(settings, embedder)
    try:
        assert embedder.embedded == []
        hit = engine.memorize("otters")["results"][0]
        assert hit["id"] == out["id"] and hit["path"] == "moved/Otters.md"  # id survives the move
    finally:
        engine.close()


def test_deleted_index_is_rebuilt_from_the_vault(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    out = engine.scribe("Penguins live in the south.", title="Penguins", category="c")
    engine.close()
    shutil.rmtree(vault / ".spellbook")
    engine = open_engine(settings)
    try:
        assert engine.memorize("penguins")["results"][0]["id"] == out["id"]
    finally:
        engine.close()


def test_another_embedder_rebuilds_instead_of_mixing_vectors(settings: Settings) -> None:
    engine = open_engine(settings)
    engine.scribe("Koalas sleep a lot.", title="Koalas", category="c")
    engine.close()
    other = HashingEmbedder(dimensions=64)
    other.model_id = "hashing-64"
    engine = Engine(settings, embedder=other)
    try:
        assert engine.indexer.needs_rebuild()
        engine.start()
        assert engine.stats()["embedder"] == "hashing-64"
        assert engine.memorize("koalas")["results"][0]["title"] == "Koalas"
    finally:
        engine.close()


def test_bad_files_are_skipped_and_reported(engine: Engine, vault: Path) -> None:
    (vault / "binary.md").write_bytes(b"\x00\x01\x02 binary")
    (vault / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (vault / "badyaml.md").write_text("---\ntitle: [oops\n---\nStill searchable text about quokkas.\n")
    (vault / "list.md").write_text("---\n- a\n---\nbody\n")
    (vault / "loop").symlink_to(vault, target_is_directory=True)
    engine.reconcile()
    stats = engine.stats()
    problems = {p["path"]: p["problem"] for p in stats["problems"]}
    assert "NUL" in problems["binary.md"] and "not UTF-8" in problems["latin1.md"]
    assert "malformed YAML" in problems["badyaml.md"] and "not a mapping" in problems["list.md"]
    assert stats["skipped"] == 2 and stats["warnings"] == 2
    assert engine.memorize("quokkas", mode="keyword")["results"][0]["path"] == "badyaml.md"
    with pytest.raises(InvalidInputError, match="Fix its frontmatter"):
        engine.revise(engine.memorize("quokkas")["results"][0]["id"], text="x")


def test_search_never_returns_a_note_changed_or_deleted_since_indexing(engine: Engine, vault: Path) -> None:
    out = engine.scribe("Capybaras are calm.", title="Capybara", category="c")
    (vault / out["path"]).unlink()  # no watcher here: the index does not know yet
    assert engine.memorize("capybaras")["results"] == []


def test_duplicate_ids_are_reported(engine: Engine, vault: Path) -> None:
    out = engine.scribe("Original.", title="Orig", category="c")
    shutil.copy(vault / out["path"], vault / "c" / "Copy.md")
    engine.reconcile()
    problems = {p["path"]: p["problem"] for p in engine.stats()["problems"]}
    assert "duplicate id" in problems["c/Copy.md"]
    assert engine.get_memories([out["id"]])["memories"][0]["path"] == out["path"]


def test_duplicate_ids_indexed_together_are_reported(engine: Engine, vault: Path) -> None:
    """Two copies that arrive in one batch (a git pull, a first index): the first in path order
    keeps the id, the other is reported, as when the copy comes later."""
    note = "---\nid: same-id\ntitle: Twin\n---\nOne of two files with one id.\n"
    for name in ("a.md", "b.md", "c.md"):
        (vault / "twins" / name).parent.mkdir(exist_ok=True)
        (vault / "twins" / name).write_text(note)
    engine.reconcile()
    problems = {p["path"]: p["problem"] for p in engine.stats()["problems"]}
    assert set(problems) == {"twins/b.md", "twins/c.md"}
    assert all("duplicate id 'same-id': twins/a.md has it too" in p for p in problems.values())
    assert engine.get_memories(["same-id"])["memories"][0]["path"] == "twins/a.md"


def test_get_index_counts_categories_and_topics(engine: Engine) -> None:
    engine.scribe("a", title="a", category="projects", topic="web")
    engine.scribe("b", title="b", category="projects", topic="web")
    engine.scribe("c", title="c", category="people")
    index = engine.get_index()
    assert index["total_notes"] == 3
    assert index["categories"]["projects"]["topics"]["web"]["notes"] == 2


def test_scribe_reports_similar_memories_and_related_excludes_itself(engine: Engine) -> None:
    first = engine.scribe("The office wifi password rotates every month.", title="Wifi", category="office")
    engine.scribe("Lunch is at noon in the cafeteria.", title="Lunch", category="office")
    again = engine.scribe("The office wifi password rotates every month.", title="Wifi again", category="office")
    assert again["similar"][0]["id"] == first["id"] and again["similar"][0]["near_duplicate"]
    assert all(not s["near_duplicate"] for s in again["similar"][1:])
    related = engine.related(first["id"], limit=5)["related"]
    assert first["id"] not in {r["id"] for r in related} and related[0]["id"] == again["id"]


def test_timeline_lists_neighbours_in_time(engine: Engine, vault: Path) -> None:
    ids = []
    for n in range(5):
        out = engine.scribe(f"Event number {n}.", title=f"Event {n}", category="log")
        file = vault / out["path"]  # give each a distinct creation time
        file.write_text(file.read_text().replace(out["created"], f"2026-01-0{n + 1}T00:00:00+00:00"))
        ids.append(out["id"])
    engine.reconcile()
    around = engine.timeline(ids[2], window=2)
    assert [m["id"] for m in around["before"]] == [ids[1], ids[0]]
    assert [m["id"] for m in around["after"]] == [ids[3], ids[4]]


def test_wikilinks_and_backlinks_resolve_like_obsidian(engine: Engine, vault: Path) -> None:
    (vault / "people").mkdir()
    (vault / "people" / "Minji Kim.md").write_text("---\naliases: [Minji]\n---\n# Minji Kim\n\nDesigner.\n")
    (vault / "Projects.md").write_text(
        "# Projects\n\nLed by [[Minji]] and [[people/Minji Kim|MK]]; see [[Roadmap#Q3]] and [[Nowhere]].\n"
        "```\n[[Not a link]]\n```\n"
    )
    (vault / "Roadmap.md").write_text("# Roadmap\n\n## Q3\n\nShip it.\n")
    engine.reconcile()
    projects = engine.memorize("Projects", mode="keyword")["results"][0]
    full = engine.get_memories([projects["id"]])["memories"][0]
    links = {link["target"]: link.get("path") for link in full["links"]}
    assert links == {
        "Minji": "people/Minji Kim.md",
        "people/Minji Kim": "people/Minji Kim.md",
        "Roadmap": "Roadmap.md",
        "Nowhere": None,
    }
    minji = engine.memorize("Designer", mode="keyword")["results"][0]
    backlinks = engine.get_memories([minji["id"]])["memories"][0]["backlinks"]
    assert [b["path"] for b in backlinks] == ["Projects.md"]


def test_interrupted_first_index_resumes_where_it_stopped(settings: Settings, vault: Path) -> None:
    for n in range(200):
        (vault / f"note {n:03d}.md").write_text(f"# Note {n}\n\nBody of note number {n}.\n")

    class Dies(CountingEmbedder):
        def embed_documents(self, texts):
            if len(self.embedded) >= 128:  # dies during the third batch of 64 files
                raise KeyboardInterrupt("killed")
            return super().embed_documents(texts)

    engine = Engine(settings, embedder=Dies())
    with pytest.raises(KeyboardInterrupt):
        engine.start()
    engine.close()
    resumed = CountingEmbedder()
    engine = open_engine(settings, resumed)
    try:
        assert len(resumed.embedded) == 200 - 128  # only what was not committed before
        assert engine.stats()["notes"] == 200
    finally:
        engine.close()


def test_huge_files_are_skipped_with_the_reason(engine: Engine, vault: Path) -> None:
    (vault / "huge.md").write_text("# Huge\n\n" + "word " * 1_300_000)
    engine.reconcile()
    problems = {p["path"]: p["problem"] for p in engine.stats()["problems"]}
    assert "too large" in problems["huge.md"]


def test_a_fifo_or_a_folder_named_like_a_note_is_passed_over(engine: Engine, vault: Path) -> None:
    """Read with O_NONBLOCK and looked at before reading: a pipe never blocks the scan."""
    os.mkfifo(vault / "pipe.md")
    (vault / "folder.md").mkdir()
    (vault / "real.md").write_text("# Real\n\nA note beside a pipe.\n")
    engine.reconcile()
    engine.indexer.sync_paths(["pipe.md", "folder.md"])  # as the watcher would, on an event for them
    assert engine.stats()["notes"] == 1
    assert engine.stats()["problems_total"] == 0


def test_importance_recency_and_superseded_nudge_ranking(
    settings: Settings, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(settings)
    try:
        low = engine.scribe("Kettle descaling uses citric acid.", title="Kettle A", category="home", importance=1)
        high = engine.scribe("Kettle descaling uses citric acid.", title="Kettle B", category="home", importance=5)
        top = engine.memorize("kettle descaling citric acid", limit=2, mode="semantic")["results"]
        assert [h["id"] for h in top] == [high["id"], low["id"]]
        engine.revise(high["id"], text="Kettle descaling uses citric acid.")
        file = vault / engine.get_memories([high["id"]])["memories"][0]["path"]
        file.write_text(file.read_text().replace("importance: 5\n", "importance: 5\nsuperseded_by: abc\n"))
        engine.reconcile()
        top = engine.memorize("kettle descaling citric acid", limit=2, mode="semantic")["results"]
        assert top[0]["id"] == low["id"]  # superseded (x0.5) outweighs importance (x1.1)
    finally:
        engine.close()
    monkeypatch.setattr(ranking, "RECENCY_HALF_LIFE_DAYS", 30.0)
    engine = open_engine(settings)
    try:
        old = engine.scribe("Bus timetable for line 7.", title="Bus old", category="town")
        new = engine.scribe("Bus timetable for line 7.", title="Bus new", category="town")
        file = vault / old["path"]
        file.write_text(file.read_text().replace(old["created"], "2020-01-01T00:00:00+00:00"))
        engine.reconcile()
        top = engine.memorize("bus timetable line 7", limit=10, mode="semantic")["results"]
        ranks = [h["id"] for h in top]
        assert ranks.index(new["id"]) < ranks.index(old["id"])
    finally:
        engine.close()


def test_coverage_reads_a_note_as_it_is_after_each_write(engine: Engine, vault: Path) -> None:
    """Search keeps what coverage reads in each candidate until the next write: a query asked
    again after a revise (new keywords) or a hand edit (new title) sees the note as it is now."""
    note = engine.scribe("Pasta water wants a lot of salt.", title="Cooking pasta", category="home")
    other = engine.scribe("Bread dough rests overnight in the fridge.", title="Bread", category="home")

    def relevance() -> float:
        hits = engine.memorize("pasta salt zucchini basil", limit=5, mode="hybrid")["results"]
        return next(h["relevance"] for h in hits if h["id"] == note["id"])

    first = relevance()
    assert relevance() == first  # asked again, nothing written: the same
    engine.revise(note["id"], keywords=["zucchini"])
    after_revise = relevance()
    assert after_revise > first
    engine.revise(other["id"], text="Bread dough rests overnight.")  # another note's write drops it all too
    assert relevance() == after_revise
    file = vault / note["path"]
    file.write_text(
        file.read_text(encoding="utf-8").replace("title: Cooking pasta", "title: Cooking pasta with basil"),
        encoding="utf-8",
    )
    engine.reconcile()
    assert relevance() > after_revise


def test_a_write_drops_only_the_kept_rows_of_the_notes_it_changed(engine: Engine, vault: Path, monkeypatch) -> None:
    """The catalog keeps the note rows searches read until a write changes their note: another
    note's write leaves them (the very objects), a revise, a hand edit and an erase do not, and a
    write whose transaction rolled back leaves what the catalog still holds."""
    a = engine.scribe("Alpha text.", title="Alpha", category="t")
    b = engine.scribe("Beta text.", title="Beta", category="t")
    paths = [a["path"], b["path"]]
    first = engine.catalog.notes_at(paths)
    engine.revise(a["id"], title="Alpha two")
    second = engine.catalog.notes_at(paths)
    assert second[b["path"]] is first[b["path"]]
    assert second[a["path"]].title == "Alpha two"
    file = vault / b["path"]
    file.write_text(file.read_text(encoding="utf-8").replace("title: Beta", "title: Beta by hand"), encoding="utf-8")
    engine.reconcile()
    third = engine.catalog.notes_at(paths)
    assert third[b["path"]].title == "Beta by hand" and third[a["path"]] is second[a["path"]]

    def failing(text: str) -> str:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr("spellbook.index.catalog.index_text", failing)
    file = vault / a["path"]
    file.write_text(
        file.read_text(encoding="utf-8").replace("title: Alpha two", "title: Alpha three"), encoding="utf-8"
    )
    with pytest.raises(RuntimeError):
        engine.indexer.sync_path(a["path"])
    assert engine.catalog.notes_at(paths)[a["path"]].title == "Alpha two"  # rolled back: the catalog's row
    monkeypatch.undo()
    engine.reconcile()
    assert engine.catalog.notes_at(paths)[a["path"]].title == "Alpha three"
    engine.erase(b["id"])
    assert b["path"] not in engine.catalog.notes_at(paths)


def test_get_topic_returns_a_topic_in_order(engine: Engine, vault: Path) -> None:
    first = engine.scribe("Step one: install.", title="One", category="guide", topic="setup")
    second = engine.scribe("Step two: configure.", title="Two", category="guide", topic="setup")
    engine.scribe("Unrelated.", title="Other", category="guide", topic="misc")
    file = vault / first["path"]
    file.write_text(file.read_text().replace(first["created"], "2026-01-01T00:00:00+00:00", 1))
    engine.reconcile()
    topic = engine.get_topic("setup")
    assert [m["id"] for m in topic["memories"]] == [first["id"], second["id"]]
    assert topic["memories"][1]["text"] == "Step two: configure." and topic["next_offset"] is None
    with pytest.raises(InvalidInputError, match="get_index"):
        engine.get_topic("nope")


def test_secrets_are_redacted_before_the_vault_and_in_answers(settings: Settings, vault: Path) -> None:
    key = "ghp_" + "a1B2c3D4e5" * 4
    engine = open_engine(settings)
    try:
        out = engine.scribe(
            f"Deploy token is GITHUB_TOKEN={key}\n<private>my diary</private>",
            title="Deploy",
            category="ops",
            keywords=["password: Xk9mPq2wZ7"],
        )
        text = (vault / out["path"]).read_text()
        assert key not in text and "my diary" not in text and "Xk9mPq2wZ7" not in text
        assert "[REDACTED:github-token]" in text and "[REDACTED:private]" in text
        assert "github-token" in out["redacted"]
        (vault / "hand.md").write_text(f"# Hand\n\nAWS key AKIA{'Q' * 16} for the bucket.\n")
        engine.reconcile()
        hit = engine.memorize("AWS key bucket", mode="keyword")["results"][0]
        assert "AKIA" not in hit["snippet"]
        full = engine.get_memories([hit["id"]])["memories"][0]
        assert "[REDACTED:aws-access-key]" in full["text"]
        assert "AKIA" in (vault / "hand.md").read_text()  # a person's file is never rewritten by reading
    finally:
        engine.close()
    off = open_engine(settings.model_copy(update={"redact": False}))
    try:
        out = off.scribe(f"token={key}", title="Raw", category="ops")
        assert key in (vault / out["path"]).read_text() and "redacted" not in out
    finally:
        off.close()
    with pytest.raises(InvalidInputError, match="Known kinds"):
        Engine(settings.model_copy(update={"redact_disabled": ["nope"]}), embedder=HashingEmbedder())
