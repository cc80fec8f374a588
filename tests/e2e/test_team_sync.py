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
    return subprocess.run(
        [SPELLBOOK, "sync", "--vault", str(vault), "--embedder", "hashing"],
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=120,
        check=False,
    )


def _writes(engine: Engine, who: str, shared: str) -> set[str]:
    ids = {
        engine.scribe(f"{who} wrote note {n} about the build cache.", title=f"{who} note {n}")["id"] for n in range(3)
    }
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
    hubs = [
        Hub(machine_settings(clone(tmp_path, remote, name), sync_seconds=1.0, watch=True), warm_up=False)
        for name in ("ada", "bob")
    ]
    for hub in hubs:
        hub.start(background=False)
    try:
        written = hubs[0].call("scribe", {"text": "The cache key includes the compiler version.", "title": "Cache key"})
        deadline = time.monotonic() + 30
        found: list = []
        while time.monotonic() < deadline and not found:
            found = [
                h
                for h in hubs[1].call("memorize", {"query": "cache key compiler"})["results"]
                if h["id"] == written["id"]
            ]
            time.sleep(0.2)
        assert found, hubs[1].call("stats")["sync"]
        stats = hubs[0].call("stats")["sync"]
        assert stats["rounds"] >= 1 and stats["last"]["in_sync"] and stats["every_seconds"] == 1.0
    finally:
        for hub in hubs:
            hub.close()


def test_three_owners_writing_at_once_on_the_timer_converge_and_lose_nothing(tmp_path: Path) -> None:
    """Each machine's owner syncs every second while threads scribe, revise shared notes, link and
    erase on all three at once; once the writes stop and a last round has run everywhere, every
    acknowledged memory is on every machine (or erased by its writer), no note holds a marker, and
    every head the remote ever had is an ancestor of its last."""
    import random
    import threading

    from spellbook.errors import SpellbookError

    remote = make_remote(tmp_path)
    names = ("ada", "bob", "cy")
    hubs = {
        n: Hub(machine_settings(clone(tmp_path, remote, n), sync_seconds=1.0, watch=True), warm_up=False) for n in names
    }
    for hub in hubs.values():
        hub.start(background=False)
    shared = [
        hubs["ada"].call("scribe", {"text": f"Shared fact {i}, first version.", "title": f"Shared {i}"})["id"]
        for i in range(3)
    ]
    assert hubs["ada"].call("sync")["in_sync"]
    for n in ("bob", "cy"):
        assert hubs[n].call("sync")["in_sync"]
    kept: set[str] = set(shared)
    erased: dict[str, str] = {}
    heads: list[str] = []
    stop = threading.Event()
    errors: list[str] = []

    def writer(name: str) -> None:
        rng = random.Random(name)
        hub, mine = hubs[name], []
        for n in range(16):
            try:
                out = hub.call(
                    "scribe", {"text": f"{name} wrote fact {n} about the queue.", "title": f"{name} fact {n}"}
                )
                mine.append(out["id"])
                kept.add(out["id"])
                hub.call(
                    "revise", {"id": rng.choice(shared), "text": f"{name}'s take number {n}.", "tags": [f"{name}{n}"]}
                )
                if len(mine) > 2 and n % 4 == 0:
                    hub.call("link", {"source": mine[-1], "target": mine[-2]})
                if n % 5 == 4:
                    victim = mine.pop(0)
                    hub.call("erase", {"id": victim})
                    kept.discard(victim)
                    erased[victim] = name
            except SpellbookError as exc:  # e.g. a sync wrote the shared note between read and write
                errors.append(f"{name}: {exc}")
            time.sleep(rng.uniform(0.1, 0.5))

    def watch_remote() -> None:
        while not stop.wait(0.2):
            heads.append(remote_heads(remote))

    watcher = threading.Thread(target=watch_remote)
    watcher.start()
    threads = [threading.Thread(target=writer, args=(n,)) for n in names]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for _ in range(2):  # a last round everywhere, in turns
            for n in names:
                assert hubs[n].call("sync")["in_sync"]
        stop.set()
        watcher.join()
        final = remote_heads(remote)
        for old in set(heads):
            git(remote, "merge-base", "--is-ancestor", old, final)
        for n, hub in hubs.items():
            vault = hub.settings.vault_dir
            notes = notes_in(vault)
            assert git(vault, "rev-parse", "HEAD").strip() == final, n
            assert not [p for p, text in notes.items() if MARKERS.search(text)], n
            assert kept <= ids_in(vault), (n, kept - ids_in(vault))
            assert not set(erased) & ids_in(vault), n  # nobody else touched them: erased everywhere
            assert hub.call("check")["consistent"], (n, hub.call("check"))
            assert hub.call("stats")["sync"]["rounds"] >= 3
        for victim, who in erased.items():
            assert victim in ids_in(hubs[who].settings.vault_dir, trash=True)
        assert len(errors) < 12, errors
        print(f"{len(kept)} kept, {len(erased)} erased, {len(set(heads))} remote heads, errors: {errors}")
    finally:
        stop.set()
        for hub in hubs.values():
            hub.close()


def test_the_cli_asks_the_running_owner_to_sync(tmp_path: Path) -> None:
    remote = make_remote(tmp_path)
    vault = clone(tmp_path, remote, "ada")
    owner = Hub(machine_settings(vault), warm_up=False)
    owner.start(background=False)
    try:
        assert owner.role == "owner"
        owner.call("scribe", {"text": "Written through the server.", "title": "Via server"})
        done = _cli_sync(vault)
        assert done.returncode == 0, done.stderr[-500:]
        assert owner.call("stats")["sync"]["rounds"] == 1  # the round ran in the owner, not in the CLI
        assert "Via server" in git(remote, "log", "--format=%s", "-1", "main")
    finally:
        owner.close()


def test_an_owner_killed_after_moving_head_writes_the_files_when_it_starts_again(tmp_path: Path) -> None:
    """Killed between moving HEAD and writing the files: the next owner's start writes them (a
    commit of the half-written work tree would undo what arrived)."""
    remote = make_remote(tmp_path)
    ada_vault, bob_vault = clone(tmp_path, remote, "ada"), clone(tmp_path, remote, "bob")
    ada = Engine(machine_settings(ada_vault))
    ada.start()
    try:
        arrived = {ada.scribe(f"Ada's note {n} on the release train.", title=f"Train {n}")["id"] for n in range(3)}
        assert ada.sync()["in_sync"]
    finally:
        ada.close()
    killed = _cli_sync(bob_vault, SPELLBOOK_TEST_CRASH_AT="sync-moved")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-800:]
    assert not arrived & ids_in(bob_vault)  # HEAD moved, files not written yet
    bob = Engine(machine_settings(bob_vault))
    bob.start()
    try:
        assert arrived <= ids_in(bob_vault)
        assert not git(bob_vault, "status", "--porcelain", "--", "inbox").strip()
        assert bob.memorize("release train")["results"]
    finally:
        bob.close()
