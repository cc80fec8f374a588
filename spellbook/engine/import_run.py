"""What one import did so far (``ImportRun``), the new notes it writes together (``Created``), and
its progress for the CLI's bar (``ImportProgress``): spellbook/engine/exchange.py runs it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from spellbook.engine.formats.spellbook_export import Entry
from spellbook.errors import FileChangedError
from spellbook.index.claims import Claims, Hold
from spellbook.index.indexer import Progress


@dataclass
class Created:
    """A new note of an import: where it goes, its text and fields."""

    entry: Entry
    path: str
    text: str
    meta: dict[str, Any]
    note_id: str
    kinds: list[str]


class ImportProgress:
    """An import's ``progress(done, total)``: an entry left alone (skipped, unchanged, failed, a dry
    run) is done when it is read, a written one when the indexer has its batch (which it reports
    from its own thread)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress, self._total = progress, total
        self._lock = threading.Lock()
        self._read = self._written = self._indexed = 0

    def read(self, written: int) -> None:
        """One more entry read; ``written``: the entries written (or to be) so far."""
        with self._lock:
            self._read, self._written = self._read + 1, written
            self._report()

    def indexed(self, count: int) -> None:
        with self._lock:
            self._indexed = count
            self._report()

    def _report(self) -> None:
        if self._progress is not None:
            done = self._read - self._written + self._indexed
            self._progress(max(0, min(self._total, done)), self._total)


class ImportRun:
    """What one import did so far."""

    def __init__(self, on_conflict: str, dry_run: bool) -> None:
        self.on_conflict = on_conflict
        self.dry_run = dry_run
        self.lists: dict[str, list[dict[str, Any]]] = {
            "created": [],
            "overwritten": [],
            "unchanged": [],
            "skipped": [],
            "failed": [],
        }
        self.seen: dict[str, str] = {}  # id -> path, for ids the file repeats
        self.claimed: set[str] = set()  # paths taken by this import (a dry run writes none)
        self.written: list[str] = []
        self.texts: dict[str, str] = {}  # path -> what this import wrote there (for the commit)
        self.metas: dict[str, dict[str, Any]] = {}  # path -> its fields (for the activity log)
        self.kinds: list[str] = []
        self.new: list[Created] = []  # new notes waiting to be written together
        self.hold: Hold = Claims().hold()  # the paths claimed from the watcher: import_memories sets the indexer's

    def wrote(self, path: str, text: str, meta: dict[str, Any]) -> None:
        self.written.append(path)
        self.texts[path] = text
        self.metas[path] = meta

    def created(self, created: Created, path: str) -> None:
        self.kinds += created.kinds
        extra = {"original_id": created.entry.id} if created.note_id != created.entry.id else {}
        self.record("created", created.entry, path, id=created.note_id, **extra)

    def failed(self, entry: Entry, exc: Exception) -> None:
        message = (
            f"{exc.path} changed on disk during the import; not overwritten"
            if isinstance(exc, FileChangedError)
            else str(exc)
        )
        self.record("failed", entry, entry.path, error=message)

    def record(self, outcome: str, entry: Entry, path: str, **extra: Any) -> None:
        item = {"where": entry.where, "id": entry.id, "path": path, "title": entry.title, **extra}
        if path != entry.path:
            item["requested_path"] = entry.path
        self.lists[outcome].append(item)
