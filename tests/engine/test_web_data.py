"""What the web view reads from the engine: the activity log (who wrote what, in which scope, which
commit), the graph (scope, filters, sampling), memorize's ``found_by``, and the memo that keeps
whole-vault answers until the index changes. Real files, catalog, Chroma and git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.engine.graph import Graph
from spellbook.scope import Actor, Scope, acting, scoped
from spellbook.server.hub import Hub
from tests.helpers.git import git


@pytest.fixture
def git_vault(vault: Path) -> Path:
    git(vault, "init", "-q")
    return vault


def test_activity_records_tool_client_session_scope_and_commit(git_vault: Path, settings: Settings) -> None:
    engine = Engine(settings)
    engine.start()
    try:
        with acting(Actor("claude-code", "s-1")):
            a = engine.scribe("Cats purr.", title="Cats", category="pets")
        with scoped(Scope(context="zoo")), acting(Actor("cursor", None)):
            z = engine.scribe("Lions roar.", title="Lions", category="pets")
        engine.revise(a["id"], text="Cats purr loudly.", version=a["version"])
        engine.erase(z["id"])  # unscoped erase of zoo's memory: its line keeps the note's scope
        log = engine.activity(limit=10)
        assert [(e["tool"], e["title"]) for e in log["entries"]] == [
            ("erase", "Lions"),
            ("revise", "Cats"),
            ("scribe", "Lions"),
            ("scribe", "Cats"),
        ]
        scribed = log["entries"][3]
        assert (scribed["client"], scribed["session"], scribed["id"]) == ("claude-code", "s-1", a["id"])
        assert all(len(e["commit"]) == 40 for e in log["entries"])
        assert git(git_vault, "log", "-1", "--format=%H").strip() == log["entries"][0]["commit"]
        assert log["entries"][0]["context"] == "zoo"
        with scoped(Scope(context="farm")):
            assert [e["title"] for e in engine.activity()["entries"]] == ["Cats", "Cats"]
        assert [e["tool"] for e in engine.activity(tool="scribe")["entries"]] == ["scribe", "scribe"]
        page = engine.activity(limit=1, offset=1)
        assert page["more"] and page["entries"][0]["tool"] == "revise"
        lines = (settings.index_path / "activity.jsonl").read_text().splitlines()
        assert len(lines) == 4 and all(json.loads(line)["time"].endswith("Z") for line in lines)
    finally:
        engine.close()


def test_activity_without_git_and_for_imports(vault: Path, settings: Settings, tmp_path: Path) -> None:
    engine = Engine(settings)
    engine.start()
    try:
        engine.scribe("No git here.", title="Plain")
        export = tmp_path / "in.json"
        memories = [
            {
                "id": i,
                "path": f"imp/{t}.md",
                "title": t,
                "body": "Text.",
                "metadata": {"id": i, "title": t, **({"context": c} if c else {})},
            }
            for i, t, c in (("imp1", "Imported one", None), ("imp2", "Imported two", "zoo"))
        ]
        export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}))
        engine.import_memories(str(export))
        entries = engine.activity()["entries"]
        assert [(e["tool"], e["title"], e.get("commit", None)) for e in entries] == [
            ("import", "Imported two", None),
            ("import", "Imported one", None),
            ("scribe", "Plain", None),
        ]
        with scoped(Scope(context="blog")):
            assert "Imported two" not in [e["title"] for e in engine.activity()["entries"]]
    finally:
        engine.close()


def test_hub_carries_the_callers_client_and_session(vault: Path) -> None:
    settings = Settings(vault=vault, embedder="hashing", watch=False, session_id="sess-9")
    hub = Hub(settings, reconcile_on_open=False, warm_up=False, client="cli")
    hub.start(background=False)
    try:
        hub.call("scribe", {"text": "From the shell.", "title": "Shell"})
        with acting(Actor("web")):
            hub.call("scribe", {"text": "From a page.", "title": "Page"})
        entries = hub.call("activity", {})["entries"]
        assert [(e["client"], e["session"]) for e in entries] == [("web", "sess-9"), ("cli", "sess-9")]
    finally:
        hub.close()


def test_graph_scope_filters_and_sampling(engine: Engine) -> None:
    hub_note = engine.scribe("The centre.", title="Centre", category="eng", tags=["core"])
    for i in range(5):
        engine.scribe(f"Spoke {i} links to [[Centre]].", title=f"Spoke {i}", category="eng" if i < 3 else "ops")
    with scoped(Scope(context="secret")):
        engine.scribe("Hidden links to [[Centre]].", title="Hidden", category="eng")
    whole = engine.graph()
    titles = {n["title"] for n in whole["nodes"]}
    assert {"Centre", "Spoke 0", "Hidden"} <= titles
    with scoped(Scope(context="other")):
        seen = engine.graph()
    assert "Hidden" not in {n["title"] for n in seen["nodes"]}
    assert all(e["source"] in {n["id"] for n in seen["nodes"]} for e in seen["edges"])
    centre = next(n for n in seen["nodes"] if n["id"] == hub_note["id"])
    assert centre["degree"] == 5 and len(seen["edges"]) == 5
    ops = engine.graph(category="ops")
    assert {n["title"] for n in ops["nodes"]} == {"Spoke 3", "Spoke 4"} and ops["edges"] == []
    assert {n["title"] for n in engine.graph(tag="CORE")["nodes"]} == {"Centre"}
    sampled = Graph(engine.catalog, engine.access, engine.readiness).graph(category="eng", limit=2)
    assert sampled["sampled"] and sampled["total"] == 5 and sampled["shown"] == 2
    assert sampled["nodes"][0]["title"] == "Centre"  # the most linked is kept first
    assert "eng" in whole["categories"] and "core" in whole["tags"]


def test_memorize_says_which_side_found_each_hit(engine: Engine) -> None:
    engine.scribe("Zanzibar ferries leave at dawn.", title="Ferries")
    hit = engine.memorize("zanzibar ferries")["results"][0]
    assert hit["found_by"] == ["keywords", "meaning"]
    assert engine.memorize("zanzibar", mode="keyword")["results"][0]["found_by"] == ["keywords"]
    assert engine.memorize("zanzibar ferries", mode="semantic")["results"][0]["found_by"] == ["meaning"]


def test_memo_keeps_whole_vault_answers_until_the_index_changes(engine: Engine) -> None:
    engine.scribe("Alpha.", title="Alpha")
    first = engine.analyze_knowledge()
    assert engine.analyze_knowledge() is first  # kept
    assert engine.graph() is engine.graph()
    with scoped(Scope(context="x")):
        assert engine.analyze_knowledge() is not first  # per scope
    engine.scribe("Beta.", title="Beta")
    second = engine.analyze_knowledge()
    assert second is not first and second["notes"] == first["notes"] + 1
    engine.memo.changes = lambda: -1  # as if the index changed again
    from spellbook.engine import memo

    memo.REFRESH_SECONDS, old = 0.0, memo.REFRESH_SECONDS
    try:
        assert engine.memo.refresh() >= 2  # the answers asked for recently are recomputed
        assert engine.analyze_knowledge() is not second
        assert engine.analyze_knowledge() is engine.analyze_knowledge()
    finally:
        memo.REFRESH_SECONDS = old


def test_pages_get_the_last_answer_at_once_after_a_write_and_a_fresh_one_after_refresh(
    engine: Engine, monkeypatch
) -> None:
    """The web pages' reads (stale_ok) never wait for a whole-vault recompute after a write: they get
    the kept answer with its age, and the owner's refresh makes the new one; the MCP tool (no
    stale_ok) always answers for the vault as it is."""
    from spellbook.engine import memo

    engine.scribe("Alpha.", title="Alpha")
    first = engine.analyze_knowledge(stale_ok=True)
    graph = engine.graph()
    assert "stale_seconds" not in first and "stale_seconds" not in graph
    engine.scribe("Beta.", title="Beta")
    stale = engine.analyze_knowledge(stale_ok=True)
    assert stale["notes"] == first["notes"] and stale["stale_seconds"] >= 0
    assert engine.graph()["stale_seconds"] >= 0 and len(engine.graph()["nodes"]) == len(graph["nodes"])
    fresh = engine.analyze_knowledge()  # the tool's call: computed for the vault as it is now
    assert fresh["notes"] == first["notes"] + 1 and "stale_seconds" not in fresh
    monkeypatch.setattr(memo, "REFRESH_SECONDS", 0.0)
    engine.memo.refresh()
    assert len(engine.graph()["nodes"]) == len(graph["nodes"]) + 1 and "stale_seconds" not in engine.graph()
    assert engine.analyze_knowledge(stale_ok=True)["notes"] == first["notes"] + 1


def test_a_kept_answer_never_shows_a_note_that_is_gone(engine: Engine) -> None:
    keep = engine.scribe("Gamma stays.", title="Gamma")
    gone = engine.scribe("Delta goes.", title="Delta")
    before = engine.analyze_knowledge(stale_ok=True)
    untagged = next(i for i in before["issues"] if i["kind"] == "untagged")
    assert {gone["id"], keep["id"]} <= {n["id"] for n in untagged["notes"]}
    assert gone["id"] in {n["id"] for n in engine.graph()["nodes"]}
    engine.erase(gone["id"])
    stale = engine.analyze_knowledge(stale_ok=True)
    assert "stale_seconds" in stale
    notes = {n["id"] for i in stale["issues"] for n in i["notes"]}
    assert gone["id"] not in notes and keep["id"] in notes
    graph = engine.graph()
    assert "stale_seconds" in graph and gone["id"] not in {n["id"] for n in graph["nodes"]}
    assert all(gone["id"] not in (e["source"], e["target"]) for e in graph["edges"])
