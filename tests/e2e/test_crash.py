"""kill -9 at any moment loses no acknowledged note, leaves no half-written file, and the next
start repairs the index."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.vault.note import parse_note
from tests.helpers.engine import open_engine

pytestmark = pytest.mark.slow

WRITER = """
import sys
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
engine = Engine(Settings(vault=sys.argv[1], embedder="hashing", watch=False), embedder=HashingEmbedder())
engine.start()
print("ready", flush=True)
n = 0
while True:
    n += 1
    out = engine.scribe(f"Round {sys.argv[2]} note {n} body " * 20, title=f"r{sys.argv[2]} n{n}", category="crash")
    if n % 3 == 0:
        engine.revise(out["id"], text=f"Revised round {sys.argv[2]} note {n}")
    print(out["id"], flush=True)
"""


def test_kill_9_in_a_loop_loses_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    settings = Settings(vault=vault, embedder="hashing", watch=False)
    acknowledged: list[str] = []
    rng = random.Random(7)
    for round_ in range(8):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(vault), str(round_)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(0.05 + rng.random())  # kill at a random moment of the write loop
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate()
        acknowledged += out.split()
        if not acknowledged:
            continue

        for file in vault.rglob("*.md"):
            if ".trash" in file.parts:
                continue
            parsed = parse_note(file.read_text(encoding="utf-8"))
            assert parsed.problem is None and parsed.meta.get("id"), file  # never half a file
        engine = open_engine(settings)
        try:
            assert not list(vault.rglob(".*.tmp")), "leftover temp files were not cleaned up"
            found = engine.get_memories(acknowledged[-20:])
            assert not found["not_found"]
            assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
            assert engine.check()["consistent"]  # what `spellbook doctor` checks
            files = [f for f in vault.rglob("*.md") if ".spellbook" not in f.parts]
            assert engine.stats()["notes"] == len(files)
        finally:
            engine.close()
    assert len(acknowledged) > 20  # the writer really wrote between kills


# --- kill points: the owner dies at a chosen point of the write path (spellbook/crashpoints.py) ---

POINT_WRITER = """
import itertools, sys, time
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
engine = Engine(Settings(vault=sys.argv[1], embedder="hashing", watch=False), embedder=HashingEmbedder())
engine.start()
print("ready", flush=True)
deadline = time.monotonic() + 90
for n in itertools.count(1):  # until killed: vectors-behind's writer batches for up to a second, so
    if time.monotonic() > deadline:  # its 6th batch comes ~6 s in, whatever the machine's speed
        break
    out = engine.scribe(f"Point note {n} body " * (3 + n % 7), title=f"{sys.argv[2]} {n}", category="points")
    print(out["id"], flush=True)
    if n % 2 == 0:
        engine.revise(out["id"], text=f"Revised point note {n}")
        print(out["id"], flush=True)
    engine.git.flush()
engine.close()
"""


def _index_equals_vault(engine, vault: Path, acknowledged: list[str]) -> None:
    report = engine.check()
    assert report["consistent"], report  # what `spellbook doctor` checks
    assert engine.vectors.ids() == engine.catalog.all_chunk_ids()  # vectors the writer never wrote: embedded again
    _every_vector_is_its_texts(engine)
    for start in range(0, len(acknowledged), 20):
        assert not engine.get_memories(acknowledged[start : start + 20])["not_found"]
    files = [f for f in vault.rglob("*.md") if not {".spellbook", ".trash", ".git"} & set(f.parts)]
    assert engine.stats()["notes"] == len(files)
    assert not list(vault.rglob(".*.tmp"))


def _every_vector_is_its_texts(engine) -> None:
    """No chunk kept the vector of an older text (a revise killed before Chroma had its new vector)."""
    from spellbook.index.analysis import embed_text

    chunks = engine.catalog.chunks(sorted(engine.catalog.all_chunk_ids()))
    notes = engine.catalog.notes_at({c.path for c in chunks.values()})
    stored = engine.vectors.vectors(list(chunks))
    texts = {cid: embed_text(notes[c.path].title, c.heading, c.text) for cid, c in chunks.items()}
    expected = dict(zip(texts, HashingEmbedder().embed_documents(list(texts.values()))))
    wrong = [cid for cid in chunks if max(abs(a - b) for a, b in zip(stored[cid], expected[cid])) > 1e-5]
    assert not wrong, (
        f"{len(wrong)} of {len(chunks)} chunks have another text's vector: {[chunks[c].text[:40] for c in wrong[:3]]}"
    )


@pytest.mark.parametrize(
    "point", ["file-written", "vectors-written", "vectors-behind", "catalog-transaction", "git-commit"]
)
def test_kill_at_each_point_of_the_write_path(tmp_path: Path, point: str) -> None:
    from tests.helpers.processes import child_env

    vault = tmp_path / "vault"
    vault.mkdir()
    if point == "git-commit":
        subprocess.run(["git", "init", "-q", str(vault)], check=True)
    settings = Settings(vault=vault, embedder="hashing", watch=False)
    acknowledged: list[str] = []
    for round_, nth in enumerate((1, 3, 6)):  # the 1st, 3rd, 6th time the point is reached
        env = child_env(SPELLBOOK_TEST_CRASH_AT=f"{point}:{nth}", PYTHONPATH=str(Path(__file__).parents[2]))
        writer = subprocess.Popen(
            [sys.executable, "-c", POINT_WRITER, str(vault), f"{point} r{round_}"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        out, _ = writer.communicate(timeout=120)
        assert writer.returncode == -signal.SIGKILL, f"the writer did not die at {point}: {out[-200:]}"
        lines = out.split()
        acknowledged += [line for line in lines if line != "ready"]
        engine = open_engine(settings)
        try:
            _index_equals_vault(engine, vault, acknowledged)
        finally:
            engine.close()
    assert acknowledged


def test_a_catalog_write_is_all_or_nothing(tmp_path: Path) -> None:
    """A file's ledger row, note and chunks commit together: a failure half way leaves none of
    them (before, each statement committed on its own, and a kill between the ledger row and
    the note left a file marked indexed with no note, which no reconcile looked at again)."""
    from spellbook.index.catalog import Catalog, FileRow, NoteRow

    catalog = Catalog(tmp_path / "c.sqlite3")
    bad = NoteRow(
        path="a.md",
        note_id="a",
        title={"not": "bindable"},
        category=None,
        topic=None,
        type=None,  # type: ignore[arg-type]
        context=None,
        importance=None,
        tags=[],
        created=None,
        updated=None,
        folder="",
        managed=True,
        meta={},
    )
    with pytest.raises(Exception):
        catalog.replace(FileRow("a.md", "v1", 1, 1, None), bad, [])
    assert catalog.file("a.md") is None
    catalog.close()


def test_a_ledger_row_without_its_note_is_reindexed_and_reported(settings: Settings, vault: Path) -> None:
    """An index damaged by the old non-atomic writes: doctor says so, the next start repairs it."""
    engine = open_engine(settings)
    try:
        out = engine.scribe("Body of a note that lost its catalog row", title="Lost")
        engine.catalog._db.execute("DELETE FROM notes WHERE path = ?", (out["path"],))
        assert engine.check()["not_indexed"] == [out["path"]]
        engine.reconcile()
        assert engine.check()["consistent"]
        assert not engine.get_memories([out["id"]])["not_found"]
    finally:
        engine.close()


def test_closing_during_a_reconcile_leaves_no_orphan_vector(settings: Settings, vault: Path) -> None:
    """A clean exit while the start-up reconcile is between a batch's vectors and its catalog
    rows waits for the batch, so the index still equals the vault (doctor, without a reconcile)."""
    import threading

    for n in range(5):
        (vault / f"hand {n}.md").write_text(f"# Hand {n}\n\nWritten by hand, note {n}.\n", encoding="utf-8")
    engine = Engine(settings, embedder=HashingEmbedder())
    engine.prepare()
    in_batch = threading.Event()
    real_upsert = engine.vectors.upsert

    def slow_upsert(*args, **kwargs):
        real_upsert(*args, **kwargs)
        in_batch.set()
        time.sleep(0.5)  # the catalog rows of this batch are written after this

    engine.vectors.upsert = slow_upsert
    worker = threading.Thread(target=_quiet, args=(engine.reconcile,))
    worker.start()
    assert in_batch.wait(30)
    engine.close()
    worker.join(30)
    again = Engine(settings, embedder=HashingEmbedder())
    try:
        counts = again.check()["counts"]
        assert counts["orphan_vectors"] == 0 and counts["vectors_missing"] == 0, counts
    finally:
        again.close()


def _quiet(run) -> None:
    try:
        run()
    except Exception:  # the engine closed under the reconcile: expected here
        pass


def test_a_hand_edit_is_synced_while_agents_keep_writing(settings: Settings, vault: Path) -> None:
    """The watcher's debounce waits for quiet, but not forever: with events arriving every 0.1 s
    (agents writing through the owner), a person's edit is still indexed within seconds, and
    what is pending when the watcher stops is synced before the index closes."""
    import threading

    from spellbook.index.watcher import VaultWatcher

    engine = open_engine(settings)
    watcher = VaultWatcher(engine.indexer, debounce=0.25)
    watcher.start()
    stop = threading.Event()

    def busy() -> None:
        n = 0
        while not stop.wait(0.1):
            n += 1
            (vault / "busy.md").write_text(f"# Busy\n\nwrite {n}\n", encoding="utf-8")

    writer = threading.Thread(target=busy)
    writer.start()
    try:
        time.sleep(0.5)
        (vault / "Hand.md").write_text("# Hand\n\nEdited by a person while agents write.\n", encoding="utf-8")
        deadline = time.monotonic() + 6
        while engine.catalog.note_at("Hand.md") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert engine.catalog.note_at("Hand.md") is not None, "the edit waited for a quiet that never came"
        (vault / "Last.md").write_text("# Last\n\nWritten just before the server stops.\n", encoding="utf-8")
        time.sleep(0.3)  # the event is delivered; the debounce has not fired yet
    finally:
        stop.set()
        writer.join()
        watcher.stop()
    try:
        assert engine.check()["consistent"], engine.check()
    finally:
        engine.close()


OWNER = """
import sys, time
from spellbook.config import Settings
from spellbook.server.hub import Hub
hub = Hub(Settings(vault=sys.argv[1], embedder="hashing", watch=False))
hub.start(background=False)
print(hub.role, flush=True)
time.sleep(120)
"""


def test_a_scribe_retried_after_the_owner_died_writes_one_note(tmp_path: Path) -> None:
    """The owner writes the note and is killed before it answers; the follower sends the call
    again to the next owner (itself), which finds the note instead of writing a second one."""
    from spellbook.server.hub import Hub
    from tests.helpers.processes import child_env

    vault = tmp_path / "vault"
    vault.mkdir()
    env = child_env(SPELLBOOK_TEST_CRASH_AT="file-written:1", PYTHONPATH=str(Path(__file__).parents[2]))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(vault)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "owner"
        follower = Hub(Settings(vault=vault, embedder="hashing", watch=False))
        follower.start()
        try:
            assert follower.role == "follower"
            out = follower.call("scribe", {"text": "Written once, acknowledged once.", "title": "Once"})
            assert owner.wait(timeout=30) == -signal.SIGKILL  # it died at the file, before answering
            assert follower.role == "owner"
            notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md") if ".spellbook" not in p.parts)
            assert notes == [out["path"]], notes
            assert parse_note((vault / out["path"]).read_text(encoding="utf-8")).meta["id"] == out["id"]
            assert follower.call("get_memories", {"ids": [out["id"]]})["memories"][0]["id"] == out["id"]
        finally:
            follower.close()
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.parametrize("nth", [1, 40, 170])  # the first note, inside the first batches, a later batch
def test_an_import_killed_mid_batch_leaves_whole_notes_and_completes_when_run_again(tmp_path: Path, nth: int) -> None:
    """``spellbook import`` writes new notes in batches (temps, one fsync pass, then the names): a kill
    between two names of a batch leaves every written note whole and the rest as temp files, which
    the next start removes; the same import run again writes exactly what is missing."""
    from tests.helpers.processes import SPELLBOOK, child_env

    vault = tmp_path / "vault"
    vault.mkdir()
    memories = [
        {
            "id": f"m{n}",
            "path": f"imp/Note {n}.md",
            "title": f"Note {n}",
            "metadata": {"id": f"m{n}"},
            "body": f"Imported body number {n}. " * 5,
        }
        for n in range(200)
    ]
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}), encoding="utf-8")
    command = [SPELLBOOK, "import", "--vault", str(vault), "--embedder", "hashing", str(export)]
    killed = subprocess.run(
        command,
        env=child_env(SPELLBOOK_TEST_CRASH_AT=f"file-written:{nth}"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-500:]
    written = sorted(vault.glob("imp/*.md"))
    assert len(written) == nth  # the kill came right after the nth name
    for file in written:
        n = int(file.stem.split()[-1])
        parsed = parse_note(file.read_text(encoding="utf-8"))
        assert parsed.meta["id"] == f"m{n}" and parsed.body == f"Imported body number {n}. " * 5, file
    # The batch's other notes, whole but not yet named, in the index's temp folder (none beside the notes).
    assert list(vault.glob(".spellbook/tmp/.*.tmp")) and not list(vault.glob("imp/.*.tmp"))

    again = subprocess.run(command, env=child_env(), capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr[-500:]
    assert not list(vault.rglob(".*.tmp"))
    assert len(list(vault.glob("imp/*.md"))) == 200
    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False))
    try:
        assert engine.check()["consistent"]
        assert engine.stats()["notes"] == 200
    finally:
        engine.close()
