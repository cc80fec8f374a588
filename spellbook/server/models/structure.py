"""Results of describe and erase_topic (tools_structure.py)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from spellbook.server.models.base import NoteRef, Out, compact_schema


class DescribeResult(Out):
    """The written ``_about.md``: where, its version, and its frontmatter as the file holds it (a person
    may have written other keys, or other types: a number for a title, keywords as one string)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=compact_schema)

    path: str
    version: str
    created: bool
    category: str
    topic: str | None
    title: Any = None
    description: Any = None
    summary: Any = None
    keywords: Any = None
    redacted: str | None = None


class TrashedNote(NoteRef):
    trash_path: str


class EraseTopicResult(Out):
    topic: str
    category: str | None
    categories: list[str]
    count: int
    confirmed: bool
    would_remove: list[NoteRef] | None = None  # confirm=false
    removed: list[TrashedNote] | None = None  # confirm=true
    description_files: list[str]
    note: str | None = None
