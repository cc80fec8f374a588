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
* A file git ignores is left alone. During a merge, rebase, cherry-pick or revert nothing is
  committed (the person is in the middle of something); the skip is logged and shown in stats.
* If the file Spellbook wrote had changes not yet committed (a hand edit), the commit holds the
  combined result (the hand edit was in the file Spellbook read and kept) and its message says so.

A vault's repository is not trusted to run commands (docs/security.md, "Writes and files"): every
git call gets ``-c`` overrides that switch off hooks (``core.hooksPath``, so no pre/post-commit,
reference-transaction or post-index-change hook), ``core.fsmonitor``, external diff and textconv
drivers, clean/smudge/process filter drivers (found in the config and set to empty, which git
treats as "no filter"), commit signing (``gpg.program``) and auto-gc; the system config is not read;
``status`` does not descend into submodules. Not covered: git itself (a malicious ``git`` on PATH),
and include files' non-command settings (they are read as any config is).

Commits run on one background thread, in order, so a tool answers without waiting for git; the
engine flushes the queue before it reads history and when it closes.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spellbook.vault.crashpoints import crash_point

log = logging.getLogger(__name__)

GitCommitMode = Literal["auto", "true", "false"]
FALLBACK_NAME = "Spellbook"
FALLBACK_EMAIL = "spellbook@localhost"
TIMEOUT_SECONDS = 30.0
LOCK_RETRIES = (0.1, 0.3, 1.0, 2.0)  # waits while another git process holds the index lock
_IN_PROGRESS = {"MERGE_HEAD": "a merge", "rebase-merge": "a rebase", "rebase-apply": "a rebase or am",
                "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert"}
_REVISION = re.compile(r"^[0-9a-fA-F]{4,40}$")
# Given to every git call: the vault's repository never makes Spellbook run a command.
_SAFE_CONFIG = [
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.sshCommand=false",
    "-c", "diff.external=", "-c", "commit.gpgSign=false", "-c", "gpg.program=false", "-c", "gc.auto=0",
    "-c", "maintenance.auto=false", "-c", "core.pager=cat", "-c", "core.editor=false",
    "-c", "status.submoduleSummary=false", "-c", "diff.ignoreSubmodules=all", "-c", "core.untrackedCache=false",
]
# Subcommands that may read work-tree files through filters or diff drivers.
_FILTERING = frozenset({"status", "hash-object", "log", "diff", "add", "update-index", "ls-files", "checkout"})


class GitFailed(Exception):
    """A git command exited non-zero; ``stderr`` says why."""

    def __init__(self, args: list[str], code: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:3])} failed ({code}): {stderr.strip()[:300]}")
        self.stderr = stderr


@dataclass(frozen=True)
class Repo:
    """Where the vault sits in a git work tree."""

    git_dir: Path
    top: Path  # the work tree's root
    prefix: str  # the vault's folder relative to the work tree root, '' or ending in '/'


@dataclass(frozen=True)
class Version:
    """One commit in a file's history."""

    commit: str
    date: str
    author: str
    message: str
    path: str | None  # vault-relative path of the file in this commit (None: deleted here)
    change: str  # added, modified, renamed, deleted

    def data(self) -> dict[str, Any]:
        return {"version": self.commit[:12], "commit": self.commit, "date": self.date, "author": self.author,
                "message": self.message, "path": self.path, "change": self.change}


class Git:
    """Runs git in the vault folder. Every path in and out is vault-relative POSIX."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.exe = shutil.which("git")
        env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        # Paths are literal (a note may be called "a*b.md"), no prompt ever, messages in English.
        env.update(GIT_LITERAL_PATHSPECS="1", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        self._env = env
        env.update(GIT_CONFIG_NOSYSTEM="1")
        self._read_env = {**env, "GIT_OPTIONAL_LOCKS": "0"}  # reads never hold the index lock

    def run(self, *args: str, input: bytes | None = None, check: bool = True, write: bool = False,
            cwd: Path | None = None, index: Path | None = None, literal: bool = True,
            timeout: float = TIMEOUT_SECONDS) -> subprocess.CompletedProcess[bytes]:
        """git ``args`` in the vault (or ``cwd``). ``write``: may take the index lock; ``index``: a
        temporary index file to use instead of the repository's; ``literal``: paths are not globs
        (check-ignore refuses that flag, and takes no globs anyway)."""
        if self.exe is None:
            raise GitFailed(list(args), 127, "git is not installed")
        env = self._env if write or index else self._read_env
        if index is not None:
            env = {**env, "GIT_INDEX_FILE": str(index)}
        if not literal:
            env = {k: v for k, v in env.items() if k != "GIT_LITERAL_PATHSPECS"}
        safe = _SAFE_CONFIG + (self._driver_overrides(cwd) if args and args[0] in _FILTERING else [])
        done = subprocess.run(
            [self.exe, *safe, *args], check=False, cwd=cwd or self.root, env=env, input=input,
            stdin=None if input is not None else subprocess.DEVNULL, capture_output=True, timeout=timeout,
        )
        if check and done.returncode != 0:
            raise GitFailed(list(args), done.returncode, done.stderr.decode("utf-8", "replace"))
        return done

    def _driver_overrides(self, cwd: Path | None) -> list[str]:
        """``-c filter.<name>.clean=`` (and smudge, process; textconv/command for diff drivers) for
        every driver the repository's config names: an empty command is no command."""
        out = subprocess.run(
            [self.exe or "git", *_SAFE_CONFIG, "config", "--name-only", "--get-regexp", r"^(filter|diff)\..+\."],
            check=False, cwd=cwd or self.root, env=self._read_env, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=TIMEOUT_SECONDS,
        )
        names = {line.rsplit(".", 1)[0] for line in out.stdout.decode("utf-8", "surrogateescape").splitlines()}
        overrides: list[str] = []
        for name in sorted(names):
            keys = ("clean", "smudge", "process") if name.startswith("filter.") else ("textconv", "command")
            for key in keys:
                overrides += ["-c", f"{name}.{key}="]
        return overrides

    def repo(self) -> Repo | None:
        """The work tree the vault is in, or None (no git, or not a repository)."""
        if self.exe is None:
            return None
        try:
            out = self.run("rev-parse", "--is-inside-work-tree", "--absolute-git-dir", "--show-toplevel",
                           "--show-prefix", check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        lines = out.stdout.decode("utf-8", "surrogateescape").split("\n")
        if out.returncode != 0 or len(lines) < 4 or lines[0] != "true":
            return None
        return Repo(Path(lines[1]), Path(lines[2]), lines[3])

    def unavailable(self) -> str | None:
        """Why this vault has no git history, written for the model; None when it has."""
        if self.exe is None:
            return "git is not installed on the machine running Spellbook, so the vault has no history."
        if self.repo() is None:
            return (f"The vault at {self.root} is not a git repository, so it has no history. To keep versions, "
                    "run `git init` in the vault and commit it (`git add -A && git commit -m vault`); from then "
                    "on Spellbook commits every write it makes.")
        return None

    @staticmethod
    def in_progress(repo: Repo) -> str | None:
        for name, what in _IN_PROGRESS.items():
            if (repo.git_dir / name).exists():
                return what
        return None

    def head(self) -> str | None:
        """HEAD's commit, or None on a branch with no commits yet."""
        out = self.run("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
        return (out.stdout.decode().strip() or None) if out.returncode == 0 else None

    def entry(self, repo: Repo, head: str | None, path: str) -> tuple[str, str] | None:
        """(mode, blob) of ``path`` in HEAD's tree, or None."""
        if head is None:
            return None
        out = self.run("ls-tree", "--full-tree", "-z", head, "--", repo.prefix + path, cwd=repo.top, check=False)
        fields = out.stdout.split(b"\t", 1)[0].split()
        return (fields[0].decode(), fields[2].decode()) if len(fields) == 3 and fields[1] == b"blob" else None

    def blob_id(self, path: str, data: bytes, store: bool = False) -> str:
        """The id git gives ``data`` stored at ``path`` (through its filters); ``store`` writes it."""
        args = ["hash-object", *(["-w"] if store else []), f"--path={path}", "--stdin"]
        return self.run(*args, input=data, write=store).stdout.decode().strip()

    def tracks_files(self) -> bool:
        """Does the repository track any file in the vault folder?"""
        out = self.run("ls-files", "-z", "--", ".", check=False)
        return out.returncode == 0 and bool(out.stdout)

    def ignored(self, paths: list[str]) -> set[str]:
        """Which of these untracked paths .gitignore rules out (a tracked file never is)."""
        data = "".join(p + "\0" for p in paths).encode("utf-8", "surrogateescape")
        out = self.run("check-ignore", "-z", "--stdin", input=data, check=False, literal=False)
        if out.returncode > 1:
            raise GitFailed(["check-ignore"], out.returncode, out.stderr.decode("utf-8", "replace"))
        return {p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    def status(self, repo: Repo, paths: list[str]) -> dict[str, str]:
        """``XY`` status of each path that is not clean ('??' untracked, '!!' ignored)."""
        out = self.run("status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all",
                       "--ignore-submodules=all", "--", *paths)
        tokens = out.stdout.decode("utf-8", "surrogateescape").split("\0")
        found: dict[str, str] = {}
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if len(token) < 4:
                continue
            code, path = token[:2], token[3:]
            if "R" in code or "C" in code:
                i += 1  # a staged rename or copy is followed by its source path
            found[_strip(repo, path)] = code
        return found

    def identity(self) -> list[str]:
        """``-c user.name=... -c user.email=...`` for whichever part of an identity is missing."""
        out = self.run("config", "--get-regexp", r"^user\.(name|email)$", check=False)
        have = {line.split(" ", 1)[0] for line in out.stdout.decode("utf-8", "replace").splitlines()}
        args: list[str] = []
        if "user.name" not in have and not (os.environ.get("GIT_AUTHOR_NAME") and os.environ.get("GIT_COMMITTER_NAME")):
            args += ["-c", f"user.name={FALLBACK_NAME}"]
        if "user.email" not in have and not os.environ.get("EMAIL") and not (
            os.environ.get("GIT_AUTHOR_EMAIL") and os.environ.get("GIT_COMMITTER_EMAIL")
        ):
            args += ["-c", f"user.email={FALLBACK_EMAIL}"]
        return args

    # --- reading history ----------------------------------------------------------------------
    def file_log(self, repo: Repo, path: str, start: str = "HEAD", limit: int | None = None) -> list[Version]:
        """Commits that touched ``path`` (following renames), newest first, from ``start``."""
        args = ["log", "--no-ext-diff", "--no-textconv", "--follow", "-z", "--name-status",
                "--format=%x1e%H%x1f%aI%x1f%an <%ae>%x1f%s"]
        if limit:
            args.append(f"-n{limit}")
        out = self.run(*args, start, "--", path, check=False)
        if out.returncode != 0:
            return []  # no commits yet, or the path was never committed
        versions: list[Version] = []
        current = path
        for record in out.stdout.decode("utf-8", "surrogateescape").split("\x1e")[1:]:
            header, *rest = record.split("\0")
            commit, date, author, message = (header.split("\x1f") + ["", "", ""])[:4]
            tokens = [t.lstrip("\n") for t in rest if t.strip("\n")]
            change, at = "modified", current
            if tokens:
                status = tokens[0][:1]
                if status in "RC" and len(tokens) >= 3:
                    change, at = "renamed", _strip(repo, tokens[2])
                    current = _strip(repo, tokens[1])
                elif len(tokens) >= 2:
                    at = _strip(repo, tokens[1])
                    change = {"A": "added", "D": "deleted"}.get(status, "modified")
                    current = at
            versions.append(Version(commit, date, author, message, None if change == "deleted" else at, change))
        return versions

    def last_commit_with(self, repo: Repo, text: str) -> tuple[str, str, str] | None:
        """(commit, status, path) of the newest commit under the vault that added or removed ``text``."""
        out = self.run("log", "--no-ext-diff", "--no-textconv", "-z", "--name-status", "--format=%x1e%H", "-S", text,
                       "-n1", "HEAD", "--", ".",
                       check=False)
        records = out.stdout.decode("utf-8", "surrogateescape").split("\x1e")[1:] if out.returncode == 0 else []
        if not records:
            return None
        header, *rest = records[0].split("\0")
        tokens = [t.lstrip("\n") for t in rest if t.strip("\n")]
        if len(tokens) < 2:
            return None
        return header.strip(), tokens[0][:1], _strip(repo, tokens[-1])

    def blobs(self, repo: Repo, revs: list[tuple[str, str]]) -> list[bytes | None]:
        """The content of each (commit, path), in one ``git cat-file --batch``; None where absent."""
        if not revs:
            return []
        request = "".join(f"{commit}:{repo.prefix}{path}\n" for commit, path in revs).encode("utf-8", "surrogateescape")
        data = self.run("cat-file", "--batch", input=request).stdout
        out: list[bytes | None] = []
        pos = 0
        for _ in revs:
            end = data.index(b"\n", pos)
            header = data[pos:end].split()
            pos = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                out.append(data[pos:pos + size])
                pos += size + 1
            else:
                out.append(None)
        return out

    def resolve(self, revision: str) -> str | None:
        if not _REVISION.match(revision or ""):
            return None
        out = self.run("rev-parse", "-q", "--verify", f"{revision}^{{commit}}", check=False)
        return (out.stdout.decode().strip() or None) if out.returncode == 0 else None


def _strip(repo: Repo, path: str) -> str:
    """A work-tree-relative path from git's output -> vault-relative."""
    return path[len(repo.prefix):] if repo.prefix and path.startswith(repo.prefix) else path


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
            change.result = {"skipped": "git commits are off"}
            change.done.set()
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
            "commit_mode": self.mode, "installed": self.git.exe is not None, "repository": repo is not None,
            "committing": self.enabled and repo is not None, "pending": self._pending, **self.counts,
            "last_commit": self.last, "last_skip": self.last_skip,
        }

    def _run(self) -> None:
        while True:
            change = self._queue.get()
            if change is None:
                return
            try:
                change.result = self.commit(change)
            except Exception as exc:  # noqa: BLE001 - a failed commit must never stop the queue
                log.warning("git: could not commit %s: %s", list(change.files), exc)
                change.result = {"failed": str(exc)}
                self.counts["failed"] += 1
                self.last_skip = {"tool": change.tool, "paths": list(change.files), "reason": str(exc)}
            finally:
                change.done.set()
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
            return self._skip(change, f"the vault is a folder of the repository at {repo.top} that tracks none of its "
                                      "files; set SPELLBOOK_GIT_COMMIT=true to commit there anyway")
        ignored = git.ignored(list(change.files))
        files = {p: data for p, data in change.files.items() if p not in ignored}
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
            tree = self._tree(repo, head, entries)
            if head is not None and tree == git.run("rev-parse", f"{head}^{{tree}}").stdout.decode().strip():
                return {"skipped": "nothing changed"}
            parent = ["-p", head] if head else []
            commit = git.run(*identity, "commit-tree", tree, *parent, input=message.encode("utf-8"),
                             write=True).stdout.decode().strip()
            crash_point("git-commit")
            swap = git.run("update-ref", "-m", message.split("\n", 1)[0], "HEAD", commit, head or "", write=True,
                           check=False)
            if swap.returncode == 0:
                break
            time.sleep(0.2)  # HEAD moved, or its lock is held by the person's own git
            head = git.head()
        else:
            raise GitFailed(["update-ref"], 1, "HEAD kept moving; try again")
        self._stage(repo, entries)
        self.counts["commits"] += 1
        self.last = {"commit": commit[:12], "message": message.split("\n", 1)[0], "paths": list(files)}
        return {"commit": commit, "message": message}

    def _tree(self, repo: Repo, head: str | None, entries: dict[str, tuple[str, str] | None]) -> str:
        """HEAD's tree with ``entries`` applied, built in a temporary index (the real one is untouched)."""
        index = repo.git_dir / f"spellbook-{os.getpid()}.index"
        try:
            self.git.run("read-tree", *([head] if head else ["--empty"]), index=index, cwd=repo.top)
            self.git.run("update-index", "--index-info", input=_index_info(entries), index=index, cwd=repo.top)
            return self.git.run("write-tree", index=index, cwd=repo.top).stdout.decode().strip()
        finally:
            index.unlink(missing_ok=True)

    def _stage(self, repo: Repo, entries: dict[str, tuple[str, str] | None]) -> None:
        """Record the committed entries in the person's index, for these paths only, so git status
        shows them clean (or as changed since, if the file moved on)."""
        for wait in (0.0, *LOCK_RETRIES):
            time.sleep(wait)
            done = self.git.run("update-index", "--index-info", input=_index_info(entries), write=True, cwd=repo.top,
                                check=False)
            if done.returncode == 0:
                return
            if b"index.lock" not in done.stderr:
                break
        log.warning("git: committed %s but could not update the index: %s", list(entries),
                    done.stderr.decode("utf-8", "replace").strip())

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
        body = (f"{path} had changes that were never committed; they are in the vault's .trash/ folder, "
                "not in this commit.")
    else:
        body = (f"{path} had changes made outside Spellbook that were not committed yet; Spellbook kept them, "
                "so this commit holds them too.")
    return f"{subject}, with uncommitted hand edits\n\n{body}"
