"""One sync round with a git remote: commit what is pending, fetch, integrate the remote's commits
with a merge that never leaves a conflict marker, push (never forced). The rules are in docs/sync.md.

The order keeps a killed process from losing anything:

1. Pending changes (hand edits, writes whose commit had not run) are committed like any write.
2. ``git fetch`` the remote's branch. When it moved and ours did too, the merge is built in git
   alone (``notemerge`` per note, a temporary index, ``commit-tree`` with both parents) and pushed
   before the work tree changes: a rejected push (the remote moved again) throws it away and the
   round starts over, so an unpublished merge never stays behind to be merged twice.
3. HEAD moves to the merge (or, when ours had nothing new, to the remote's commit) by
   compare-and-swap, after a journal in the git folder names it; then the files are written. A
   process killed between the two finishes the job at its next round (``_recover``): the work tree
   is never committed while it is half way, which would undo the remote's changes.
4. What we had and the remote lacks is pushed with a plain ``git push``.

A file changed in the work tree while the round ran is merged with what arrives instead of being
overwritten; a note the remote deleted goes to ``.trash/``. Everything runs through ``Git.run``,
with the network overrides below on top of its own.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spellbook.crashpoints import crash_point
from spellbook.defaults import INDEX_DIRNAME
from spellbook.errors import VaultPathError
from spellbook.files import atomic_write
from spellbook.git.committer import LOCAL_FOLDER, Change, Committer, build_tree, is_local
from spellbook.git.notemerge import conflict_path, merge_note
from spellbook.git.repo import Git, Repo
from spellbook.vault.paths import OVERVIEW_NAME, is_ignored, with_suffix_number
from spellbook.vault.store import Vault

log = logging.getLogger(__name__)

NETWORK_SECONDS = 120.0
ROUNDS = 5  # a push rejected because the remote moved meanwhile starts the round over, this often
JOURNAL = "spellbook-sync.json"
_EXCLUDES = (LOCAL_FOLDER + "/", ".trash/", INDEX_DIRNAME + "/")
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_REJECTED = ("[rejected]", "fetch first", "non-fast-forward", "failed to update ref", "cannot lock ref")
_AUTH = (
    "authentication failed",
    "permission denied",
    "could not read username",
    "returned error: 403",
    "returned error: 401",
    "access denied",
    "not authorized",
    "terminal prompts disabled",
)


# What a fetch or push may travel by: a path, git://, http(s) and ssh; never ``ext::`` (a command).
TRANSPORTS = "file:git:http:https:ssh"


class SyncFailed(Exception):
    """A round that could not finish; ``kind``: unreachable, auth, rejected, setup or busy."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Outcome:
    """What one round did: the vault-relative paths it wrote, for the index to follow."""

    head: str = ""
    remote_head: str | None = None
    pulled: bool = False
    pushed: bool = False
    committed: int = 0
    changed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # conflict copies written
    attempts: int = 0

    def data(self) -> dict[str, Any]:
        return {
            "in_sync": self.head == self.remote_head,
            "head": self.head[:12],
            "remote_head": (self.remote_head or "")[:12],
            "pulled": self.pulled,
            "pushed": self.pushed,
            "committed": self.committed,
            "changed": self.changed[:100],
            "changed_total": len(self.changed),
            "conflict_copies": self.conflicts,
            "attempts": self.attempts,
        }


class Syncer:
    """Runs sync rounds for one vault, one at a time."""

    def __init__(self, committer: Committer, remote: str = "origin") -> None:
        self.committer = committer
        self.git: Git = committer.git
        self.remote = remote
        self.phase: str | None = None  # what the round under way is doing, for stats
        self._lock = threading.Lock()

    def round(self) -> Outcome:
        with self._lock:
            try:
                return self._round()
            finally:
                self.phase = None

    def _round(self) -> Outcome:
        repo = self.git.repo()
        if repo is None:
            raise SyncFailed("setup", f"{self.git.root} is not a git repository; nothing to sync.")
        busy = Git.in_progress(repo)
        if busy:
            raise SyncFailed("busy", f"the repository is in the middle of {busy}; finish it, then sync.")
        branch = self._branch()
        if not _REMOTE_NAME.match(self.remote):
            raise SyncFailed("setup", f"{self.remote!r} is not a remote's name; name one `git remote` lists.")
        if not self._has_remote():
            raise SyncFailed(
                "setup",
                f"the repository has no remote named {self.remote!r}; add one: git remote add {self.remote} <url>",
            )
        self._exclude_local(repo)
        out = Outcome()
        out.changed += self._recover(repo)
        for attempt in range(1, ROUNDS + 1):
            out.attempts = attempt
            self.phase = "committing"
            out.committed += self._commit_pending(repo, out)
            self.phase = "fetching"
            theirs = self._fetch(branch)
            ours = self.git.head() or ""
            if theirs and ours != theirs and not self._is_ancestor(theirs, ours):
                self.phase = "merging"
                if not self._integrate(repo, branch, ours, theirs, out):
                    continue  # the remote moved again, or HEAD did: start over
                out.pulled = True
            head = self.git.head() or ""
            if head and head != theirs:
                self.phase = "pushing"
                if not self._push(head, branch):
                    continue
                out.pushed = True
                theirs = head
            out.head, out.remote_head = head, theirs or ""  # both empty: nothing on either side yet
            if head == out.remote_head:
                return out
        raise SyncFailed("rejected", f"the remote kept moving; gave up after {ROUNDS} attempts (try again)")

    # --- steps --------------------------------------------------------------------------------
    def _commit_pending(self, repo: Repo, out: Outcome) -> int:
        """Commit every note changed in the work tree and not committed yet (hand edits); they
        count as changed, for the index to follow where no watcher did."""
        self.committer.flush(60)
        changed = self.git.status(repo, ["."])
        files: dict[str, bytes | None] = {}
        for path, code in changed.items():
            if code == "!!" or is_ignored(path) or is_local(path):
                continue
            try:
                files[path] = (self.git.root / path).read_bytes()
            except FileNotFoundError:
                files[path] = None
        if not files:
            return 0
        result = self.committer.commit_now(Change("sync", files, f"{len(files)} changed file(s)", ""))
        out.changed += files
        return 1 if "commit" in result else 0

    def _fetch(self, branch: str) -> str | None:
        tracking = f"refs/remotes/{self.remote}/{branch}"
        out = self._net("fetch", "--no-tags", "--no-write-fetch-head", self.remote, f"+refs/heads/{branch}:{tracking}")
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace")
            if "couldn't find remote ref" in err.lower():
                return None  # an empty remote: the push creates the branch
            raise _failed("fetch", err)
        return self._rev(tracking)

    def _push(self, commit: str, branch: str) -> bool:
        """Push ``commit`` to the remote's branch (never forced); False when the remote moved."""
        out = self._net("push", "--porcelain", self.remote, f"{commit}:refs/heads/{branch}")
        if out.returncode == 0:
            self.git.run("update-ref", f"refs/remotes/{self.remote}/{branch}", commit, write=True, check=False)
            return True
        err = (out.stderr + out.stdout).decode("utf-8", "replace")
        if any(s in err for s in _REJECTED):
            return False
        raise _failed("push", err)

    def _integrate(self, repo: Repo, branch: str, ours: str, theirs: str, out: Outcome) -> bool:
        """Bring ``theirs`` in; False when the round must start over."""
        if not ours or self._is_ancestor(ours, theirs):
            target = theirs  # nothing of ours to merge: move to theirs
        else:
            target = self._merge(repo, ours, theirs, out)
            crash_point("sync-merged")
            if not self._push(target, branch):
                out.conflicts.clear()
                return False
        journal = {"from": ours or _EMPTY_TREE, "to": target}
        _write_json(repo.git_dir / JOURNAL, journal)
        swap = self.git.run("update-ref", "-m", "spellbook: sync", "HEAD", target, ours, write=True, check=False)
        if swap.returncode != 0:  # a write was committed meanwhile: merge again with it
            (repo.git_dir / JOURNAL).unlink(missing_ok=True)
            return False
        crash_point("sync-moved")
        out.changed += self._apply(repo, ours or _EMPTY_TREE, target)
        (repo.git_dir / JOURNAL).unlink(missing_ok=True)
        return True

    def _merge(self, repo: Repo, ours: str, theirs: str, out: Outcome) -> str:
        """The merge commit of ``ours`` and ``theirs``, built in git alone (the work tree untouched)."""
        base = self._rev_out("merge-base", ours, theirs) or _EMPTY_TREE
        mine, other = self._changes(base, ours), self._changes(base, theirs)
        tree_ours, tree_theirs = self._listing(ours), self._listing(theirs)
        taken = set(tree_ours) | set(tree_theirs)
        entries: dict[str, tuple[str, str] | None] = {}
        for path in sorted(set(mine) & set(other)):
            o, t = tree_ours.get(path), tree_theirs.get(path)
            if o == t:
                continue
            b = self._listing_entry(base, path)
            entries.update(self._merge_path(repo, path, b, o, t, taken, out))
        for path in sorted(set(other) - set(mine)):
            entries[path] = tree_theirs.get(path)
        tree = build_tree(self.git, repo, ours, entries)
        message = f"spellbook: sync, merge {self.remote}'s changes" + (
            f" ({len(out.conflicts)} conflict copies)" if out.conflicts else ""
        )
        return (
            self.git.run(
                *self.git.identity(), "commit-tree", tree, "-p", ours, "-p", theirs, input=message.encode(), write=True
            )
            .stdout.decode()
            .strip()
        )

    def _merge_path(
        self,
        repo: Repo,
        path: str,
        b: tuple[str, str] | None,
        o: tuple[str, str] | None,
        t: tuple[str, str] | None,
        taken: set[str],
        out: Outcome,
    ) -> dict[str, tuple[str, str] | None]:
        """The tree entries for one path both sides changed."""
        if o is None or t is None:
            return {path: o or t}  # erased on one side, edited on the other: the edit stays
        vault_path = path[len(repo.prefix) :] if path.startswith(repo.prefix) else None
        if vault_path is None or is_ignored(vault_path) or vault_path.rsplit("/", 1)[-1] == OVERVIEW_NAME:
            return {path: o}  # not a note (or a generated one): ours
        try:
            base, mine, other = (self._blob(x[1]).decode("utf-8") if x else "" for x in (b, o, t))
        except UnicodeDecodeError:
            return {path: o}  # not text: ours (theirs stays in history)
        merged = merge_note(base if b else None, mine, other, vault_path)
        if merged.collision:  # two notes at one path: theirs, published already, keeps it; ours moves
            n = 2
            while (new := with_suffix_number(path, n)) in taken:
                n += 1
            taken.add(new)
            return {path: t, new: o}
        found = {path: (o[0], self.git.blob_id(vault_path, merged.text.encode("utf-8"), store=True))}
        if merged.copy is not None:
            copy = conflict_path(path, taken)
            taken.add(copy)
            found[copy] = ("100644", self.git.blob_id(vault_path, merged.copy.text.encode("utf-8"), store=True))
            out.conflicts.append(copy[len(repo.prefix) :])
        return found

    def _apply(self, repo: Repo, old: str, new: str) -> list[str]:
        """Write what changed from commit ``old`` to ``new`` into the work tree; each file that
        changed there since ``old`` is merged with what arrives, never overwritten. Returns the
        vault paths written."""
        top = Vault(repo.top)
        written: list[str] = []
        staged: dict[str, tuple[str, str] | None] = {}
        raw = (
            self.git.run("diff-tree", "-r", "-z", "--no-renames", old, new, cwd=repo.top)
            .stdout.decode("utf-8", "surrogateescape")
            .split("\0")
        )
        for meta, path in zip(raw[0:-1:2], raw[1::2]):
            _, mode_new, blob_old, blob_new, _status = meta.lstrip(":").split()
            before = None if set(blob_old) == {"0"} else blob_old
            after = None if set(blob_new) == {"0"} else blob_new
            try:
                done = self._write(repo, top, path, before, after)
            except (OSError, VaultPathError) as exc:  # e.g. a folder there is a symlink out of the vault
                log.warning("sync: could not write %s: %s", path, exc)
                continue
            written += [p[len(repo.prefix) :] for p in done if p.startswith(repo.prefix)]
            staged[path] = (mode_new, after) if after else None
        self.committer.stage(repo, staged)
        return written

    def _write(self, repo: Repo, top: Vault, path: str, before: str | None, after: str | None) -> list[str]:
        """Bring one file (root-relative ``path``) from blob ``before`` to ``after``; the paths written."""
        file = top.file(path)
        current = file.read_bytes() if file.is_file() else None
        now = self.git.blob_id(path, current) if current is not None else None
        if now == after:
            return []
        if now != before and current is not None and before is not None and after is not None:
            if not path.endswith(".md"):
                return []  # not a note, changed here meanwhile: ours (theirs stays in history)
            # changed here while the round ran: merge the change in rather than overwrite it
            merged = merge_note(
                self._blob(before).decode("utf-8", "replace"),
                current.decode("utf-8", "replace"),
                self._blob(after).decode("utf-8", "replace"),
                path[len(repo.prefix) :],
            )
            if merged.collision:  # another note arrived at this path: the one here takes the next free name
                atomic_write(file, self._blob(after))
                return [path, top.create(path, current.decode("utf-8", "replace"))]
            atomic_write(file, merged.text.encode("utf-8"))
            if merged.copy is None:
                return [path]
            return [path, top.create(conflict_path(path, set()), merged.copy.text)]
        if after is None:
            if now == before and current is not None:  # deleted there: to .trash/, as erase does
                top.trash(path)
                return [path]
            return []  # changed here, deleted there: the change stays (committed next round)
        if now is not None and now != before:
            return []  # created here meanwhile: left alone, committed and merged next round
        top.file(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(file, self._blob(after))
        return [path]

    def recover(self) -> list[str]:
        """At start: finish the round a killed process left half way (its files), if any; the
        vault paths written."""
        repo = self.git.repo() if (self.git.exe and self.git.root.is_dir()) else None
        if repo is None or not (repo.git_dir / JOURNAL).exists():
            return []
        with self._lock:
            return self._recover(repo)

    def _recover(self, repo: Repo) -> list[str]:
        """Finish a round a killed process left between moving HEAD and writing the files: when
        HEAD is at what it merged (or a write was committed on it since), the files still as they
        were before the round get what it merged, before anything can commit them back."""
        journal = repo.git_dir / JOURNAL
        try:
            data = json.loads(journal.read_text())
            old, new = str(data["from"]), str(data["to"])
        except (OSError, ValueError, KeyError, TypeError):
            journal.unlink(missing_ok=True)
            return []
        head = self.git.head()
        done = head is not None and (head == new or self._is_ancestor(new, head))
        written = self._apply(repo, old, new) if done else []
        journal.unlink(missing_ok=True)
        if written:
            log.info("sync: finished the round a stopped process left (%d files)", len(written))
        return written

    # --- git plumbing -------------------------------------------------------------------------
    def _net(self, *args: str) -> Any:
        """fetch/push with the network overrides: no command from the repository's config runs
        (ssh is the person's own, credential helpers only those of their global config)."""
        helpers = self.git.run("config", "--global", "--get-all", "credential.helper", check=False)
        ssh = self.git.run("config", "--global", "--get", "core.sshCommand", check=False).stdout.decode().strip()
        safe = [
            "-c",
            f"core.sshCommand={ssh or 'ssh'}",
            "-c",
            "core.askPass=",
            "-c",
            "core.gitProxy=",
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "credential.helper=",
        ]
        for helper in helpers.stdout.decode("utf-8", "replace").splitlines():
            safe += ["-c", f"credential.helper={helper}"]
        # The remote's programs are named on the command line: a ``-c remote.<name>.uploadpack`` does
        # not win over the repository's own (git keeps the first value it reads of that key).
        program = {"fetch": "--upload-pack=git-upload-pack", "push": "--receive-pack=git-receive-pack"}[args[0]]
        try:
            return self.git.run(
                *safe,
                args[0],
                program,
                *args[1:],
                write=True,
                check=False,
                timeout=NETWORK_SECONDS,
                transports=TRANSPORTS,
            )
        except subprocess.TimeoutExpired as exc:
            raise SyncFailed("unreachable", f"{args[0]}: the remote did not answer in {NETWORK_SECONDS:.0f} s") from exc

    def _branch(self) -> str:
        out = self.git.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        if out.returncode != 0:
            raise SyncFailed("setup", "HEAD is detached; check out a branch, then sync.")
        return out.stdout.decode().strip()

    def _has_remote(self) -> bool:
        return self.git.run("config", "--get", f"remote.{self.remote}.url", check=False).returncode == 0

    def _exclude_local(self, repo: Repo) -> None:
        """``.git/info/exclude`` keeps ``local/`` (and the tool folders) out of every commit."""
        exclude = repo.git_dir / "info" / "exclude"
        lines = exclude.read_text().splitlines() if exclude.exists() else []
        missing = [f"/{repo.prefix}{name}" for name in _EXCLUDES if f"/{repo.prefix}{name}" not in lines]
        if missing:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a") as f:
                f.write("".join(f"{line}\n" for line in missing))

    def _rev(self, ref: str) -> str | None:
        out = self.git.run("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
        return out.stdout.decode().strip() or None if out.returncode == 0 else None

    def _rev_out(self, *args: str) -> str | None:
        out = self.git.run(*args, check=False)
        return out.stdout.decode().strip() or None if out.returncode == 0 else None

    def _is_ancestor(self, a: str, b: str) -> bool:
        return self.git.run("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def _changes(self, a: str, b: str) -> set[str]:
        out = self.git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", a, b)
        return {p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    def _listing(self, commit: str) -> dict[str, tuple[str, str]]:
        """path -> (mode, blob) of every file in ``commit``'s tree."""
        out = self.git.run("ls-tree", "-r", "-z", "--full-tree", commit).stdout.decode("utf-8", "surrogateescape")
        found = {}
        for line in filter(None, out.split("\0")):
            info, path = line.split("\t", 1)
            mode, kind, blob = info.split()
            if kind == "blob":
                found[path] = (mode, blob)
        return found

    def _listing_entry(self, commit: str, path: str) -> tuple[str, str] | None:
        if commit == _EMPTY_TREE:
            return None
        out = self.git.run("ls-tree", "-z", "--full-tree", commit, "--", path, check=False).stdout
        fields = out.split(b"\t", 1)[0].split()
        return (fields[0].decode(), fields[2].decode()) if len(fields) == 3 else None

    def _blob(self, blob: str) -> bytes:
        return self.git.run("cat-file", "blob", blob).stdout


def _failed(step: str, stderr: str) -> SyncFailed:
    """Why a fetch or push failed, in one line with git's own reason."""
    low = stderr.lower()
    if "remote rejected" in low or "protected branch" in low:
        kind, what = "rejected", "the remote refused the push"
    elif any(s in low for s in _AUTH):
        kind, what = "auth", "the remote refused the credentials"
    else:
        kind, what = "unreachable", "the remote is unreachable"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("hint:")]
    reason = next(
        (ln for ln in lines if ln.lower().startswith(("fatal:", "error:", "remote:", "!"))), lines[0] if lines else ""
    )
    reason = " ".join(reason.split())
    return SyncFailed(kind, f"{step}: {what} ({reason[:200]}); the vault keeps working offline")


def _write_json(file: Path, data: dict[str, Any]) -> None:
    atomic_write(file, json.dumps(data).encode())


__all__ = ["Outcome", "SyncFailed", "Syncer"]
