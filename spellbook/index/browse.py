"""Reads for browsing the vault's structure and finding related notes: categories and topics,
folder notes, tags, notes sharing a tag or a context, notes written around the same time.
On the catalog's connection and lock (``Catalog.browse``)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from spellbook.index.filters import HIDDEN_SQL, LIVE_SQL
from spellbook.index.rows import NOTE_COLS, NOTE_COUNT, FolderRow, NoteRow, note_row


class BrowseQueries:
    """Structure and relatedness queries over the catalog's tables."""

    def __init__(
        self, db: sqlite3.Connection, lock: threading.RLock, notes_at: Callable[[Iterable[str]], dict[str, NoteRow]]
    ) -> None:
        self._db = db
        self._lock = lock
        self._notes_at = notes_at

    def overview(self) -> list[tuple[NoteRow, int]]:
        """Every live note (without its frontmatter, to stay light on large vaults) and its file's
        mtime; archived and expired notes are left out, as in search."""
        with self._lock:
            rows = self._db.execute(
                "SELECT notes.path, note_id, title, category, topic, type, context, importance, tags, "
                "created, updated, "
                "folder, managed, '{}', expires, archived, user, coalesce(f.mtime_ns, 0) FROM notes "
                f"LEFT JOIN files f ON f.path = notes.path WHERE {LIVE_SQL} ORDER BY notes.path"
            ).fetchall()
        return [(note_row(r[:NOTE_COUNT]), r[NOTE_COUNT]) for r in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """(tag exactly as written, notes) for every tag; ``Deploy`` and ``deploy`` apart."""
        with self._lock:
            return self._db.execute(
                "SELECT tag, count(DISTINCT path) FROM tags GROUP BY tag COLLATE BINARY ORDER BY tag COLLATE BINARY"
            ).fetchall()

    def paths_tagged(self, tag: str, limit: int) -> list[str]:
        """Notes carrying exactly this spelling of a tag."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT path FROM tags WHERE tag = ? COLLATE BINARY ORDER BY path LIMIT ?", (tag, limit)
            )
            return [r[0] for r in rows]

    def sharing_tags(self, path: str, tags: Sequence[str], limit: int) -> list[tuple[NoteRow, list[str]]]:
        """Other notes with any of these tags (case-insensitive), most shared first."""
        if not tags:
            return []
        marks = ",".join("?" * len(tags))
        with self._lock:
            rows = self._db.execute(
                f"SELECT path, group_concat(tag, char(31)), count(*) AS shared FROM tags "
                f"WHERE tag IN ({marks}) AND path != ? AND path NOT IN (SELECT path FROM notes WHERE {HIDDEN_SQL}) "
                "GROUP BY path ORDER BY shared DESC, path LIMIT ?",
                [*tags, path, limit],
            ).fetchall()
        notes = self._notes_at(r[0] for r in rows)
        return [(notes[p], sorted(set(t.split(chr(31))))) for p, t, _ in rows if p in notes]

    def same_context(self, path: str, context: str, limit: int) -> list[NoteRow]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE context = ? COLLATE NOCASE AND path != ? AND {LIVE_SQL} "
                "ORDER BY coalesce(updated, created, '') DESC, path LIMIT ?",
                (context, path, limit),
            ).fetchall()
        return [note_row(r) for r in rows]

    def around(self, path: str, when: str, window: int) -> tuple[list[NoteRow], list[NoteRow]]:
        """Notes created just before (newest first) and just after (oldest first) ``when``."""
        created = "coalesce(created, updated, '')"
        with self._lock:
            before = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE path != ? AND ({created} < ? OR ({created} = ? AND path < ?)) "
                f"ORDER BY {created} DESC, path DESC LIMIT ?",
                (path, when, when, path, window),
            ).fetchall()
            after = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE path != ? AND ({created} > ? OR ({created} = ? AND path > ?)) "
                f"ORDER BY {created} ASC, path ASC LIMIT ?",
                (path, when, when, path, window),
            ).fetchall()
        return [note_row(r) for r in before], [note_row(r) for r in after]

    def categories(self) -> list[tuple[str | None, str | None, int, str | None]]:
        with self._lock:
            return self._db.execute(
                "SELECT category, topic, count(*), max(coalesce(updated, created)) FROM notes "
                "GROUP BY category, topic ORDER BY category, topic"
            ).fetchall()

    def topics(self, where: str, params: Sequence[Any]) -> list[tuple[str | None, str | None, int, int, str | None]]:
        """(category, topic, notes, chunks, last update) of the notes matching ``where``."""
        with self._lock:
            return self._db.execute(
                "SELECT notes.category, notes.topic, count(*), "
                "sum((SELECT count(*) FROM chunks c WHERE c.path = notes.path)), "
                f"max(coalesce(notes.updated, notes.created)) FROM notes WHERE {where} "
                "GROUP BY notes.category, notes.topic ORDER BY notes.category, notes.topic",
                params,
            ).fetchall()

    def topic_tags(self, where: str, params: Sequence[Any]) -> list[tuple[str | None, str | None, str, int]]:
        """(category, topic, tag, notes with it), most used first."""
        with self._lock:
            return self._db.execute(
                "SELECT notes.category, notes.topic, t.tag, count(*) AS n "
                "FROM tags t JOIN notes ON notes.path = t.path "
                f"WHERE {where} GROUP BY notes.category, notes.topic, t.tag ORDER BY n DESC, t.tag",
                params,
            ).fetchall()

    def folder_notes(self) -> list[FolderRow]:
        with self._lock:
            rows = self._db.execute("SELECT path, folder, meta, body FROM folders ORDER BY path").fetchall()
        return [FolderRow(r[0], r[1], json.loads(r[2] or "{}"), r[3] or "") for r in rows]
