"""The vault watcher with a real observer (inotify here) over a real vault: a file still open for
writing is not read until it is closed, so an editor's in-place save (truncate, write, close) is
never indexed half done; a file kept open is indexed all the same once its hold runs out. A path a
writer claimed (an import) is left to it: not read or embedded twice, and synced after its release
only when it changed since."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.index.claims import Claims, with_folders
from spellbook.index.watcher import VaultWatcher
from tests.helpers.engine import CountingEmbedder

DEBOUNCE = 0.1


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "kettle.md").write_text("# Kettle\n\nDescale it with citric acid, zqold.\n")
    engine = Engine(
        Settings(vault=vault, index_dir=tmp_path / "index", embedder="hashing", watch=False), embedder=HashingEmbedder()
    )
    engine.start()
    yield engine
    engine.close()


@pytest.fixture
def watch(engine: Engine) -> Iterator[Callable[..., VaultWatcher]]:
    started: list[VaultWatcher] = []

    def start(**kwargs) -> VaultWatcher:
        watcher = VaultWatcher(engine.indexer, DEBOUNCE, **kwargs)
        watcher.start()
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.stop()


def indexed_text(engine: Engine, path: str) -> str:
    return " ".join(chunk.text for chunk in engine.catalog.chunks_of(path))


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_a_save_in_place_is_indexed_once_closed_never_empty_in_between(engine: Engine, watch) -> None:
    watch()
    file = engine.vault.root / "kettle.md"
    with open(file, "w", encoding="utf-8") as save:  # truncated now, as an editor saving in place does
        seen: list[str] = []
        end = time.monotonic() + 1.0  # ten debounces with the file empty on disk
        while time.monotonic() < end:
            seen.append(indexed_text(engine, "kettle.md"))
            time.sleep(0.05)
        assert file.read_text() == ""
        assert all("zqold" in text for text in seen), "the half-saved (empty) file was indexed"
        save.write("# Kettle\n\nDescale it with vinegar, zqnew.\n")
    assert wait_for(lambda: "zqnew" in indexed_text(engine, "kettle.md"))
    assert "zqold" not in indexed_text(engine, "kettle.md")


def test_a_file_kept_open_is_indexed_when_its_hold_runs_out(engine: Engine, watch) -> None:
    watch(hold=0.5)
    with open(engine.vault.root / "log.md", "w", encoding="utf-8") as log:
        log.write("# Log\n\nA line kept open, zqopen.\n")
        log.flush()
        assert wait_for(lambda: "zqopen" in indexed_text(engine, "log.md"), seconds=5.0)
        log.write("Another line, zqmore.\n")  # a new change after the hold: it waits again, then goes in
        log.flush()
        assert wait_for(lambda: "zqmore" in indexed_text(engine, "log.md"), seconds=5.0)


def test_other_changes_are_not_held_behind_a_file_being_written(engine: Engine, watch) -> None:
    watch()
    with open(engine.vault.root / "kettle.md", "w", encoding="utf-8"):
        (engine.vault.root / "tea.md").write_text("# Tea\n\nSteep green tea at 80 C, zqtea.\n")
        assert wait_for(lambda: "zqtea" in indexed_text(engine, "tea.md"), seconds=3.0)
        assert "zqold" in indexed_text(engine, "kettle.md")


def test_stopping_indexes_what_is_still_held(engine: Engine, watch) -> None:
    watcher = watch()
    with open(engine.vault.root / "kettle.md", "w", encoding="utf-8") as save:
        save.write("# Kettle\n\nDescale it monthly, zqstop.\n")
        save.flush()
        assert wait_for(lambda: "kettle.md" in watcher._writing, seconds=3.0)
        watcher.stop()
    assert "zqstop" in indexed_text(engine, "kettle.md")


class SlowCounting(CountingEmbedder):
    """Counts what it embeds, at 2 ms a text: an import's files wait on disk for their batch, long
    enough for the watcher to see them."""

    def embed_documents(self, texts):
        time.sleep(0.002 * len(texts))
        return super().embed_documents(texts)


def test_a_claimed_path_is_left_to_its_writer_and_synced_after_release_only_if_changed(engine: Engine, watch) -> None:
    by_watcher: list[list[str]] = []
    original = engine.indexer.sync_paths

    def sync_paths(paths):
        if threading.current_thread().name == "spellbook-watcher":
            by_watcher.append(list(paths))
        return original(paths)

    engine.indexer.sync_paths = sync_paths
    watch()
    root = engine.vault.root
    with engine.indexer.claims.hold() as hold:
        hold.add(["tea.md", "milk.md"])
        (root / "tea.md").write_text("# Tea\n\nGreen tea at 80 C, zqclaimed.\n")
        (root / "milk.md").write_text("# Milk\n\nOat milk foams best cold, zqmilk.\n")
        time.sleep(10 * DEBOUNCE)
        assert engine.catalog.file("tea.md") is None, "the watcher indexed a claimed file"
        engine.indexer.sync_paths(["tea.md", "milk.md"])  # the writer indexes its files
        (root / "milk.md").write_text("# Milk\n\nOat milk foams best cold, zqedited.\n")  # a person, after
        hold.release(["tea.md", "milk.md"])
    assert wait_for(lambda: "zqedited" in indexed_text(engine, "milk.md"))
    time.sleep(5 * DEBOUNCE)
    assert not any("tea.md" in paths for paths in by_watcher), (
        "a released file the writer had indexed, unchanged since, was read again"
    )
    assert any("milk.md" in paths for paths in by_watcher)


def test_a_claimed_folder_created_is_no_reason_to_reconcile(engine: Engine) -> None:
    reconciles: list[float] = []
    watcher = VaultWatcher(engine.indexer, DEBOUNCE, reconcile=lambda: reconciles.append(time.monotonic()))
    watcher.start()
    try:
        root = engine.vault.root
        with engine.indexer.claims.hold() as hold:
            hold.add(with_folders(["ops/deploy/Rollback.md"]))
            (root / "ops" / "deploy").mkdir(parents=True)
            (root / "ops" / "deploy" / "Rollback.md").write_text("# Rollback\n\nRevert the tag.\n")
            time.sleep(8 * DEBOUNCE)
            assert reconciles == [], "a folder the writer claimed started a whole-vault reconcile"
        (root / "journal").mkdir()  # nobody's claim: it may hold anything (a folder moved in)
        assert wait_for(lambda: bool(reconciles), seconds=3.0)
    finally:
        watcher.stop()


def test_reconcile_leaves_a_claimed_file_to_its_writer(engine: Engine) -> None:
    (engine.vault.root / "tea.md").write_text("# Tea\n\nGreen tea at 80 C.\n")
    with engine.indexer.claims.hold() as hold:
        hold.add(["tea.md"])
        engine.indexer.reconcile()
        assert engine.catalog.file("tea.md") is None
    engine.indexer.reconcile()
    assert engine.catalog.file("tea.md") is not None


def test_an_import_under_the_watcher_embeds_each_text_once(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    source = Engine(
        Settings(vault=tmp_path / "a", index_dir=tmp_path / "ia", embedder="hashing", watch=False),
        embedder=CountingEmbedder(),
    )
    source.start()
    try:
        for i in range(120):
            source.scribe(
                f"Note {i} about topic {i % 12}, zq{i:03d}.",
                title=f"Note {i}",
                category=f"area{i % 4}",
                topic=f"topic{i % 12}",
            )
        export = source.export(path="all.json")["path"]
    finally:
        source.close()
    (tmp_path / "b").mkdir()
    embedder = SlowCounting()
    target = Engine(
        Settings(vault=tmp_path / "b", index_dir=tmp_path / "ib", embedder="hashing", watch=False), embedder=embedder
    )
    target.start()
    watcher = VaultWatcher(target.indexer, DEBOUNCE, reconcile=target.reconcile)
    watcher.start()
    try:
        report = target.import_memories(export)
        assert report["counts"]["created"] == 120
        time.sleep(10 * DEBOUNCE)  # whatever the watcher would do with the import's events
        texts = embedder.embedded
        assert len(texts) - len(set(texts)) == 0, f"{len(texts) - len(set(texts))} texts embedded twice"
        assert len(set(texts)) == len(target.catalog.all_chunk_ids()) == 120
    finally:
        watcher.stop()
        target.close()
    assert not target.indexer.claims, "the import left claims behind"


def test_claims_count_each_writer_and_a_hold_releases_the_rest_on_exit() -> None:
    claims = Claims()
    with claims.hold() as first, claims.hold() as second:
        first.add(["a.md", "b.md"])
        second.add(["b.md"])
        first.release(["a.md", "a.md", "c.md"])  # twice, and one never claimed: no harm
        assert "a.md" not in claims and "b.md" in claims
        second.release(["b.md"])
        assert "b.md" in claims  # still the first writer's
    assert len(claims) == 0
    assert with_folders(["x/y/z.md", "top.md"]) == {"x", "x/y", "x/y/z.md", "top.md"}


def test_reading_a_note_makes_no_event(engine: Engine) -> None:
    """Every read of a note (the indexer's own, a person's viewer) would be two events, and each
    change a third for its folder: inotify is not asked for them, watchdog builds none."""
    seen: list[tuple[str, bool]] = []

    class Recording(VaultWatcher):
        def on_any_event(self, event) -> None:
            seen.append((event.event_type, event.is_directory))
            super().on_any_event(event)

    watcher = Recording(engine.indexer, DEBOUNCE)
    watcher.start()
    try:
        file = engine.vault.root / "kettle.md"
        for _ in range(20):
            file.read_bytes()
        (engine.vault.root / "tea.md").write_text("# Tea\n\nGreen tea at 80 C, zqread.\n")
        assert wait_for(lambda: "zqread" in indexed_text(engine, "tea.md"))
        time.sleep(3 * DEBOUNCE)
    finally:
        watcher.stop()
    kinds = {kind for kind, _ in seen}
    assert "created" in kinds and "closed" in kinds
    assert not kinds & {"opened", "closed_no_write"}, seen
    assert ("modified", True) not in seen, "a folder's modified event was built"


def test_folders_never_indexed_are_not_watched(tmp_path: Path) -> None:
    """The index in the vault (.spellbook: every catalog and Chroma write), .git (every commit) and
    the other ignored folders, there at start or made later, at the top or deeper, send no event at
    all: inotify is not asked to watch them. A folder made later elsewhere is watched as ever."""
    vault = tmp_path / "vault"
    for folder in (".git/objects/ab", ".obsidian", "notes/node_modules/pkg"):
        (vault / folder).mkdir(parents=True)
    engine = Engine(
        Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder()
    )  # index in vault/.spellbook
    engine.start()
    seen: list[str] = []

    class Recording(VaultWatcher):
        def on_any_event(self, event) -> None:
            seen.append(Path(event.src_path).relative_to(vault).as_posix())
            super().on_any_event(event)

    watcher = Recording(engine.indexer, DEBOUNCE)
    watcher.start()
    try:
        (vault / ".trash" / "deep").mkdir(parents=True)  # made after the watch began
        (vault / "later" / ".git").mkdir(parents=True)
        time.sleep(0.3)  # the new folders' events are read (a watch is added for those watched)
        writes = [
            ".git/objects/ab/cdef",
            ".git/HEAD",
            ".obsidian/workspace.json",
            "notes/node_modules/pkg/x.md",
            ".trash/deep/old.md",
            "later/.git/index",
            ".spellbook/extra.txt",
        ]
        for path in writes:
            (vault / path).write_text("x")
        engine.scribe("Fresh ideas, zqwatch.", title="Fresh", category="notes")  # writes the catalog and Chroma
        (vault / "later" / "seen.md").write_text("# Seen\n\nA note in a folder made later, zqlater.\n")
        assert wait_for(lambda: "zqlater" in indexed_text(engine, "later/seen.md"))
        time.sleep(3 * DEBOUNCE)
    finally:
        watcher.stop()
        engine.close()
    assert "later/seen.md" in seen and "notes/Fresh.md" in seen
    hidden = [
        p
        for p in seen
        if any(part in (".git", ".obsidian", "node_modules", ".trash", ".spellbook") for part in p.split("/"))
    ]
    assert set(hidden) <= {".trash", "later/.git"}, hidden  # at most their own creation, in a watched folder


def test_a_tools_writes_put_no_temp_file_beside_the_notes(tmp_path: Path) -> None:
    """scribe, revise and an import make their temp files in the index's own folder (unwatched), so
    the watcher, Obsidian or a sync tool see each note arrive whole, and nothing else, in its folder."""
    vault = tmp_path / "vault"
    vault.mkdir()
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    engine.start()
    seen: list[tuple[str, str]] = []

    class Recording(VaultWatcher):
        def on_any_event(self, event) -> None:
            for raw in (event.src_path, getattr(event, "dest_path", "")):
                if raw and not event.is_directory:
                    seen.append((event.event_type, Path(raw).relative_to(vault).as_posix()))
            super().on_any_event(event)

    watcher = Recording(engine.indexer, DEBOUNCE)
    watcher.start()
    try:
        out = engine.scribe("Fresh ideas, zqtemp.", title="Fresh", category="notes")
        engine.revise(out["id"], text="Fresher ideas, zqtemp.")
        export = tmp_path / "export.json"
        export.write_text(
            json.dumps(
                {
                    "spellbook_export": 1,
                    "memories": [
                        {
                            "id": f"m{n}",
                            "path": f"imp/Note {n}.md",
                            "title": f"Note {n}",
                            "metadata": {"id": f"m{n}"},
                            "body": f"Imported body number {n}.",
                        }
                        for n in range(3)
                    ],
                }
            ),
            encoding="utf-8",
        )
        engine.import_memories(str(export))
        assert wait_for(lambda: {p for _, p in seen} >= {"notes/Fresh.md", "imp/Note 2.md"})
        time.sleep(3 * DEBOUNCE)
    finally:
        watcher.stop()
        engine.close()
    assert {p for _, p in seen} == {"notes/Fresh.md", "imp/Note 0.md", "imp/Note 1.md", "imp/Note 2.md"}, seen
    assert not [p for p in vault.rglob("*") if p.name.endswith(".tmp")]


def test_writes_fall_back_to_temp_files_beside_the_note(tmp_path: Path) -> None:
    """A note folder on another file system than the index (a mount point) gets its temp files
    beside the note, as a rename cannot cross file systems; an index folder deleted while the
    engine runs is made again at the next write."""
    vault = tmp_path / "vault"
    vault.mkdir()
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    engine.start()
    made: list[str] = []
    real = tempfile.mkstemp

    def noting(*args, **kwargs):
        made.append(Path(kwargs["dir"]).relative_to(vault).as_posix())
        return real(*args, **kwargs)

    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("tempfile.mkstemp", noting)
            first = engine.scribe("On the index's file system.", title="Here", category="notes")
            engine.vault._temp_device = -1  # as if the index were on another file system
            second = engine.scribe("On another file system.", title="There", category="notes")
            engine.vault._temp_device = None
            shutil.rmtree(vault / ".spellbook" / "tmp")
            third = engine.scribe("After the temp folder was deleted.", title="Again", category="notes")
        assert made == [".spellbook/tmp", "notes", ".spellbook/tmp"]
        for out in (first, second, third):
            assert engine.get_memories([out["id"]])["memories"][0]["path"] == out["path"]
        assert not [p for p in vault.rglob("*") if p.name.endswith(".tmp")]
    finally:
        engine.close()
    # An index kept outside the vault (--index-dir) is not where the vault's files are made: beside the note.
    outside = Engine(
        Settings(vault=vault, index_dir=tmp_path / "index", embedder="hashing", watch=False), embedder=HashingEmbedder()
    )
    assert outside.vault.temp_dir is None
    outside.close()
