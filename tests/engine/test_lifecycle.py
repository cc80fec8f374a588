"""Lifecycle: expires / ttl_days / temporary memories, the sweep to _archive/, erase_topic.
Expiry is tested by writing `expires` in the past, never by sleeping."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine, lifecycle
from spellbook.errors import InvalidInputError
from tests.helpers.engine import open_engine


def _days_from_now(value: str) -> float:
    when = dt.datetime.fromisoformat(value)
    return (when - dt.datetime.now(dt.UTC)).total_seconds() / 86_400


def _expire(vault: Path, path: str, when: str = "2020-01-01") -> None:
    """A person (or git) sets expires in the past, as Obsidian would write it."""
    file = vault / path
    text = file.read_text()
    lines = [ln for ln in text.split("\n") if not ln.startswith("expires:")]
    file.write_text("\n".join(lines).replace("\ntitle:", f"\nexpires: {when}\ntitle:", 1))


def test_expires_and_ttl_days_are_written_and_checked(engine: Engine, vault: Path) -> None:
    dated = engine.scribe("Conference badge pickup at hall B.", title="Badge", expires="2099-05-01")
    assert "\nexpires: 2099-05-01\n" in (vault / dated["path"]).read_text()
    timed = engine.scribe("Standup moved to 10:30.", title="Standup", expires="2099-05-01T10:30:00+09:00")
    assert "\nexpires: 2099-05-01T10:30:00+09:00\n" in (vault / timed["path"]).read_text()
    ttl = engine.scribe("The staging DB is being migrated.", title="Staging", ttl_days=2)
    meta = engine.get_memories([ttl["id"]])["memories"][0]["metadata"]
    assert 1.99 < _days_from_now(meta["expires"]) <= 2.0
    keys = [ln.split(":")[0] for ln in (vault / ttl["path"]).read_text().split("---\n")[1].splitlines()]
    assert keys == ["id", "title", "expires", "created", "updated"]  # expires before the timestamps

    with pytest.raises(InvalidInputError, match="expires or ttl_days, not both"):
        engine.scribe("x", expires="2099-01-01", ttl_days=3)
    with pytest.raises(InvalidInputError, match="ISO date or date-time"):
        engine.scribe("x", expires="next tuesday")
    with pytest.raises(InvalidInputError, match="ttl_days must be"):
        engine.scribe("x", ttl_days=0)
    with pytest.raises(InvalidInputError, match="in the past"):
        engine.scribe("x", expires="2001-01-01")
    with pytest.raises(InvalidInputError, match="archived"):
        engine.scribe("x", category="_archive")
    with pytest.raises(InvalidInputError, match="reserved for folder notes"):
        engine.scribe("x", title="_about", category="ops")
    assert not list(vault.rglob("x.md")) and not (vault / "ops").exists()

    revised = engine.revise(dated["id"], expires="2098-01-01")
    assert "\nexpires: 2098-01-01\n" in (vault / revised["path"]).read_text()
    engine.revise(dated["id"], expires="")  # '' removes it: the memory no longer expires
    assert "expires" not in (vault / dated["path"]).read_text()


def test_temporary_memories_get_the_default_ttl(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "DEFAULT_TTL_DAYS", 30.0)
    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False))
    try:
        temp = engine.scribe("The office is closed today.", title="Closed", type="temporary")
        meta = engine.get_memories([temp["id"]])["memories"][0]["metadata"]
        assert 2.99 < _days_from_now(meta["expires"]) <= 3.0  # TEMPORARY_TTL_DAYS, the Dewey 3 days
        other = engine.scribe("We use uv for Python.", title="uv")
        meta = engine.get_memories([other["id"]])["memories"][0]["metadata"]
        assert 29.99 < _days_from_now(meta["expires"]) <= 30.0  # DEFAULT_TTL_DAYS
        explicit = engine.scribe("Keep until May.", title="May", type="temporary", expires="2099-05-01")
        assert engine.get_memories([explicit["id"]])["memories"][0]["metadata"]["expires"] == "2099-05-01"
        # a hand-written note turned temporary by revise gets the TTL; an existing expires is kept
        (vault / "Hand.md").write_text("# Hand\n\nWritten by a person.\n")
        engine.reconcile()
        hand = engine.list_memories(filter={"folder": ""}, limit=50)["memories"]
        hand_id = next(m["id"] for m in hand if m["path"] == "Hand.md")
        engine.revise(hand_id, type="temporary")
        assert 2.99 < _days_from_now(engine.get_memories([hand_id])["memories"][0]["metadata"]["expires"]) <= 3.0
    finally:
        engine.close()
    monkeypatch.setattr(lifecycle, "TEMPORARY_TTL_DAYS", 0.0)
    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False))
    try:
        never = engine.scribe("Temporary but kept.", title="Kept", type="temporary")
        assert "expires" not in engine.get_memories([never["id"]])["memories"][0]["metadata"]
    finally:
        engine.close()


def test_expired_memories_drop_out_at_once_then_are_archived(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    try:
        keep = engine.scribe("The parking garage code is 4821.", title="Parking code", category="office", topic="car")
        gone = engine.scribe(
            "The parking garage is closed for cleaning.",
            title="Parking closed",
            category="office",
            topic="car",
            ttl_days=1,
        )
        _expire(vault, gone["path"])  # the day has come (written, not slept)
        engine.indexer.sync_path(gone["path"])
        original = (vault / gone["path"]).read_text()
        # hidden at query time, before any sweep: search (every mode), list, index, topic, related
        for mode in ("hybrid", "semantic", "keyword"):
            hits = engine.memorize("parking garage closed cleaning", mode=mode, limit=10)["results"]
            assert [h["id"] for h in hits] == [keep["id"]], mode
        assert [m["id"] for m in engine.list_memories()["memories"] if m["category"] == "office"] == [keep["id"]]
        assert engine.get_index()["categories"]["office"]["notes"] == 1
        assert [m["id"] for m in engine.get_topic("car")["memories"]] == [keep["id"]]
        assert gone["id"] not in {r["id"] for r in engine.related(keep["id"])["related"]}
        assert engine.get_memories([gone["id"]])["memories"][0]["text"]  # still readable by id

        swept = engine.sweep_expired()
        assert [a["id"] for a in swept["archived"]] == [gone["id"]]
        archived = vault / "_archive" / gone["path"]
        assert not (vault / gone["path"]).exists() and archived.read_text() == original  # moved, bytes kept
        assert engine.get_memories([gone["id"]])["memories"][0]["path"] == f"_archive/{gone['path']}"
        found = engine.memorize("parking garage closed", filter={"folder": "_archive"})["results"]
        assert [h["id"] for h in found] == [gone["id"]]  # the archive is searchable on request
        assert engine.get_index()["archived_notes"] == 1
        assert engine.sweep_expired()["count"] == 0
    finally:
        engine.close()
    engine = open_engine(settings)  # restart: the index equals the files on disk
    try:
        assert engine.check()["consistent"]
        live = [p for p in vault.rglob("*.md") if "_archive" not in p.parts and ".trash" not in p.parts]
        assert engine.list_memories(limit=200)["total"] == len(live)
        assert engine.get_memories([gone["id"]])["memories"][0]["path"].startswith("_archive/")
    finally:
        engine.close()


@pytest.mark.parametrize("max_skipped", [1_000, 10])
def test_many_hidden_notes_never_crowd_out_a_live_one(engine: Engine, vault: Path, monkeypatch, max_skipped) -> None:
    from spellbook.engine import search as searcher

    monkeypatch.setattr(searcher, "MAX_SKIPPED", max_skipped)  # 10: the filtered vector query instead
    text = "The parking garage is closed for cleaning."
    for n in range(40):
        (vault / "_archive" / "old").mkdir(parents=True, exist_ok=True)
        (vault / "_archive" / "old" / f"Closed {n}.md").write_text(text)  # archived
        (vault / f"Closed {n}.md").write_text(f"---\nexpires: 2020-01-01\n---\n{text}")  # expired, not swept
    engine.indexer.reconcile()  # index them all without the sweep
    live = engine.scribe(text + " Use the street.", title="Garage")
    for mode in ("semantic", "hybrid", "keyword"):
        hits = engine.memorize(text, mode=mode, limit=3)["results"]
        assert [h["id"] for h in hits] == [live["id"]], mode
    assert engine.list_memories()["total"] == 1


def test_a_cached_filter_forgets_a_note_the_moment_it_expires(engine: Engine) -> None:
    import time

    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)).replace(microsecond=0).isoformat()
    note = engine.scribe("The fire drill starts at 3pm.", title="Fire drill", category="office", expires=soon)
    found = engine.memorize("fire drill", filter={"category": "office"}, mode="semantic")["results"]
    assert [h["id"] for h in found] == [note["id"]]  # the filter's chunk ids are cached now
    time.sleep(max(0.0, dt.datetime.fromisoformat(soon).timestamp() - time.time()) + 1.1)
    assert engine.memorize("fire drill", filter={"category": "office"}, mode="semantic")["results"] == []


def test_reconcile_sweeps_what_expired_while_down(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    try:
        note = engine.scribe("Wifi is down on floor 3.", title="Wifi down", category="office", ttl_days=1)
    finally:
        engine.close()
    _expire(vault, note["path"], "2020-01-01T09:00:00+09:00")
    engine = open_engine(settings)  # start = reconcile, which sweeps
    try:
        assert (vault / "_archive" / note["path"]).is_file() and not (vault / note["path"]).exists()
        assert engine.check()["consistent"]
    finally:
        engine.close()


def test_the_sweep_rereads_the_file_before_moving_it(engine: Engine, vault: Path) -> None:
    note = engine.scribe("Visitors sign in at the desk.", title="Visitors", category="office", ttl_days=1)
    _expire(vault, note["path"])
    engine.indexer.sync_path(note["path"])
    _expire(vault, note["path"], "2099-01-01")  # a person extends it; the watcher has not seen it yet
    assert engine.sweep_expired()["count"] == 0
    assert (vault / note["path"]).is_file()
    assert engine.memorize("visitors sign in")["results"][0]["id"] == note["id"]


def test_erase_topic_lists_first_and_trashes_only_when_confirmed(engine: Engine, vault: Path) -> None:
    a = engine.scribe("Sprint 1 goals.", title="Sprint 1", category="work", topic="sprints")
    b = engine.scribe("Sprint 2 goals.", title="Sprint 2", category="work", topic="sprints")
    other = engine.scribe("Sprint planning in the garden club.", title="Garden", category="home", topic="sprints")
    engine.describe("work", topic="sprints", summary="Our two-week sprints")
    dry = engine.erase_topic("Sprints")
    assert not dry["confirmed"] and dry["count"] == 3 and dry["categories"] == ["home", "work"]
    assert {m["id"] for m in dry["would_remove"]} == {a["id"], b["id"], other["id"]}
    assert dry["description_files"] == ["work/sprints/_about.md"]
    assert all((vault / m["path"]).is_file() for m in dry["would_remove"])  # nothing moved
    with pytest.raises(InvalidInputError, match="several categories"):
        engine.erase_topic("sprints", confirm=True)
    done = engine.erase_topic("sprints", category="work", confirm=True)
    assert done["confirmed"] and done["count"] == 2
    assert {m["id"] for m in done["removed"]} == {a["id"], b["id"]}
    for m in done["removed"]:
        assert (vault / m["trash_path"]).is_file() and not (vault / m["path"]).exists()
    assert (vault / ".trash/work/sprints/_about.md").is_file() and not (vault / "work/sprints").exists()
    assert engine.get_topic("sprints")["memories"][0]["id"] == other["id"]
    with pytest.raises(InvalidInputError, match="No memories in topic 'sprints' in category 'work'.*get_index"):
        engine.erase_topic("sprints", category="work")
    with pytest.raises(InvalidInputError, match="topic is empty"):
        engine.erase_topic(" ")
    assert engine.check()["consistent"]


@pytest.mark.parametrize(("given", "stored"), [("high", 5), ("Medium", 3), (" low ", 1), ("4", 4), (2, 2)])
def test_importance_words_and_numbers_are_normalised(engine: Engine, vault: Path, given, stored) -> None:
    out = engine.scribe("Some fact.", title="Fact", importance=given)
    assert f"\nimportance: {stored}\n" in (vault / out["path"]).read_text()
    (vault / "Hand.md").write_text(f"---\nimportance: {given!s}\n---\nHand fact.\n")
    engine.reconcile()
    rows = {m["path"]: m["importance"] for m in engine.list_memories(limit=50)["memories"]}
    assert rows["Hand.md"] == stored and rows[out["path"]] == stored


def test_archive_erase_topic_and_describe_are_committed_when_the_vault_is_a_repository(tmp_path: Path) -> None:
    from tests.helpers.git import committed_files, git, head

    vault = tmp_path / "vault"
    vault.mkdir()
    git(vault, "init", "-q", "-b", "main")
    (vault / ".gitignore").write_text(".spellbook/\n.trash/\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "base")
    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False, git_commit="true"))
    try:
        note = engine.revise(
            engine.scribe("Printer on floor 2 is broken.", title="Printer", category="office", topic="kit", ttl_days=1)[
                "id"
            ],
            expires="2020-01-01",
        )
        engine.sweep_expired()
        engine.git.flush()
        assert head(vault).startswith('spellbook: archive "Printer"') and head(vault).endswith(
            f"to _archive/{note['path']}"
        )
        moved = git(vault, "show", "--name-status", "--no-renames", "--format=", "HEAD").splitlines()
        assert sorted(moved) == [f"A\t_archive/{note['path']}", f"D\t{note['path']}"]
        assert engine.history(note["id"])["path"] == f"_archive/{note['path']}"

        engine.describe("office", topic="kit", summary="Office equipment")
        engine.git.flush()
        assert head(vault).startswith('spellbook: describe "office/kit"')
        assert committed_files(vault) == ["office/kit/_about.md"]

        kept = engine.scribe(
            "The projector remote is in the drawer.", title="Projector", category="office", topic="kit"
        )
        engine.erase_topic("kit", confirm=True)
        engine.git.flush()
        subjects = git(vault, "log", "-2", "--format=%s").splitlines()
        assert subjects[1].startswith('spellbook: erase "Projector"') and subjects[0].startswith(
            'spellbook: erase "office/kit"'
        )
        assert engine.history(kept["id"])["erased"]
        assert git(vault, "status", "--porcelain") == ""  # nothing Spellbook did is left uncommitted
    finally:
        engine.close()


# --- over real MCP stdio ------------------------------------------------------------------------


@pytest.mark.slow
def test_lifecycle_tools_over_stdio(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from tests.helpers.stdio import call, error, eventually, stdio_server

    vault = tmp_path / "vault"
    params = stdio_server(vault, {"spellbook.engine.lifecycle.SWEEP_SECONDS": 1.0})
    ids: dict[str, str] = {}

    async def first_run() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("scribe", "revise"):
                assert {"expires", "ttl_days"} <= set(tools[name].input_schema["properties"])
            temp = await call(
                client,
                "scribe",
                text="The lift in block C is out of order.",
                title="Lift",
                category="building",
                topic="notices",
                ttl_days=1,
            )
            keep = await call(
                client,
                "scribe",
                text="The lift in block A works fine.",
                title="Lift A",
                category="building",
                topic="notices",
                expires="2099-01-01",
            )
            meta = (await call(client, "get_memories", ids=[temp["id"]]))["memories"][0]["metadata"]
            assert 0.99 < _days_from_now(meta["expires"]) <= 1.0
            ids.update(temp=temp["id"], keep=keep["id"], path=temp["path"])

            assert "ISO date or date-time" in await error(client, "scribe", text="x", expires="soon")
            assert "not both" in await error(client, "scribe", text="x", expires="2099-01-01", ttl_days=2)
            assert "ttl_days" in await error(client, "scribe", text="x", ttl_days=0)
            assert "in the past" in await error(client, "scribe", text="x", expires="2001-01-01")
            assert "No memories in topic 'nope'" in await error(client, "erase_topic", topic="nope")
            assert not list(vault.rglob("x.md"))

            # the agent retires a memory: hidden at once, archived by the owner's periodic sweep
            await call(client, "revise", id=temp["id"], expires="2020-01-01")
            hits = (await call(client, "memorize", query="lift block out of order", limit=10))["results"]
            assert temp["id"] not in {h["id"] for h in hits} and keep["id"] in {h["id"] for h in hits}
            listed = await call(client, "list_memories", filter={"category": "building"})
            assert [m["id"] for m in listed["memories"]] == [keep["id"]]

            async def archived():
                return (vault / "_archive" / temp["path"]).is_file() and not (vault / temp["path"]).exists()

            assert await eventually(archived, timeout=10)

            # a person drops in a note that has already expired: never searchable, then archived
            (vault / "building").mkdir(exist_ok=True)
            (vault / "building" / "Old notice.md").write_text(
                "---\nexpires: 2020-02-01\n---\n# Old notice\n\nThe boiler room is being painted.\n"
            )
            await anyio.sleep(1)
            hits = (await call(client, "memorize", query="boiler room painted", mode="keyword"))["results"]
            assert not any(h["path"].endswith("Old notice.md") for h in hits)

            async def hand_archived():
                return (vault / "_archive" / "building" / "Old notice.md").is_file()

            assert await eventually(hand_archived, timeout=10)
            found = await call(client, "memorize", query="boiler room painted", filter={"folder": "_archive"})
            assert found["results"][0]["path"] == "_archive/building/Old notice.md"

            dry = await call(client, "erase_topic", topic="notices")
            assert not dry["confirmed"] and [m["id"] for m in dry["would_remove"]] == [keep["id"]]
            assert (vault / keep["path"]).is_file()
            done = await call(client, "erase_topic", topic="notices", category="building", confirm=True)
            assert done["confirmed"] and (vault / done["removed"][0]["trash_path"]).is_file()
            assert not (vault / keep["path"]).exists()

    async def second_run() -> None:
        async with Client(params) as client:
            live = [p for p in vault.rglob("*.md") if not {"_archive", ".trash"} & set(p.relative_to(vault).parts)]
            assert (await call(client, "list_memories", limit=200))["total"] == len(live)
            memory = (await call(client, "get_memories", ids=[ids["temp"]]))["memories"][0]
            assert memory["path"] == f"_archive/{ids['path']}"
            assert "No memory with id" in await error(client, "get_memories", ids=[ids["keep"]])
            index = await call(client, "get_index")
            assert "building" not in index["categories"] and index["archived_notes"] == 2

    anyio.run(first_run)
    anyio.run(second_run)
