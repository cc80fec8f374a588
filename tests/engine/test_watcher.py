"""The vault watcher with a real observer (inotify here) over a real vault: a file still open for
writing is not read until it is closed, so an editor's in-place save (truncate, write, close) is
never indexed half done; a file kept open is indexed all the same once its hold runs out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.index.watcher import VaultWatcher

DEBOUNCE = 0.1


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "kettle.md").write_text("# Kettle\n\nDescale it with citric acid, zqold.\n")
    engine = Engine(Settings(vault=vault, index_dir=tmp_path / "index", embedder="hashing", watch=False),
                    embedder=HashingEmbedder())
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
