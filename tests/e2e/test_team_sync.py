"""Team sync with real processes (docs/sync.md): ``spellbook sync`` killed with SIGKILL at each
step of its round loses nothing and the next run finishes it; the exit code and its one line;
owners on a timer bring one machine's writes to another."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from spellbook.engine import Engine
from spellbook.server.hub import Hub
from tests.helpers.git import git
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.team import MARKERS, clone, ids_in, machine_settings, make_remote, notes_in, remote_heads


def _cli_sync(vault: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([SPELLBOOK, "sync", "--vault", str(vault), "--embedder", "hashing"], capture_output=True,
                          text=True, env=child_env(**env), timeout=120)


def _writes(engine: Engine, who: str, shared: str) -> set[str]:
    ids = {engine.scribe(f"{who} wrote note {n} about the build cache.", title=f"{who} note {n}")["id"] for n in range(3)}
    engine.revise(shared, text=f"{who}'s version of the shared note.")
    return ids


@pytest.mark.parametrize("point", ["sync-merged", "sync-moved", "file-written:1", "file-written:3", "git-commit"])
def test_a_sync_killed_anywhere_loses_nothing_and_the_next_finishes_it(tmp_path: Path, point: str) -> None:
    remote = make_remote(tmp_path)
    ada_vault, bob_vault = clone(tmp_path, remote, "ada"), clone(tmp_path, remote, "bob")
    ada, bob = Engine(machine_settings(ada_vault)), Engine(machine_settings(bob_vault))
    ada.start()
    bob.start()
    try:
        shared = ada.scribe("The shared note, first version.", title="Shared")["id"]
        assert ada.sync()["in_sync"] and bob.sync()["in_sync"]
        acked = _writes(ada, "ada", shared) | _writes(bob, "bob", shared) | {shared}
        assert ada.sync()["in_sync"]
    finally:
        bob.close()
    (bob_vault / "inbox" / "By hand.md").write_text("Typed in Obsidian, never committed.\n")  # pending
    before = remote_heads(remote)
    killed = _cli_sync(bob_vault, SPELLBOOK_TEST_CRASH_AT=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-800:]
    done = _cli_sync(bob_vault)
    assert done.returncode == 0, done.stderr[-800:]
    git(remote, "merge-base", "--is-ancestor", before, "main")  # nothing rewritten
    assert ada.sync()["in_sync"]
    bob = Engine(machine_settings(bob_vault))
    bob.start()
    try:
        for engine in (ada, bob):
            vault = engine.vault.root
            notes = notes_in(vault)
            assert git(vault, "rev-parse", "HEAD").strip() == remote_heads(remote)
            assert not git(vault, "status", "--porcelain", "--", "inbox").strip(), git(vault, "status", "--porcelain")
            assert acked <= ids_in(vault)
            assert not [p for p, text in notes.items() if MARKERS.search(text)]
            assert len([p for p in notes if "(conflict copy)" in p]) == 1, sorted(notes)
            assert "inbox/By hand.md" in notes
            assert engine.check()["consistent"]
    finally:
        bob.close()
        ada.close()


def test_the_cli_exits_non_zero_with_one_line_when_the_remote_is_gone(tmp_path: Path) -> None:
    remote = make_remote(tmp_path)
    vault = clone(tmp_path, remote, "ada")
    ok = _cli_sync(vault)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("in sync at ")
    remote.rename(tmp_path / "elsewhere.git")
    failed = _cli_sync(vault)
    assert failed.returncode == 1
    lines = [ln for ln in failed.stderr.splitlines() if ln.startswith("spellbook:")]
    assert len(lines) == 1 and "unreachable" in lines[0] and "offline" in lines[0], failed.stderr


def test_owners_on_a_timer_bring_a_write_to_the_other_machine(tmp_path: Path) -> None:
    remote = make_remote(tmp_path)
    hubs = [Hub(machine_settings(clone(tmp_path, remote, name), sync_seconds=1.0, watch=True), warm_up=False)
            for name in ("ada", "bob")]
    for hub in hubs:
        hub.start(background=False)
    try:
        written = hubs[0].call("scribe", {"text": "The cache key includes the compiler version.", "title": "Cache key"})
        deadline = time.monotonic() + 30
        found: list = []
        while time.monotonic() < deadline and not found:
            found = [h for h in hubs[1].call("memorize", {"query": "cache key compiler"})["results"]
                     if h["id"] == written["id"]]
            time.sleep(0.2)
        assert found, hubs[1].call("stats")["sync"]
        stats = hubs[0].call("stats")["sync"]
        assert stats["rounds"] >= 1 and stats["last"]["in_sync"] and stats["every_seconds"] == 1.0
    finally:
        for hub in hubs:
            hub.close()
