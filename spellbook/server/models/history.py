"""Results of history and restore (tools_history.py)."""

from __future__ import annotations

from spellbook.server.models.base import Out


class HistoryVersion(Out):
    version: str
    commit: str
    date: str
    author: str
    message: str
    path: str | None  # None: the file was deleted in this commit
    change: str  # added, modified, renamed, deleted
    content_version: str | None
    current: bool


class HistoryResult(Out):
    id: str
    path: str | None
    title: str
    erased: bool
    current_version: str | None
    uncommitted: bool
    versions: list[HistoryVersion]
    more: bool


class RestoreResult(Out):
    id: str
    path: str
    version: str
    restored: str
    unchanged: bool | None = None  # the file already held that version: nothing written
    erased_before: bool | None = None
    committing: bool | None = None
