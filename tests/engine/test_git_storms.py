"""git storms against a watched vault: checkout, stash, pull, a folder of 1,000 files moved.
When the storm settles, the index equals the vault: no stale entry, no duplicate, nothing missing."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.index import watcher
from spellbook.server.hub import Hub
from tests.helpers.engine import CountingEmbedder

pytestmark = pytest.mark.slow


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def write_notes(vault: Path, folder: str, count: int, tag: str) -> None:
    (vault / folder).mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (vault / folder / f"note {n:04d}.md").write_text(
            f"# {folder} {n}\n\nmarker{tag}x{n}x{folder.replace('/', '')} body.\n"
        )


def settle(hub: Hub, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        report = hub.call("check")
        if report["consistent"] or time.monotonic() > deadline:
            return report
        time.sleep(0.3)


@pytest.fixture
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(watcher, "DEBOUNCE_SECONDS", 0.2)
    vault = tmp_path / "vault"
    vault.mkdir()
    git(vault, "init", "-q", "-b", "main")
    (vault / ".gitignore").write_text(".spellbook/\n")
    write_notes(vault, "big", 1000, "a")
    write_notes(vault, "small", 50, "a")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "base")
    embedder = CountingEmbedder()
    settings = Settings(vault=vault, embedder="hashing", watch=True)
    hub = Hub(settings, engine_factory=lambda s: Engine(s, embedder=embedder))
    hub.start(background=False)
    assert settle(hub)["consistent"]
    yield vault, hub, embedder
    hub.close()


def assert_index_equals_vault(hub: Hub, vault: Path) -> None:
    report = settle(hub)
    assert report["consistent"], report["counts"]
    files = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md") if ".git" not in p.parts)
    listed = []
    offset = 0
    while True:
        page = hub.call("list_memories", {"limit": 200, "offset": offset})
        listed += [m["path"] for m in page["memories"]]
        if page["next_offset"] is None:
            break
        offset = page["next_offset"]
    assert sorted(listed) == files  # no duplicate, no stale entry, nothing missing


def test_checkout_of_a_branch_that_moves_1000_files(watched) -> None:
    vault, hub, embedder = watched
    # The branch is made in a clone, so the watched tree never holds its edits before the checkout: had the
    # watcher embedded them in passing (it may, on a slow machine), the checkout would reuse those vectors.
    prep = vault.parent / "prep"
    git(vault.parent, "clone", "-q", str(vault), str(prep))
    git(prep, "checkout", "-q", "-b", "other")
    (prep / "archive").mkdir()
    git(prep, "mv", "big", "archive/big")
    for n in range(10):
        (prep / "small" / f"note {n:04d}.md").write_text(f"# changed {n}\n\nmarkerbx{n}xsmall body.\n")
    for n in range(40, 50):
        (prep / "small" / f"note {n:04d}.md").unlink()
    write_notes(prep, "fresh", 20, "b")
    git(prep, "add", "-A")
    git(prep, "commit", "-qm", "other")
    git(vault, "fetch", "-q", str(prep), "other:other")
    assert_index_equals_vault(hub, vault)
    before = len(embedder.embedded)
    started = time.monotonic()
    git(vault, "checkout", "-q", "other")  # the storm: 1,000 renames, 10 edits, 10 deletes, 20 new
    assert_index_equals_vault(hub, vault)
    settled = time.monotonic() - started
    # moved files keep their vectors: only the 10 edited and 20 new notes are embedded
    assert len(embedder.embedded) - before == 30, len(embedder.embedded) - before
    hits = hub.call("memorize", {"query": "markerbx3xsmall", "mode": "keyword"})["results"]
    assert hits[0]["path"] == "small/note 0003.md"
    old = hub.call("memorize", {"query": "markerax3xsmall", "mode": "keyword"})["results"]
    assert all(h["path"] != "small/note 0003.md" for h in old)
    assert settled < 60


def test_stash_and_pull(watched, tmp_path: Path) -> None:
    vault, hub, _ = watched
    (vault / "small" / "note 0001.md").write_text("# local edit\n\nmarkerstashx1 body.\n")
    (vault / "scratch.md").write_text("# scratch\n\nuntracked.\n")
    assert_index_equals_vault(hub, vault)
    git(vault, "stash", "-q", "--include-untracked")
    assert_index_equals_vault(hub, vault)
    assert not hub.call("memorize", {"query": "markerstashx1", "mode": "keyword"})["results"]
    git(vault, "stash", "pop", "-q")
    assert_index_equals_vault(hub, vault)
    assert hub.call("memorize", {"query": "markerstashx1", "mode": "keyword"})["results"]

    upstream = tmp_path / "upstream"
    git(tmp_path, "clone", "-q", str(vault), str(upstream))
    write_notes(upstream, "pulled", 100, "p")
    (upstream / "small" / "note 0002.md").unlink()
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "upstream work")
    git(vault, "stash", "-q", "--include-untracked")
    git(vault, "pull", "-q", str(upstream), "main")
    git(vault, "stash", "pop", "-q")
    assert_index_equals_vault(hub, vault)
    assert (
        hub.call("memorize", {"query": "markerpx42xpulled", "mode": "keyword"})["results"][0]["path"]
        == "pulled/note 0042.md"
    )
