"""Plain ``git`` under the vault, through ``subprocess``: the one place git is run, and what Spellbook
reads back: the repository, a path's entry and status, a note's versions and their contents, the
files a repository's last commits changed (for a session's start).

A repository is not trusted to run commands (docs/security.md, "Git in the vault runs nothing"):
every call gets the overrides of ``hardening`` (no hook, filter, driver, signature program, editor,
pager, transport...), those for the drivers and hooks the config names found by a ``git config``
before it, and not the system config; ``status`` does not descend into submodules. Not covered: git
itself (a malicious ``git`` on PATH), and include files' non-command settings (they are read as any
config is).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spellbook.git import hardening

log = logging.getLogger(__name__)

GitCommitMode = Literal["auto", "true", "false"]
FALLBACK_NAME = "Spellbook"
FALLBACK_EMAIL = "spellbook@localhost"
TIMEOUT_SECONDS = 30.0
LOCK_RETRIES = (0.1, 0.3, 1.0, 2.0)  # waits while another git process holds the index lock
_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or am",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
}
_REVISION = re.compile(r"^[0-9a-fA-F]{4,40}$")


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
        return {
            "version": self.commit[:12],
            "commit": self.commit,
            "date": self.date,
            "author": self.author,
            "message": self.message,
            "path": self.path,
            "change": self.change,
        }


class Git:
    """Runs git in the vault folder. Every path in and out is vault-relative POSIX."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.exe = shutil.which("git")
        env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
        # Paths are literal (a note may be called "a*b.md"), no prompt ever, messages in English.
        env.update(GIT_LITERAL_PATHSPECS="1", LC_ALL="C", **hardening.ENV)
        self._env = env
        self._read_env = {**env, "GIT_OPTIONAL_LOCKS": "0"}  # reads never hold the index lock

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        write: bool = False,
        cwd: Path | None = None,
        index: Path | None = None,
        literal: bool = True,
        timeout: float = TIMEOUT_SECONDS,
        transports: str | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """git ``args`` in the vault (or ``cwd``). ``write``: may take the index lock; ``index``: a
        temporary index file to use instead of the repository's; ``literal``: paths are not globs
        (check-ignore refuses that flag, and takes no globs anyway); ``transports``: the protocols a
        fetch or push may use (``GIT_ALLOW_PROTOCOL``; none otherwise)."""
        if self.exe is None:
            raise GitFailed(list(args), 127, "git is not installed")
        env = self._env if write or index else self._read_env
        if index is not None:
            env = {**env, "GIT_INDEX_FILE": str(index)}
        if not literal:
            env = {k: v for k, v in env.items() if k != "GIT_LITERAL_PATHSPECS"}
        if transports:
            env = {**env, "GIT_ALLOW_PROTOCOL": transports}
        safe = hardening.ARGS + (self._swept(args, cwd, timeout) if hardening.needs_sweep(args) else [])
        done = subprocess.run(
            [self.exe, *safe, *args],
            check=False,
            cwd=cwd or self.root,
            env=env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise GitFailed(list(args), done.returncode, done.stderr.decode("utf-8", "replace"))
        return done

    def _swept(self, args: tuple[str, ...], cwd: Path | None, timeout: float) -> list[str]:
        """The overrides for every driver and hook the config names (``hardening.sweep_args``)."""
        out = subprocess.run(
            [self.exe or "git", *hardening.ARGS, "config", "-z", "--name-only", "--get-regexp", hardening.SWEPT],
            check=False,
            cwd=cwd or self.root,
            env=self._read_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        try:
            swept = hardening.sweep_args(out.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1])
        except hardening.UnsafeName as exc:
            raise GitFailed(list(args), 1, str(exc)) from None
        return swept

    def repo(self) -> Repo | None:
        """The work tree the vault is in, or None (no git, or not a repository)."""
        if self.exe is None or not _in_git_tree(self.root):
            return None
        try:
            out = self.run(
                "rev-parse",
                "--is-inside-work-tree",
                "--absolute-git-dir",
                "--show-toplevel",
                "--show-prefix",
                check=False,
            )
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
            return (
                f"The vault at {self.root} is not a git repository, so it has no history. To keep versions, "
                "run `git init` in the vault and commit it (`git add -A && git commit -m vault`); from then "
                "on Spellbook commits every write it makes."
            )
        try:
            self._swept(("status",), None, TIMEOUT_SECONDS)
        except GitFailed as exc:
            return f"Spellbook runs no git in the vault's repository: {exc.stderr}."
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

    def recent_paths(self, commits: int, timeout: float) -> list[str]:
        """The paths the last ``commits`` commits changed (newest first, relative to the work tree's
        root); [] outside a repository or on error. ``self.root`` may be any folder, not a vault."""
        if self.exe is None or not _in_git_tree(self.root):
            return []
        out = self.run(
            "log",
            f"-n{commits}",
            "--no-ext-diff",
            "--no-textconv",
            "--name-only",
            "-z",
            "--format=",
            check=False,
            timeout=timeout,
        )
        return [p.strip("\n") for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p.strip("\n")]

    def ignored(self, paths: list[str]) -> set[str]:
        """Which of these untracked paths .gitignore rules out (a tracked file never is)."""
        data = "".join(p + "\0" for p in paths).encode("utf-8", "surrogateescape")
        out = self.run("check-ignore", "-z", "--stdin", input=data, check=False, literal=False)
        if out.returncode > 1:
            raise GitFailed(["check-ignore"], out.returncode, out.stderr.decode("utf-8", "replace"))
        return {p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    def status(self, repo: Repo, paths: list[str]) -> dict[str, str]:
        """``XY`` status of each path that is not clean ('??' untracked, '!!' ignored)."""
        out = self.run(
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=matching",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--",
            *paths,
        )
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
            args += ["-c", f"user.name={FALLBACK_NAME} on {socket.gethostname()}"]  # who wrote, per machine
        if (
            "user.email" not in have
            and not os.environ.get("EMAIL")
            and not (os.environ.get("GIT_AUTHOR_EMAIL") and os.environ.get("GIT_COMMITTER_EMAIL"))
        ):
            args += ["-c", f"user.email={FALLBACK_EMAIL}"]
        return args

    # --- reading history ----------------------------------------------------------------------
    def file_log(self, repo: Repo, path: str, start: str = "HEAD", limit: int | None = None) -> list[Version]:
        """Commits that touched ``path`` (following renames, not copies), newest first, from ``start``."""
        args = [
            "log",
            "--no-ext-diff",
            "--no-textconv",
            "--follow",
            "-z",
            "--name-status",
            "--format=%x1e%H%x1f%aI%x1f%an <%ae>%x1f%s",
        ]
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
                if status == "C":
                    # --follow took a new file for a copy of a similar one that stayed (short notes
                    # share most of their frontmatter): the file began here, the rest is another's.
                    versions.append(Version(commit, date, author, message, current, "added"))
                    break
                if status == "R" and len(tokens) >= 3:
                    change, at = "renamed", _strip(repo, tokens[2])
                    current = _strip(repo, tokens[1])
                elif len(tokens) >= 2:
                    at = _strip(repo, tokens[1])
                    change = {"A": "added", "D": "deleted"}.get(status, "modified")
                    current = at
            versions.append(Version(commit, date, author, message, None if change == "deleted" else at, change))
        return versions

    def last_commit_with_id(self, repo: Repo, id: str) -> tuple[str, str, str] | None:
        """(commit, status, path) of the newest commit under the vault that added or removed a
        frontmatter line ``id: <id>``, however YAML wrote it (an id of digits only, or one that
        reads as a number, is quoted: ``id: '5612328435997172'``)."""
        pattern = rf"^id:[[:space:]]+['\"]?{_ere_literal(id)}['\"]?[[:space:]]*$"
        out = self.run(
            "log",
            "--no-ext-diff",
            "--no-textconv",
            "-z",
            "--name-status",
            "--format=%x1e%H",
            "--pickaxe-regex",
            "-S",
            pattern,
            "-n1",
            "HEAD",
            "--",
            ".",
            check=False,
        )
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
                out.append(data[pos : pos + size])
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
    return path[len(repo.prefix) :] if repo.prefix and path.startswith(repo.prefix) else path


def _ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression that matches it literally."""
    return "".join("\\" + c if c in ".[\\()*+?{|^$" else c for c in text)


def _in_git_tree(folder: Path) -> bool:
    """Whether ``.git`` (a folder, or a worktree's file) is in ``folder`` or above it: without one
    git finds no work tree there (``GIT_DIR`` and ``GIT_WORK_TREE`` are not passed on), so a vault
    that is not a repository costs a few stats a write instead of running git."""
    folder = Path(os.path.abspath(folder))
    return any(os.path.lexists(parent / ".git") for parent in (folder, *folder.parents))
