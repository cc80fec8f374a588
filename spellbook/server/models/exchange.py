"""Results of export and import (tools_exchange.py)."""

from __future__ import annotations

from typing import Any

from spellbook.server.models.base import Out


class ExportedMemory(Out):
    id: str
    path: str
    title: str
    metadata: dict[str, Any]
    body: str


class ExportDocument(Out):
    spellbook_export: int
    exported: str
    spellbook_version: str
    filter: dict[str, Any] | None
    count: int
    memories: list[ExportedMemory]


class ExportResult(Out):
    format: str
    count: int
    exported: str
    path: str | None = None  # written to a file
    bytes: int | None = None
    content: ExportDocument | str | None = None  # inline: the JSON document, or the markdown text
    unreadable: list[str] | None = None
    note: str | None = None
    redacted: str | None = None


class ImportItem(Out):
    where: str
    id: str | None
    path: str
    title: str
    reason: str | None = None  # skipped
    error: str | None = None  # failed
    original_id: str | None = None  # created under a new id
    requested_path: str | None = None  # written at another path than the export's


class ImportCounts(Out):
    created: int
    overwritten: int
    unchanged: int
    skipped: int
    failed: int


class ImportResult(Out):
    file: str
    format: str
    on_conflict: str
    dry_run: bool
    total: int
    counts: ImportCounts
    created: list[ImportItem]
    overwritten: list[ImportItem]
    unchanged: list[ImportItem]
    skipped: list[ImportItem]
    failed: list[ImportItem]
    truncated: str | None = None
    warnings: list[str] | None = None
    redacted: str | None = None
