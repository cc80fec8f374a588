"""A memory's versions from git: ``history`` and ``restore``, and the commit after each write.

``Recorder`` queues the commit of what a tool just wrote; every service that writes is given
it. ``History`` is given the vault, catalog, indexer and the ``git`` committer. A version is a
commit that touched the note's file, following renames; ``restore`` writes the content of one
back to the note's current path through the vault's version-checked write, so a hand edit made
meanwhile is refused, never overwritten. A memory erased in a commit is found by
its id in the history (``git log -S`` on its ``id:`` line) and can be restored too.

A path outlives its memory: an erased "Roadmap" of one scope and a new "Roadmap" of another
share ``roadmap.md``. So a memory's versions are only the commits whose file holds its id and
a scope the call sees (a deletion: when the text it took out was one); history, diff and
restore read nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from spellbook.engine.access import Access
from spellbook.engine.activity import ActivityLog
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, VersionControlError
from spellbook.git.committer import Change, Committer
from spellbook.git.repo import Repo, Version
from spellbook.index.catalog import Catalog
from spellbook.index.indexer import Indexer
from spellbook.vault.fields import derived_id, note_id_of, scope_of
from spellbook.vault.note import content_version, parse_note, render_note
from spellbook.vault.store import FileState, Vault

MAX_HISTORY = 100
MAX_DIFF_BYTES = 200_000
BLOB_BATCH = 64  # versions whose contents one ``git cat-file --batch`` reads
Owned = tuple[Version, bytes | None]  # a version of the memory and its file's content (None: deleted there)


class Recorder:
    """The commit after each write (gitlayer's ``Committer`` does it in the background), and its
    line in the activity log (engine/activity.py), written once the commit is made or skipped."""

    def __init__(self, git: Committer, activity: ActivityLog | None = None) -> None:
        self.git = git
        self.activity = activity

    def after_write(
        self,
        tool: str,
        path: str,
        title: str | None,
        note_id: str,
        after: str | None,
        before: str | Path | None = None,
        detail: str = "",
    ) -> None:
        """Queue the commit of what a tool just wrote (a no-op when commits are off or git is absent).
        ``after``: the text written to ``path`` (None: the file was removed); ``before``: the file's
        text just before the write (a ``Path`` to where it now lives, for erase)."""
        entry = self.activity.entry(tool, path, title, note_id, detail, after, before) if self.activity else None
        if not self.git.enabled:
            if entry is not None and self.activity is not None:
                self.activity.append(entry)
            return
        old: bytes | None = None
        if isinstance(before, Path):
            try:
                old = before.read_bytes()
            except OSError:
                old = None
        elif isinstance(before, str):
            old = before.encode("utf-8")
        new = None if after is None else after.encode("utf-8")
        self.git.submit(
            Change(
                tool,
                {path: new},
                title or Path(path).stem,
                note_id,
                old,
                detail,
                on_done=self._log_all([entry] if entry is not None else []),
            )
        )

    def after_writes(
        self,
        tool: str,
        files: dict[str, str | None],
        title: str,
        note_id: str,
        before: str | None,
        detail: str = "",
        removed: dict[str, str] | None = None,
    ) -> None:
        """Queue one commit for what a tool wrote to several files (``merge``): path -> the text
        written (None: removed). ``before`` is the first file's text just before the write;
        ``removed``: the last text of each removed file (the activity log reads its scope there)."""
        lines = []
        if self.activity is not None:
            for n, (path, text) in enumerate(files.items()):
                if text is None:
                    lines.append(
                        self.activity.entry(tool, path, None, "", f"into {note_id}", None, (removed or {}).get(path))
                    )
                else:
                    lines.append(
                        self.activity.entry(
                            tool,
                            path,
                            title if n == 0 else None,
                            note_id if n == 0 else "",
                            detail if n == 0 else "link updated",
                            text,
                        )
                    )
        if self.git.enabled:
            data = {p: None if t is None else t.encode("utf-8") for p, t in files.items()}
            self.git.submit(
                Change(
                    tool,
                    data,
                    title,
                    note_id,
                    None if before is None else before.encode("utf-8"),
                    detail,
                    on_done=self._log_all(lines),
                )
            )
        elif self.activity is not None:
            for line in lines:
                self.activity.append(line)

    def _log_all(self, lines: list[dict[str, Any]]) -> Callable[[Change], None] | None:
        activity = self.activity
        if not lines or activity is None:
            return None
        return lambda change: [activity.append({**line, "commit": change.result.get("commit")}) for line in lines]


class History:
    """A memory's versions (``history``) and putting one back (``restore``)."""

    def __init__(
        self, vault: Vault, catalog: Catalog, indexer: Indexer, git: Committer, access: Access, recorder: Recorder
    ) -> None:
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.git = git
        self.access = access
        self.recorder = recorder

    def history(self, id: str, limit: int = 20) -> dict[str, Any]:
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInputError(f"limit must be between 1 and {MAX_HISTORY}.")
        repo = self._repo()
        path, title, versions, erased = self._versions(repo, id, limit + 1)
        more = len(versions) > limit
        current = None if erased else self._current(path)
        entries = []
        for v, blob in versions[:limit]:
            data = v.data()
            data["content_version"] = content_version(blob) if blob is not None else None
            data["current"] = current is not None and data["content_version"] == current
            entries.append(data)
        uncommitted = False if erased else path in self.git.git.status(repo, [path])
        return {
            "id": id,
            "path": path,
            "title": title,
            "erased": erased,
            "current_version": current,
            "uncommitted": uncommitted,
            "versions": entries,
            "more": more,
        }

    def restore(self, id: str, version: str, current_version: str | None = None) -> dict[str, Any]:
        repo = self._repo()
        git = self.git.git
        commit = git.resolve((version or "").strip())
        if commit is None:
            raise InvalidInputError(
                f"Version {version!r} is not a commit in the vault's history; pass a version from history(id)."
            )
        path, title, versions, erased = self._versions(repo, id, None, until=commit)
        match, data = next(((v, blob) for v, blob in versions if v.commit == commit), (None, None))
        if match is None:
            raise InvalidInputError(
                f"Version {version!r} is not in the history of memory {id!r}; call history(id) for its versions."
            )
        if data is None:
            raise InvalidInputError(
                f"Version {version!r} is the commit that erased memory {id!r}; restore the "
                "version before it (the next one in history)."
            )
        try:
            text = _keep_id(data.decode("utf-8"), id, path)
        except UnicodeDecodeError:
            raise InvalidInputError(f"Version {version!r} of {match.path} is not UTF-8 text; restore it with git.")
        state = None if erased else self._state(path)
        if state is None:  # erased, or deleted by hand and not committed yet
            path = self.vault.create(path, text)  # where it was; ' 2' if another note has that name now
            new_version = content_version(text)
        else:
            if current_version is not None and current_version != state.version:
                raise FileChangedError(path, current_version, state.version, state.text, note_id=id, retry="restore")
            if state.text == text:
                return {"id": id, "path": path, "version": state.version, "restored": commit[:12], "unchanged": True}
            self._keep_uncommitted(repo, state.path, state.text, title, id)
            try:
                new_version = self.vault.write(path, text, expected_version=state.version)
            except FileChangedError as exc:  # a person saved it since it was read above
                raise exc.naming(id, "restore") from None
        self.indexer.sync_path(path)
        self.recorder.after_write("restore", path, title, id, text, detail=f"to {commit[:12]}")
        return {
            "id": id,
            "path": path,
            "version": new_version,
            "restored": commit[:12],
            "erased_before": erased,
            "committing": self.git.enabled,
        }

    def diff(self, id: str, version: str) -> dict[str, Any]:
        """What one version of a memory changed from the memory's version before it (not from the
        commit's parent: the path may have held another memory just before)."""
        repo = self._repo()
        commit = self.git.git.resolve((version or "").strip())
        path, title, versions, _ = self._versions(repo, id, None, until=commit)
        index = next((i for i, (v, _) in enumerate(versions) if v.commit == commit), None)
        if index is None:
            raise InvalidInputError(
                f"Version {version!r} is not in the history of memory {id!r}; call history(id) for its versions."
            )
        match, after = versions[index]
        earlier, before = versions[index + 1] if index + 1 < len(versions) else (None, None)
        if after is None:  # the commit that erased it: the text it took out (the version before it)
            out = _whole_file(before or b"", earlier.path if earlier and earlier.path else path, added=False)
        elif earlier is None or before is None:  # its first version, or its first after an erase
            out = _whole_file(after, match.path or path, added=True)
        else:
            out = self.git.git.run(
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                f"{earlier.commit}:{repo.prefix}{earlier.path}",
                f"{commit}:{repo.prefix}{match.path}",
                check=False,
            ).stdout
        text = out[:MAX_DIFF_BYTES].decode("utf-8", "replace")
        return {
            "id": id,
            "title": title,
            "path": path,
            "commit": commit,
            **match.data(),
            "diff": self.access.scrubbed(text),
            "truncated": len(out) > MAX_DIFF_BYTES,
        }

    # --- helpers ------------------------------------------------------------------------------
    def _repo(self) -> Repo:
        why = self.git.git.unavailable()
        if why:
            raise VersionControlError(why)
        repo = self.git.git.repo()
        assert repo is not None
        self.git.flush()  # Spellbook's own writes are in the history before it is read
        return repo

    def _versions(
        self, repo: Repo, id: str, limit: int | None, until: str | None = None
    ) -> tuple[str, str, list[Owned], bool]:
        """(path, title, versions newest first, erased) of a memory in the index or, failing
        that, of one found in git by its id: erased if a commit took it out, else one whose file
        is not in the index now (emptied or changed by hand and not committed, or caught mid-save).
        Only the memory's own versions the call may see, up to ``limit`` or to the one after
        commit ``until`` (``_own``); none at all of a memory that is not in the index: not found."""
        id = id.strip() if isinstance(id, str) else id
        try:
            note = self.access.note(id)
        except NoteNotFoundError:
            if self.catalog.notes_by_id(id):
                raise  # in the vault, but another scope's memory
            note = None
        if note is not None:
            return note.path, note.title, self._log(repo, note.path, id, limit, until), False
        found = self.git.git.last_commit_with_id(repo, id)
        if found is None:
            raise NoteNotFoundError(id)
        commit, status, path = found  # the newest commit that put the id in a file or took it out
        blob = self.git.git.blobs(repo, [(commit, path)])[0] if status != "D" else None
        if blob is not None and str(_meta(blob).get("id", "")).strip() == id:
            # That commit put the id in, and no commit took it out since: not erased. Its history
            # runs to HEAD, and a restore writes its file (not a second one beside it), unless the
            # file now holds another memory (put there by hand): then it goes beside it.
            versions = self._log(repo, path, id, limit, until)
            erased = self._holds_other_id(path, id)
        else:
            versions, erased = self._log(repo, path, id, limit, until, start=commit), True
        if not versions:
            raise NoteNotFoundError(id)  # another scope's memory
        title = next((_meta(b).get("title") for _, b in versions if b is not None), None) or Path(path).stem
        return path, str(title), versions, erased  # erased: not in the vault now, restore creates the file again

    def _log(
        self, repo: Repo, path: str, id: str, limit: int | None, until: str | None, start: str = "HEAD"
    ) -> list[Owned]:
        """The memory's own versions in the history of ``path`` from ``start`` (``_own``)."""
        log = self.git.git.file_log(repo, path, start=start, limit=limit)
        owned = self._own(repo, id, log, limit, until)
        if limit and len(owned) < limit and len(log) == limit:  # others' versions took places: read it all
            owned = self._own(repo, id, self.git.git.file_log(repo, path, start=start), limit, until)
        return owned

    def _own(self, repo: Repo, id: str, log: list[Version], limit: int | None, until: str | None = None) -> list[Owned]:
        """The versions in ``log`` (newest first) that are this memory's and that the call's scope
        sees: the file holds the id (a note without one: its path gives it) and a visible scope;
        a deletion, when the version before it is one. The first ``limit``, or up to the one after
        commit ``until``; contents read a batch at a time (a note may be megabytes)."""
        scope = self.access.scope()
        owned: list[Owned] = []
        erasing: Version | None = None
        stop = limit
        for start in range(0, len(log), BLOB_BATCH):
            part = log[start : start + BLOB_BATCH]
            blobs = iter(self.git.git.blobs(repo, [(v.commit, v.path) for v in part if v.path]))
            for v in part:
                if v.path is None:
                    erasing = v
                    continue
                blob = next(blobs)
                meta = _meta(blob) if blob is not None else None
                if meta is not None and note_id_of(meta, v.path) == id and scope.sees(*scope_of(meta)):
                    owned += [(erasing, None), (v, blob)] if erasing is not None else [(v, blob)]
                    if stop is None and until is not None and until in (v.commit, erasing and erasing.commit):
                        stop = len(owned) + (v.commit == until)  # and the version before it (diff)
                erasing = None
                if stop and len(owned) >= stop:
                    return owned[:stop]
        return owned

    def _holds_other_id(self, path: str, id: str) -> bool:
        """Does the file at ``path`` now hold another memory (or something that is not a note)?"""
        try:
            state = self._state(path)
        except (InvalidInputError, IsADirectoryError):
            return True  # binary, not UTF-8, a folder: never written over
        other = parse_note(state.text).meta.get("id") if state is not None else None
        return other is not None and str(other).strip() not in ("", id)

    def _state(self, path: str) -> FileState | None:
        """The file as it is now, or None when there is none at ``path``."""
        try:
            return self.vault.read(path)
        except FileNotFoundError:
            return None

    def _current(self, path: str) -> str | None:
        try:
            return self.vault.read(path).version
        except (OSError, InvalidInputError):
            return None

    def _keep_uncommitted(self, repo: Repo, path: str, text: str, title: str, id: str) -> None:
        """Before a restore overwrites changes git does not have yet, commit them (or refuse)."""
        code = self.git.git.status(repo, [path]).get(path)
        if code is None or code == "!!":
            return
        reason = "Spellbook's git commits are off (SPELLBOOK_GIT_COMMIT=false)"
        if self.git.enabled:
            done = self.git.commit_now(
                Change(
                    "snapshot", {path: text.encode("utf-8")}, title, id, text.encode("utf-8"), detail="before restore"
                )
            )
            if "commit" in done:
                return
            reason = done.get("skipped") or done.get("failed") or "the commit failed"
        raise VersionControlError(
            f"{path} has changes that are not committed to git, and they could not be saved first ({reason}). "
            "Nothing was restored. Commit them by hand (git commit), then call restore again."
        )


def _keep_id(text: str, note_id: str, path: str) -> str:
    """The restored text, with the memory's id in its frontmatter if the old version lacked it."""
    parsed = parse_note(text)
    if parsed.problem or parsed.meta.get("id") == note_id:
        return text
    if "id" not in parsed.meta and derived_id(path) == note_id:
        return text  # a hand-written note without an id keeps the one its path gives it
    return render_note({**parsed.meta, "id": note_id}, parsed.body, original=parsed)


def _meta(blob: bytes) -> dict[str, Any]:
    return parse_note(blob.decode("utf-8", "replace")).meta


def _whole_file(data: bytes, path: str, added: bool) -> bytes:
    """A unified diff that adds (or removes) the whole of ``data`` at ``path``, as git writes one."""
    lines = data.split(b"\n")
    ended = lines[-1] == b""
    lines = lines[:-1] if ended else lines
    sign, count = (b"+" if added else b"-"), len(lines)
    head = f"--- /dev/null\n+++ b/{path}\n" if added else f"--- a/{path}\n+++ /dev/null\n"
    hunk = (f"@@ -0,0 +1,{count} @@\n" if added else f"@@ -1,{count} +0,0 @@\n") if count else ""
    body = b"".join(sign + line + b"\n" for line in lines)
    if count and not ended:
        body += b"\\ No newline at end of file\n"
    return (head + hunk).encode("utf-8", "surrogateescape") + body
