"""The catalog: a SQLite ledger of what is indexed, and the keyword (FTS5) index.

Tables:
  meta    index identity (format, embedder, chunker): a mismatch means rebuild
  files   every vault file seen: version (content hash), mtime/size, problem (why skipped/warned)
  notes   one row per indexed note: id, title, category, topic, tags... (for filters and listing)
  chunks  one row per chunk: heading, text, digest (content hash of what was embedded)
  tags    one row per (note, tag)
  links   one row per link a note writes: target as written, relation ('' for a plain
          [[wikilink]] in the body or ``links``; related, supersedes... for frontmatter relations)
  chunks_fts  FTS5 over pre-tokenised title / metadata / body, rowid = chunks.rowid
  folders one row per folder note (``_about.md``: a category's or topic's description; ``_overview.md``)
  unconfirmed  files whose vectors their writer did not see stored (index/pending.py)

Like the vector index, it is derived from the vault and can be deleted at any time.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spellbook.crashpoints import crash_point
from spellbook.files import private_file, private_folder
from spellbook.index.browse import BrowseQueries
from spellbook.index.filters import HIDDEN_SQL, NOW_SQL
from spellbook.index.fulltext import KeywordChange, KeywordIndex
from spellbook.index.keyword import index_text
from spellbook.index.links import LinkQueries
from spellbook.index.pending import PendingVectors
from spellbook.index.rows import (
    NOTE_CACHE,
    NOTE_COLS,
    NOTE_COUNT,
    ChunkRow,
    FileRow,
    FolderRow,
    IndexedChunk,
    KeptRows,
    NoteRow,
    meta_json,
    note_row,
)
from spellbook.index.schema import ADDED_COLUMNS, LATE_INDEXES, SCHEMA

FILTER_CACHE_SIZE = 32
REFILTER_LIMIT = 2_000  # (paths written) x (filters kept) above which the kept answers are dropped


@dataclass
class _FilterEntry:
    """One kept answer of ``filtered_chunk_ids``: the filter, its chunks per note path, and the
    flattened forms (None: to rebuild)."""

    where: str
    params: list[Any]
    by_path: dict[str, tuple[tuple[int, str], ...]]  # note path -> (catalog row id, chunk id) of its chunks
    next_expiry: str | None
    ids: tuple[str, ...] | None = None
    rowids: frozenset[int] | None = None


class Catalog:
    def __init__(self, file: Path) -> None:
        private_folder(file.parent)  # the index holds every note's text: owner only
        for each in (file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")):
            if each == file or each.exists():
                private_file(each)
        self._db = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(links)")}
        if columns and "relation" not in columns:  # an index of format <= 4: rebuilt on start anyway
            self._db.execute("ALTER TABLE links ADD COLUMN relation TEXT NOT NULL DEFAULT ''")
        self._db.executescript(SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_xinfo(notes)")}  # xinfo: generated columns too
        for name, kind in ADDED_COLUMNS.items():
            if name not in have:
                self._db.execute(f"ALTER TABLE notes ADD COLUMN {name} {kind}")
        self._db.executescript(LATE_INDEXES)
        self._lock = threading.RLock()
        self.generation = 0  # committed (or rolled back) write transactions: caches below check it
        self._notes = KeptRows(NOTE_CACHE)  # path -> note row, until a write changes that path
        self.links = LinkQueries(self._db, self._lock, lambda: self.generation)  # link lookups, on this connection
        self.browse = BrowseQueries(self._db, self._lock, self.notes_at)  # structure and related notes
        self.pending = PendingVectors(self._db, self._lock)  # which files' vectors no one vouches for
        self._filters: dict[tuple[str, tuple[Any, ...]], _FilterEntry] = {}  # see filtered_chunk_ids
        # Keyword search reads on its own connection (WAL: it sees every committed write), so the
        # vector side of a hybrid search does not wait behind it for the catalog.
        self._reader = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
        self._reader_lock = threading.Lock()
        self.keywords = KeywordIndex(
            self._reader, self._reader_lock, lambda: self.generation, file, self._lock
        )  # keyword search, on the reader
        self._ops: list[KeywordChange] = []  # the chunks a write transaction adds and removes, for self.keywords

    def close(self) -> None:
        self.keywords.close()
        with self._lock, self._reader_lock:
            self._db.close()
            self._reader.close()

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction: all or none of it, also under kill -9 (in autocommit mode ``with
        connection:`` opens none: a kill between a file's ledger row and its note row once left the
        file marked indexed with no note)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._ops = []
            try:
                yield
                crash_point("catalog-transaction")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._filters.clear()  # kept filter answers may hold rows that were rolled back
                self._notes.clear()  # ...and kept note rows, read inside the transaction
                self.generation += 1
                raise
            self._db.execute("COMMIT")
            self.generation += 1
            self.keywords.changed(self._ops)

    def incomplete_files(self) -> list[str]:
        """Ledger rows that claim a file was indexed while its note is missing (left by the
        non-atomic writes of older versions): the indexer treats those files as new."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path FROM files WHERE problem IS NULL AND path NOT IN (SELECT path FROM notes) "
                "AND path NOT IN (SELECT path FROM folders) ORDER BY path"
            ).fetchall()
        return [r[0] for r in rows]

    # --- identity -----------------------------------------------------------------------------
    def identity(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def set_identity(self, values: dict[str, str]) -> None:
        with self._write():
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())

    # --- files --------------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        with self._lock:
            rows = self._db.execute("SELECT path, version, mtime_ns, size, problem FROM files").fetchall()
        return {r[0]: FileRow(*r) for r in rows}

    def file(self, path: str) -> FileRow | None:
        with self._lock:
            row = self._db.execute(
                "SELECT path, version, mtime_ns, size, problem FROM files WHERE path = ?", (path,)
            ).fetchone()
        return FileRow(*row) if row else None

    def touch(self, path: str, mtime_ns: int, size: int) -> None:
        with self._lock:
            self._db.execute("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?", (mtime_ns, size, path))

    def problems(self) -> list[dict[str, str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT path, problem FROM files WHERE problem IS NOT NULL ORDER BY path"
            ).fetchall()
        return [{"path": p, "problem": why} for p, why in rows]

    # --- writes: one transaction per batch of files -------------------------------------------
    def replace(
        self,
        file: FileRow,
        note: NoteRow | FolderRow | None,
        chunks: Sequence[IndexedChunk],
    ) -> None:
        """Record one file's new state: its ledger row, its note (or folder note) and its chunks."""
        self.replace_many([(file, note, chunks)])

    def replace_many(self, items: Iterable[tuple[FileRow, NoteRow | FolderRow | None, Sequence[IndexedChunk]]]) -> None:
        items = list(items)
        with self._write():
            written: list[str] = []
            known = self._known_paths([file.path for file, _, _ in items])  # a new file has nothing to delete
            for file, note, chunks in items:
                written.append(file.path)
                if file.path in known:
                    self._delete_path(file.path)
                self._db.execute(
                    "INSERT INTO files VALUES (?, ?, ?, ?, ?)",
                    (file.path, file.version, file.mtime_ns, file.size, file.problem),
                )
                if isinstance(note, FolderRow):
                    self._db.execute(
                        "INSERT INTO folders VALUES (?, ?, ?, ?)",
                        (note.path, note.folder, meta_json(note.meta), note.body),
                    )
                    note = None
                if note is not None:
                    self._db.execute(
                        f"INSERT INTO notes ({NOTE_COLS}) VALUES ({', '.join('?' * NOTE_COUNT)})",
                        (
                            note.path,
                            note.note_id,
                            note.title,
                            note.category,
                            note.topic,
                            note.type,
                            note.context,
                            note.importance,
                            json.dumps(note.tags, ensure_ascii=False),
                            note.created,
                            note.updated,
                            note.folder,
                            int(note.managed),
                            meta_json(note.meta),
                            note.expires,
                            int(note.archived),
                            note.user,
                        ),
                    )
                    self._db.executemany(
                        "INSERT INTO links (path, target, relation) VALUES (?, ?, ?)",
                        [(note.path, target, "") for target in note.links]
                        + [(note.path, target, relation) for relation, target in note.relations],
                    )
                    self._db.executemany("INSERT INTO tags VALUES (?, ?)", [(note.path, tag) for tag in note.tags])
                for chunk in chunks:
                    row = chunk.row
                    cur = self._db.execute(
                        "INSERT INTO chunks (chunk_id, path, idx, heading, text, digest) VALUES (?, ?, ?, ?, ?, ?)",
                        (row.chunk_id, row.path, row.idx, row.heading, row.text, row.digest),
                    )
                    columns = (chunk.fts_title, chunk.fts_meta, index_text(row.text))
                    self._db.execute(
                        "INSERT INTO chunks_fts (rowid, title, meta, body) VALUES (?, ?, ?, ?)",
                        (cur.lastrowid, *columns),
                    )
                    self._ops.append((cur.lastrowid, columns))  # for the in-memory copy, if there is one
            self.pending.mark(file.path for file, _, chunks in items if chunks)
            self._notes.drop(written)  # a path new to the catalog too
            self._refilter(written)

    def remove(self, paths: Iterable[str]) -> None:
        with self._write():
            paths = list(paths)
            for path in paths:
                self._delete_path(path)
            self._refilter(paths)

    def _known_paths(self, paths: list[str]) -> set[str]:
        """Those of ``paths`` the catalog has a file row for (every other row of a path is
        written with it, in one transaction)."""
        return {r[0] for r in self._select_in("SELECT path FROM files WHERE path IN ({marks})", paths)}

    def _select_in(self, sql: str, values: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """The rows of ``sql``, whose ``{marks}`` is given ``values`` 500 at a time (SQLite's limit
        on parameters is 999 in older builds). The caller holds the lock."""
        for start in range(0, len(values), 500):
            part = list(values[start : start + 500])
            yield from self._db.execute(sql.format(marks=",".join("?" * len(part))), part)

    def _delete_path(self, path: str) -> None:
        self._notes.drop([path])
        if self.keywords.following:
            self._ops.extend(
                (rowid, None)
                for (rowid,) in self._db.execute("SELECT rowid FROM chunks WHERE path = ?", (path,)).fetchall()
            )
        self._db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)", (path,))
        self._db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self._db.execute("DELETE FROM notes WHERE path = ?", (path,))
        self._db.execute("DELETE FROM links WHERE path = ?", (path,))
        self._db.execute("DELETE FROM tags WHERE path = ?", (path,))
        self._db.execute("DELETE FROM folders WHERE path = ?", (path,))
        self._db.execute("DELETE FROM files WHERE path = ?", (path,))
        self.pending.unmark(path)

    def clear(self) -> None:
        with self._write():
            self._filters.clear()
            self._notes.clear()
            self._ops.append((-1, None))  # every row of the in-memory copy
            for table in ("chunks_fts", "chunks", "notes", "links", "tags", "folders", "files", "meta", "unconfirmed"):
                self._db.execute(f"DELETE FROM {table}")

    # --- reads --------------------------------------------------------------------------------
    def chunk_ids(self, path: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT chunk_id FROM chunks WHERE path = ?", (path,))]

    def all_chunk_ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT chunk_id FROM chunks")}

    def chunk_ids_by_digest(self, digests: Iterable[str]) -> dict[str, str]:
        """digest -> one chunk id that already has a vector for that exact content."""
        found: dict[str, str] = {}
        wanted = list(dict.fromkeys(digests))
        with self._lock:
            for digest, chunk_id in self._select_in(
                "SELECT digest, chunk_id FROM chunks WHERE digest IN ({marks})", wanted
            ):
                found.setdefault(digest, chunk_id)
        return found

    def chunks(self, chunk_ids: Sequence[str]) -> dict[str, ChunkRow]:
        with self._lock:  # 500 ids a query: doctor asks for every chunk without a vector
            sql = "SELECT chunk_id, path, idx, heading, text, digest FROM chunks WHERE chunk_id IN ({marks})"
            return {r[0]: ChunkRow(*r) for r in self._select_in(sql, list(chunk_ids))}

    def chunks_of(self, path: str) -> list[ChunkRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT chunk_id, path, idx, heading, text, digest FROM chunks WHERE path = ? ORDER BY idx", (path,)
            ).fetchall()
        return [ChunkRow(*r) for r in rows]

    def notes_by_id(self, note_id: str) -> list[NoteRow]:
        with self._lock:
            rows = self._db.execute(f"SELECT {NOTE_COLS} FROM notes WHERE note_id = ? ORDER BY path", (note_id,))
            return [note_row(r) for r in rows.fetchall()]

    def note_at(self, path: str) -> NoteRow | None:
        with self._lock:
            row = self._db.execute(f"SELECT {NOTE_COLS} FROM notes WHERE path = ?", (path,)).fetchone()
        return note_row(row) if row else None

    def notes_at(self, paths: Iterable[str]) -> dict[str, NoteRow]:
        """The notes at these paths. The last NOTE_CACHE rows read are kept until a write changes
        their path (a search reads the rows of its ~100 candidates: a tenth of its time before, and
        after each write a third of the next search's). A kept row is the same object until then."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        with self._lock:  # writes hold it too: a path's row is dropped in the transaction that changes it
            out = self._notes.get(None, wanted)
            missing = [p for p in wanted if p not in out]
            if missing:
                marks = ",".join("?" * len(missing))
                rows = self._db.execute(f"SELECT {NOTE_COLS} FROM notes WHERE path IN ({marks})", missing).fetchall()
                out.update(self._notes.put((r[0], note_row(r)) for r in rows))
        return {p: out[p] for p in wanted if p in out}

    def list_notes(
        self, where: str, params: Sequence[Any], limit: int, offset: int, oldest_first: bool = False
    ) -> tuple[list[NoteRow], int]:
        order = (
            "coalesce(created, updated, '') ASC, path" if oldest_first else "coalesce(updated, created, '') DESC, path"
        )
        with self._lock:
            total = self._db.execute(f"SELECT count(*) FROM notes WHERE {where}", params).fetchone()[0]
            rows = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, limit, offset],
            ).fetchall()
        return [note_row(r) for r in rows], total

    def filtered_chunk_ids(self, where: str, params: Sequence[Any]) -> tuple[str, ...]:
        """Ids of the chunks of the notes matching a filter, in a tuple that stays the same object
        until the answer changes. An agent repeats a filter (its project, a category) query after
        query, so answers are kept and brought up to date on each write (``_refilter``): at 100k
        chunks the first answer costs ~50 ms, the next ones nothing. Filters hide expired notes, so
        an answer is recomputed once the next ``expires`` has passed."""
        with self._lock:
            entry = self._filter_entry(where, params)
            if entry.ids is None:
                entry.ids = tuple(cid for pairs in entry.by_path.values() for _, cid in pairs)
            return entry.ids

    def filtered_rowids(self, where: str, params: Sequence[Any]) -> frozenset[int]:
        """The same chunks as ``filtered_chunk_ids``, as catalog row ids (what FTS5 returns)."""
        with self._lock:
            entry = self._filter_entry(where, params)
            if entry.rowids is None:
                entry.rowids = frozenset(rowid for pairs in entry.by_path.values() for rowid, _ in pairs)
            return entry.rowids

    def _filter_entry(self, where: str, params: Sequence[Any]) -> _FilterEntry:
        key = (where, tuple(params))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # the format of notes.expires
        entry = self._filters.pop(key, None)  # re-inserted last: the dict is in LRU order
        if entry is None or (entry.next_expiry is not None and now >= entry.next_expiry):
            # Notes first, then their chunks by path: a scan of chunks probing notes costs ~2x.
            rows = self._db.execute(
                f"SELECT notes.path, c.rowid, c.chunk_id FROM notes CROSS JOIN chunks c ON c.path = notes.path "
                f"WHERE {where}",
                params,
            ).fetchall()
            by_path: dict[str, list[tuple[int, str]]] = {}
            for path, rowid, chunk_id in rows:
                by_path.setdefault(path, []).append((rowid, chunk_id))
            next_expiry = self._db.execute("SELECT min(expires) FROM notes WHERE expires > ?", (now,)).fetchone()[0]
            entry = _FilterEntry(where, list(params), {p: tuple(v) for p, v in by_path.items()}, next_expiry)
        while len(self._filters) >= FILTER_CACHE_SIZE:
            self._filters.pop(next(iter(self._filters)))
        self._filters[key] = entry
        return entry

    def _refilter(self, paths: list[str]) -> None:
        """Bring every kept filter answer up to date with the notes just written or removed: one
        small query per filter and path. A big batch (a first index, a git checkout) drops them."""
        if not self._filters:
            return
        if len(paths) * len(self._filters) > REFILTER_LIMIT:
            self._filters.clear()
            return
        for entry in self._filters.values():
            for path in paths:
                rows = self._db.execute(
                    f"SELECT c.rowid, c.chunk_id FROM notes CROSS JOIN chunks c ON c.path = notes.path "
                    f"WHERE notes.path = ? AND ({entry.where})",
                    [path, *entry.params],
                ).fetchall()
                now_in = tuple((r[0], r[1]) for r in rows)
                if entry.by_path.get(path, ()) != now_in:
                    entry.by_path.pop(path, None)
                    if now_in:
                        entry.by_path[path] = now_in
                    entry.ids = None
                    entry.rowids = None
                expires = self._db.execute("SELECT expires FROM notes WHERE path = ?", (path,)).fetchone()
                if expires and expires[0] and (entry.next_expiry is None or expires[0] < entry.next_expiry):
                    entry.next_expiry = expires[0]

    def chunk_ids_of(self, paths: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._lock:
            sql = "SELECT path, chunk_id FROM chunks WHERE path IN ({marks}) ORDER BY path, idx"
            for path, chunk_id in self._select_in(sql, paths):
                out.setdefault(path, []).append(chunk_id)
        return out

    def sample_texts(self, limit: int) -> list[str]:
        """Up to ``limit`` chunk texts spread evenly over the index."""
        with self._lock:
            total = self._db.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 0
            step = max(1, total // limit)
            rows = self._db.execute("SELECT text FROM chunks WHERE rowid % ? = 0 LIMIT ?", (step, limit))
            return [r[0] for r in rows.fetchall()]

    def counts(self) -> dict[str, int]:
        with self._lock:
            one = lambda sql: self._db.execute(sql).fetchone()[0]
            return {
                "files": one("SELECT count(*) FROM files"),
                "notes": one("SELECT count(*) FROM notes"),
                "chunks": one("SELECT count(*) FROM chunks"),
                "skipped": one(
                    "SELECT count(*) FROM files WHERE problem IS NOT NULL AND path NOT IN (SELECT path FROM notes)"
                ),
                "warnings": one(
                    "SELECT count(*) FROM files WHERE problem IS NOT NULL AND path IN (SELECT path FROM notes)"
                ),
            }

    # --- structure and lifecycle --------------------------------------------------------------
    def changes(self) -> int:
        """Rows changed through this catalog since it was opened: a cheap "did anything change?"."""
        with self._lock:
            return self._db.total_changes

    def hidden_chunks(self) -> int:
        """Chunks of archived or expired notes: what an unfiltered vector query must skip."""
        with self._lock:
            return self._db.execute(
                f"SELECT count(*) FROM notes JOIN chunks c ON c.path = notes.path WHERE {HIDDEN_SQL}"
            ).fetchone()[0]

    def expired(self) -> list[NoteRow]:
        """Notes whose ``expires`` has passed and that are not archived yet, oldest expiry first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {NOTE_COLS} FROM notes WHERE archived = 0 AND expires IS NOT NULL AND expires <= {NOW_SQL} "
                "ORDER BY expires, path"
            ).fetchall()
        return [note_row(r) for r in rows]
