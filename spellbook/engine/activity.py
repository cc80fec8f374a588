"""What was written, by which tool, client and session: an append-only activity log.

Git commits say what changed in the vault, not who asked for it, and a vault without git has no
record at all. So every write the ``Recorder`` (engine/history.py) sees, and every import, is
also appended as one JSON line to ``<index folder>/activity.jsonl``: derived data beside the
catalog, never in the vault, safe to delete. Each line holds the time, the tool, the note
(id, path, title), the client and session of the call (``scope.actor()``, set by the hub), the
note's own scope (its ``context``/``user``, so a scoped reader never sees another scope's lines)
and, once git has committed it, the commit.

The log keeps its newest ``KEEP_BYTES`` or so: when it passes ``MAX_BYTES`` the oldest lines are
dropped (an atomic rewrite). ``activity()`` reads only the newest ``TAIL_BYTES`` of the file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spellbook.errors import InvalidInputError
from spellbook.files import atomic_write
from spellbook.scope import Scope, actor
from spellbook.vault.note import parse_note

log = logging.getLogger(__name__)

FILE_NAME = "activity.jsonl"
MAX_BYTES = 8 * 2**20
KEEP_BYTES = 4 * 2**20
TAIL_BYTES = 2 * 2**20
MAX_LIMIT = 200


class ActivityLog:
    """Appends and reads ``activity.jsonl``; thread-safe within the owner process (the only writer)."""

    def __init__(self, file: Path, scope: Callable[[], Scope], settle: Callable[[], Any] | None = None) -> None:
        self.file = file
        self.scope = scope  # the running call's (Access.scope): what a read shows, what a line records
        self.settle = settle  # called before a read: lets queued commits land (their lines are written then)
        self._lock = threading.Lock()

    def entry(
        self,
        tool: str,
        path: str,
        title: str | None,
        note_id: str,
        detail: str = "",
        text: str | None = None,
        before: str | Path | None = None,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A line for a write, without its commit yet. The note's scope is read from ``meta``, or
        from the text written (or, for an erase, from the text it had)."""
        who = actor()
        scope = self.scope()
        if meta is None:
            meta = _meta(text if text is not None else before)
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tool": tool,
            "id": note_id or _value(meta.get("id")) or "",
            "path": path,
            "title": title or _value(meta.get("title")) or Path(path).stem,
            "detail": detail,
            "client": who.client,
            "session": who.session,
            "context": _value(meta.get("context")) or scope.context,
            "user": _value(meta.get("user")) or scope.user,
        }

    def append(self, entry: dict[str, Any]) -> None:
        self.append_many([entry])

    def append_many(self, entries: list[dict[str, Any]]) -> None:
        """The lines in one write (an import logs thousands)."""
        lines = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in entries)
        try:
            with self._lock:
                fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, lines.encode("utf-8"))
                    size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
                if size > MAX_BYTES:
                    self._trim()
        except OSError as exc:  # derived data: a full disk must not fail the write it describes
            log.warning("could not append to the activity log %s: %s", self.file, exc)

    def read(self, limit: int = 50, offset: int = 0, tool: str | None = None) -> dict[str, Any]:
        """The newest entries first that the running call's scope may see."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_LIMIT}.")
        if offset < 0:
            raise InvalidInputError("offset must be 0 or more.")
        scope = self.scope()
        if self.settle is not None:
            self.settle()
        lines = self._tail()
        visible = []
        for line in reversed(lines):
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash
            if not isinstance(item, dict) or not scope.sees(item.get("context"), item.get("user")):
                continue
            if tool and item.get("tool") != tool:
                continue
            visible.append(item)
        page = visible[offset : offset + limit]
        return {"entries": page, "offset": offset, "more": len(visible) > offset + limit, "total": len(visible)}

    def _tail(self) -> list[str]:
        try:
            with open(self.file, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - TAIL_BYTES))
                data = f.read()
        except FileNotFoundError:
            return []
        lines = data.decode("utf-8", "replace").splitlines()
        return lines[1:] if size > TAIL_BYTES else lines  # the first line may be cut

    def _trim(self) -> None:
        data = self.file.read_bytes()
        keep = data[-KEEP_BYTES:]
        keep = keep[keep.find(b"\n") + 1 :]
        atomic_write(self.file, keep.decode("utf-8", "replace"), mode=0o600)


def _meta(text: str | Path | None) -> dict[str, Any]:
    if isinstance(text, Path):
        try:
            text = text.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
    meta = parse_note(text).meta if text else {}
    return meta if isinstance(meta, dict) else {}


def _value(value: Any) -> str | None:
    return (str(value).strip() or None) if value is not None else None
