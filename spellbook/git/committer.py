"""git as a layer under the vault: commit what Spellbook writes, read a note's versions back.

Plain ``git`` through ``subprocess``; when git is not installed or the vault is not inside a git
work tree, committing is a no-op and reading history says how to enable it (``git init``).

What a commit may touch, and what it never touches:

* Only the files Spellbook wrote in that tool call, with exactly the bytes it wrote: the commit
  is built in a temporary index (HEAD's tree plus those files), then HEAD moves to it with a
  compare-and-swap (``update-ref``), and the person's index gets the new entries for those
  paths only. So whatever a person has staged or changed elsewhere is neither committed nor
  unstaged, and a hand edit made after the tool wrote (before the commit ran) is not swept in.
  An erased note is committed as deleted from its tracked path; its copy in ``.trash/`` is never
  committed (the old content stays in history). No hooks run for these commits.
* In ``auto`` mode, a vault that is a folder of a bigger repository is committed to only if that
  repository tracks some of the vault's files (a home folder under git is not a vault's history).
* A file git ignores is left alone, and so is every file under ``local/`` (docs/sync.md). During
  a merge, rebase, cherry-pick or revert nothing is committed (the person is in the middle of
  something); the skip is logged and shown in stats.
* If the file Spellbook wrote had changes not yet committed (a hand edit), the commit holds the
  combined result (the hand edit was in the file Spellbook read and kept) and its message says so.

Every git call goes through ``repo.Git``, which runs no hook, filter or driver of the vault's
repository (docs/security.md, "Writes and files").

Commits run on one background thread, in order, so a tool answers without waiting for git; the
engine flushes the queue before it reads history and when it closes.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spellbook.crashpoints import crash_point
from spellbook.git.repo import LOCK_RETRIES, TIMEOUT_SECONDS, Git, GitCommitMode, GitFailed, Repo

log = logging.getLogger(__name__)

LOCAL_FOLDER = "local"  # notes under <vault>/local/ stay on this machine: never committed (docs/sync.md)


# --- committing ----------------------------------------------------------------------------------
@dataclass
class Change:
    """What one tool call wrote: the paths to commit and what to say about them."""

    tool: str
    files: dict[str, bytes | None]  # vault-relative path -> the bytes Spellbook wrote there (None: removed)
    title: str
    note_id: str
    before: bytes | None = None  # the (first) file's content just before Spellbook wrote it, if it existed
    detail: str = ""  # appended to the subject, e.g. "to 3f9c2a7b1d4e"
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] = field(default_factory=dict)
    on_done: Callable[[Change], None] | None = None  # called once the commit is made or skipped

    def finish(self, result: dict[str, Any]) -> None:
        self.result = result
        self.done.set()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                log.exception("git: the listener of a commit failed")


class Committer:
    """Commits each ``Change`` on a background thread, in order, and keeps score for ``stats``."""

    def __init__(self, root: Path, mode: GitCommitMode = "auto") -> None:
        self.git = Git(root)
        self.mode = mode
        self._queue: queue.Queue[Change | None] = queue.Queue()
        self._idle = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.counts = {"commits": 0, "skipped": 0, "failed": 0}
        self.last: dict[str, Any] | None = None
        self.last_skip: dict[str, Any] | None = None
        self._warned = False
        self._tracked = False

    @property
    def enabled(self) -> bool:
        return self.mode != "false" and self.git.exe is not None

    def submit(self, change: Change) -> Change:
        if not self.enabled:
            change.finish({"skipped": "git commits are off"})
            return change
        with self._idle:
            self._pending += 1
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="spellbook-git", daemon=True)
                self._thread.start()
        self._queue.put(change)
        return change

    def commit_now(self, change: Change, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        """Commit in order with the queued changes, and wait for the outcome."""
        self.submit(change)
        if not change.done.wait(timeout):
            return {"skipped": "git did not answer in time"}
        return change.result

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted change is committed (or skipped)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=1)

    def stats(self) -> dict[str, Any]:
        repo = self.git.repo() if self.git.exe else None
        return {
            "commit_mode": self.mode,
            "installed": self.git.exe is not None,
            "repository": repo is not None,
            "committing": self.enabled and repo is not None,
            "pending": self._pending,
            **self.counts,
            "last_commit": self.last,
            "last_skip": self.last_skip,
        }

    def _run(self) -> None:
        while True:
            change = self._queue.get()
            if change is None:
                return
            result: dict[str, Any] = {"failed": "interrupted"}
            try:
                result = self.commit(change)
            except Exception as exc:  # noqa: BLE001 - a failed commit must never stop the queue
                log.warning("git: could not commit %s: %s", list(change.files), exc)
                result = {"failed": str(exc)}
                self.counts["failed"] += 1
                self.last_skip = {"tool": change.tool, "paths": list(change.files), "reason": str(exc)}
            finally:
                change.finish(result)
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def commit(self, change: Change) -> dict[str, Any]:
        """Commit ``change.files`` with the bytes Spellbook wrote; returns {"commit": ...} or {"skipped": why}."""
        git = self.git
        repo = git.repo()
        if repo is None:
            if self.mode == "true" and not self._warned:
                self._warned = True
                log.warning("SPELLBOOK_GIT_COMMIT=true but %s is not in a git repository; not committing", git.root)
            return {"skipped": "not a git repository"}
        busy = Git.in_progress(repo)
        if busy:
            return self._skip(change, f"the repository is in the middle of {busy}; commit by hand when it is done")
        if self.mode == "auto" and repo.prefix and not self._tracked:
            self._tracked = git.tracks_files()  # once the repository tracks the vault, it keeps doing so
        if self.mode == "auto" and repo.prefix and not self._tracked:
            return self._skip(
                change,
                f"the vault is a folder of the repository at {repo.top} that tracks none of its "
                "files; set SPELLBOOK_GIT_COMMIT=true to commit there anyway",
            )
        ignored = git.ignored(list(change.files))
        files = {p: data for p, data in change.files.items() if p not in ignored and not is_local(p)}
        if not files:
            return self._skip(change, "ignored by .gitignore")
        head = git.head()
        entries: dict[str, tuple[str, str] | None] = {}  # root-relative path -> (mode, blob), None: delete
        for path, data in files.items():
            old = git.entry(repo, head, path)
            mode = old[0] if old and old[0] in ("100644", "100755") else "100644"
            entries[repo.prefix + path] = None if data is None else (mode, git.blob_id(path, data, store=True))
        message = commit_message(change, self._hand_edited(repo, head, change))
        identity = git.identity()
        for _ in range(3):  # someone else may move HEAD between our read and our swap: rebuild on it
            tree = build_tree(git, repo, head, entries)
            if head is not None and tree == git.run("rev-parse", f"{head}^{{tree}}").stdout.decode().strip():
                return {"skipped": "nothing changed"}
            parent = ["-p", head] if head else []
            commit = (
                git.run(*identity, "commit-tree", tree, *parent, input=message.encode("utf-8"), write=True)
                .stdout.decode()
                .strip()
            )
            crash_point("git-commit")
            swap = git.run(
                "update-ref", "-m", message.split("\n", 1)[0], "HEAD", commit, head or "", write=True, check=False
            )
            if swap.returncode == 0:
                break
            time.sleep(0.2)  # HEAD moved, or its lock is held by the person's own git
            head = git.head()
        else:
            raise GitFailed(["update-ref"], 1, "HEAD kept moving; try again")
        self.stage(repo, entries)
        self.counts["commits"] += 1
        self.last = {"commit": commit[:12], "message": message.split("\n", 1)[0], "paths": list(files)}
        return {"commit": commit, "message": message}

    def stage(self, repo: Repo, entries: dict[str, tuple[str, str] | None]) -> None:
        """Record the committed (or merged) entries in the person's index, for these paths only, so git status
        shows them clean (or as changed since, if the file moved on)."""
        for wait in (0.0, *LOCK_RETRIES):
            time.sleep(wait)
            done = self.git.run(
                "update-index", "--index-info", input=_index_info(entries), write=True, cwd=repo.top, check=False
            )
            if done.returncode == 0:
                return
            if b"index.lock" not in done.stderr:
                break
        log.warning(
            "git: committed %s but could not update the index: %s",
            list(entries),
            done.stderr.decode("utf-8", "replace").strip(),
        )

    def _hand_edited(self, repo: Repo, head: str | None, change: Change) -> bool:
        """Did the file hold changes not committed yet when Spellbook read it?"""
        if change.before is None:
            return False
        path = next(iter(change.files))
        committed = self.git.entry(repo, head, path)
        return committed is None or committed[1] != self.git.blob_id(path, change.before)

    def _skip(self, change: Change, reason: str) -> dict[str, Any]:
        log.info("git: not committing %s: %s", ", ".join(list(change.files)), reason)
        self.counts["skipped"] += 1
        self.last_skip = {"tool": change.tool, "paths": list(change.files), "reason": reason}
        return {"skipped": reason}


def is_local(path: str) -> bool:
    return path == LOCAL_FOLDER or path.startswith(LOCAL_FOLDER + "/")


def build_tree(git: Git, repo: Repo, head: str | None, entries: dict[str, tuple[str, str] | None]) -> str:
    """``head``'s tree with ``entries`` (root-relative path -> (mode, blob), None: removed) applied,
    built in a temporary index (the real one is untouched)."""
    index = repo.git_dir / f"spellbook-{os.getpid()}-{threading.get_ident()}.index"
    try:
        git.run("read-tree", *([head] if head else ["--empty"]), index=index, cwd=repo.top)
        if entries:
            git.run("update-index", "--index-info", input=_index_info(entries), index=index, cwd=repo.top)
        return git.run("write-tree", index=index, cwd=repo.top).stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)


def _index_info(entries: dict[str, tuple[str, str] | None]) -> bytes:
    """``update-index --index-info`` lines: set each path's entry, or remove it (mode 0)."""
    width = max((len(e[1]) for e in entries.values() if e), default=40)
    lines = (f"{e[0]} {e[1]}\t{p}\n" if e else f"0 {'0' * width}\t{p}\n" for p, e in entries.items())
    return "".join(lines).encode("utf-8", "surrogateescape")


def commit_message(change: Change, hand_edited: bool) -> str:
    title = " ".join(change.title.split())
    if len(title) > 60:
        title = title[:59] + "…"
    subject = f'spellbook: {change.tool} "{title}"' + (f" (id {change.note_id})" if change.note_id else "")
    if change.detail:
        subject += f" {change.detail}"
    if not hand_edited:
        return subject
    path = next(iter(change.files))
    if change.tool == "erase":
        body = (
            f"{path} had changes that were never committed; they are in the vault's .trash/ folder, not in this commit."
        )
    else:
        body = (
            f"{path} had changes made outside Spellbook that were not committed yet; Spellbook kept them, "
            "so this commit holds them too."
        )
    return f"{subject}, with uncommitted hand edits\n\n{body}"
