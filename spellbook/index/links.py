"""Links between notes, as the catalog resolves them: wikilinks and typed relations written in the
notes, matched by title, alias or path the way Obsidian does; backlinks; the whole link graph.
Reads only, on the catalog's connection and lock (``Catalog.links``)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable
from typing import Any

from spellbook.index.rows import NOTE_COLS, NoteRow, note_row

_ALIASES = "json_each(notes.meta, '$.aliases') WHERE type IN ('text', 'integer', 'real')"


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(text: str) -> str:
    """SQLite's lower(): ASCII letters only."""
    return text.translate(_ASCII_LOWER)


def _names(note: NoteRow) -> set[str]:
    """The link texts that name a note: its path without .md and every shorter ending of it down
    to the file name (``a/b/c``, ``b/c``, ``c``), its title, its aliases; lowered as SQLite's
    lower() lowers the links they are compared with (ASCII letters only: a title "Été" is "Été")."""
    parts = _ascii_lower(note.path.removesuffix(".md")).split("/")
    names = {"/".join(parts[i:]) for i in range(len(parts))} | {_ascii_lower(note.title)}
    names.update(_ascii_lower(_alias_text(a)) for a in aliases_of(note.meta))
    return names


def aliases_of(meta: dict[str, Any]) -> list[Any]:
    """A note's aliases as Obsidian reads them: ``aliases`` may be a list, one string, a number or
    empty; only text and numbers name a note (as ``_ALIASES`` selects them in SQL)."""
    value = meta.get("aliases")
    values = value if isinstance(value, list) else [value]
    return [a for a in values if isinstance(a, str | int | float) and not isinstance(a, bool)]


def _alias_text(value: Any) -> str:
    """An alias as SQLite's json_each value reads as text (``2024``, ``1.5``, ``Fold``)."""
    return str(value)


def _prefixed(table: str) -> str:
    return ", ".join(f"{table}.{column.strip()}" for column in NOTE_COLS.split(","))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class LinkQueries:
    """Link lookups over the catalog's tables (``links``, ``notes``)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, generation: Callable[[], int]) -> None:
        self._db = db
        self._lock = lock
        self._generation = generation  # the catalog's write count: what is kept below is good until it moves
        self._superseding: tuple[int, frozenset[str]] = (-1, frozenset())
        self._names: tuple[int, dict[str, str] | None] = (-1, None)  # link name -> path, for a generation

    def links_of(self, path: str) -> list[str]:
        """The link targets a note writes, as written, each once (body and frontmatter)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT target FROM links WHERE path = ? GROUP BY target ORDER BY min(rowid)", (path,)
            )
            return [r[0] for r in rows]

    def links_from(self, path: str) -> list[tuple[str, str]]:
        """(target as written, relation) for every link a note writes; relation '' = plain wikilink."""
        with self._lock:
            rows = self._db.execute("SELECT target, relation FROM links WHERE path = ? ORDER BY rowid", (path,))
            return [(r[0], r[1]) for r in rows]

    def resolve_link(self, target: str) -> NoteRow | None:
        """The note a ``[[target]]`` points to, as Obsidian resolves it: a path (with or without
        .md), a file name, a title, or an alias; case-insensitive; the shortest path wins.

        One lookup is a query over every note (~20 ms at 10k notes); from the second lookup between
        two writes on, every name is resolved from a map of them all, built once (a page with many
        links, a merge relinking many notes)."""
        generation = self._generation()
        with self._lock:
            kept_generation, names = self._names
            if kept_generation != generation or names is None:
                self._names = (generation, None)  # the next lookup of this generation builds the map
        if kept_generation != generation:
            found = self.link_matches(target, 1)
            return found[0] if found else None
        if names is None:
            names = self._name_map()
            with self._lock:
                if self._names[0] == generation:
                    self._names = (generation, names)
        path = names.get(_ascii_lower(target.strip().removesuffix(".md")))
        if path is None:
            return None
        with self._lock:
            row = self._db.execute(f"SELECT {NOTE_COLS} FROM notes WHERE path = ?", (path,)).fetchone()
        return note_row(row) if row else None

    def _name_map(self) -> dict[str, str]:
        """Every name a link can use -> the note it resolves to (the shortest path claims a name
        first), with SQLite's ASCII-only lower() on the names as ``link_matches`` compares them."""
        resolver: dict[str, str] = {}
        with self._lock:
            notes = self._db.execute(
                f"SELECT path, title, (SELECT json_group_array(value) FROM {_ALIASES}) FROM notes "
                "ORDER BY length(path), path"
            ).fetchall()
        for path, title, aliases in notes:
            parts = path.removesuffix(".md").split("/")
            names = {_ascii_lower("/".join(parts[i:])) for i in range(len(parts))}
            names.add(_ascii_lower(title or ""))
            names.update(_ascii_lower(str(a)) for a in json.loads(aliases or "[]"))
            for name in names:
                resolver.setdefault(name, path)
        return resolver

    def link_matches(self, target: str, limit: int) -> list[NoteRow]:
        """Every note ``[[target]]`` could mean (up to ``limit``), the one it resolves to first."""
        name = _ascii_lower(target.strip().removesuffix(".md"))  # as SQLite's lower() below
        with self._lock:
            rows = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE lower(path) = ? OR lower(path) LIKE ? ESCAPE '\\' "
                f"OR lower(title) = ? OR EXISTS (SELECT 1 FROM {_ALIASES} AND lower(value) = ?) "
                "ORDER BY length(path), path LIMIT ?",
                (name + ".md", "%/" + _like_escape(name) + ".md", name, name, limit),
            ).fetchall()
        return [note_row(r) for r in rows]

    def backlinks(self, note: NoteRow) -> list[NoteRow]:
        """Notes whose wikilinks point at ``note`` by path, file name, title or alias."""
        names = _names(note)
        marks = ",".join("?" * len(names))
        with self._lock:
            rows = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE path != ? AND path IN "
                f"(SELECT path FROM links WHERE lower(target) IN ({marks})) ORDER BY path",
                [note.path, *names],
            ).fetchall()
        return [note_row(r) for r in rows]

    def inbound(self, note: NoteRow) -> list[tuple[NoteRow, str, str]]:
        """(source note, target as written, relation) for every link whose text names ``note``
        (by path, file name, title or alias), other notes only; the caller checks resolution."""
        names = _names(note)
        marks = ",".join("?" * len(names))
        with self._lock:
            rows = self._db.execute(
                f"SELECT l.target, l.relation, {_prefixed('n')} FROM links l "
                f"JOIN notes n ON n.path = l.path WHERE l.path != ? AND lower(l.target) IN ({marks}) "
                "ORDER BY l.path, l.rowid",
                [note.path, *names],
            ).fetchall()
        return [(note_row(r[2:]), r[0], r[1]) for r in rows]

    def superseded(self, notes: Iterable[NoteRow]) -> set[str]:
        """Paths of these notes that another note's ``supersedes`` relation points to."""
        with self._lock:
            generation, targets = self._superseding
            if generation != self._generation():  # a search asks this every time: one read per write
                rows = self._db.execute("SELECT DISTINCT lower(target) FROM links WHERE relation = 'supersedes'")
                targets = frozenset(r[0] for r in rows)
                self._superseding = (self._generation(), targets)
        if not targets:  # most vaults: no note's names to work out
            return set()
        by_name: dict[str, list[NoteRow]] = {}
        for note in notes:
            for name in _names(note):
                by_name.setdefault(name, []).append(note)
        names = [name for name in by_name if name in targets]
        if not names:
            return set()
        found: set[str] = set()
        with self._lock:
            for start in range(0, len(names), 500):
                part = names[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT DISTINCT path, target FROM links WHERE relation = 'supersedes' "
                    f"AND lower(target) IN ({marks})",
                    part,
                ).fetchall()
                for source, target in rows:
                    resolved = self.resolve_link(target)  # a name two notes share means the first
                    if resolved is not None and resolved.path != source:
                        found.add(resolved.path)
        return {n.path for group in by_name.values() for n in group if n.path in found}

    def link_graph(self) -> list[tuple[str, str, str, str | None]]:
        """(source path, target as written, relation, resolved path or None) for every link in the
        vault, resolved in one pass as ``resolve_link`` resolves them (for vault-wide checks)."""
        with self._lock:
            links = self._db.execute("SELECT path, target, relation FROM links ORDER BY path, rowid").fetchall()
        resolver = self._name_map()
        return [
            (source, target, relation, resolver.get(_ascii_lower(target.strip().removesuffix(".md"))))
            for source, target, relation in links
        ]
