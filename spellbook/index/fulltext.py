"""Keyword search (BM25) over the catalog's chunks (``Catalog.keywords``; docs/search.md).

The catalog's FTS5 table is the keyword index of record. Searches rank with a copy of it held in
memory (``index/postings.py``: the same scores, ~10x faster at 10k chunks), built from the table
once per process, on the first search or when the server's index is ready, and kept in step with
every write the catalog commits. Until it is built, and for a filter too narrow for its best
matches, FTS5 ranks, on its own SQLite connection so the vector side of a hybrid search never
waits behind it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spellbook.index.keyword import STOPWORDS, match_query, query_tokens, tokenize
from spellbook.index.postings import Postings
from spellbook.startup.heap import trim_heap

log = logging.getLogger(__name__)

FTS_WEIGHTS = (3.0, 2.0, 1.0)
HYBRID_POSTINGS = 20_000  # FTS5: the commonest query tokens are left out past this many matches in all...
KEYWORD_POSTINGS = 40_000  # ...(keyword mode keeps more: no vectors make up for them)...
ARRAY_POSTINGS = 400_000  # ...(in memory, ~20x cheaper a match: hybrid and keyword alike)...
COMMON_MIN_CHUNKS = 2_000  # ...once the index is this large (docs/search.md)
MAX_KEYWORD_DEPTH = 10_000  # best matches looked through before a filter is applied in SQL instead
DOC_COUNTS_KEPT = 50_000  # tokens whose chunk counts are kept until the next write
BUILD_WAITED_ROWS = (
    1_000  # a first search builds the in-memory index before it answers up to this many chunks (~0.15 s)
)

# A chunk row the catalog wrote (its three keyword columns) or removed (None); row -1: every row.
KeywordChange = tuple[int, tuple[str, str, str] | None]


class KeywordIndex:
    """BM25 ranking of chunks for a query, within the notes a filter selects."""

    def __init__(
        self,
        reader: sqlite3.Connection,
        lock: threading.Lock,
        generation: Callable[[], int],
        file: Path,
        write_lock: threading.RLock,
    ) -> None:
        self._reader = reader
        self._reader_lock = lock
        self._generation = generation  # the catalog's write count: the kept counts below go when it moves
        self._doc_counts: dict[str, int] = {}
        self._doc_counts_of = -1
        self._file = file
        self._write_lock = write_lock  # the catalog's: held by its writes, and while it calls changed()
        self.postings: Postings | None = None
        self._pending: list[KeywordChange] | None = None  # writes committed while the postings are built
        self._building: threading.Thread | None = None
        self._closed = False
        self._mask: tuple[frozenset[int] | None, np.ndarray | None] = (None, None)

    # --- the in-memory copy --------------------------------------------------------------------
    @property
    def following(self) -> bool:
        """Whether the catalog should report the rows it writes (``changed``)."""
        return self.postings is not None or self._pending is not None

    def _snapshot(self) -> tuple[sqlite3.Connection, sqlite3.Cursor]:
        """A connection reading every chunk's keyword columns as of now, with no write under way;
        the writes committed from now on are kept (``changed``) until the postings are built."""
        with self._write_lock:
            reader = sqlite3.connect(self._file, check_same_thread=False, isolation_level=None)
            reader.execute("BEGIN")
            cursor = reader.execute("SELECT rowid, title, meta, body FROM chunks_fts")
            self._pending = []
            return reader, cursor

    def changed(self, changes: list[KeywordChange]) -> None:
        """Rows a committed write added and removed (called with the catalog's lock held)."""
        if not changes:
            return
        if self._pending is not None:
            self._pending.extend(changes)
        elif self.postings is not None:
            _apply(self.postings, changes)

    def load(self, wait: bool = False) -> None:
        """Build the in-memory copy, on a thread unless ``wait``; at most once."""
        with self._write_lock:
            if self._building is not None or self.postings is not None or self._closed:
                return
            self._building = threading.Thread(target=self._build, name="spellbook-keywords", daemon=True)
            self._building.start()
        if wait:
            self._building.join()

    def close(self) -> None:
        self._closed = True
        thread = self._building
        if thread is not None:
            thread.join()

    def _build(self) -> None:
        postings = None
        try:
            reader, cursor = self._snapshot()
            try:
                postings = Postings.build(cursor, stop=lambda: self._closed)
            finally:
                reader.close()
        except Exception:
            log.exception("could not build the in-memory keyword index; keyword search goes on with FTS5")
        with self._write_lock:
            pending, self._pending = self._pending or [], None
            if postings is not None and not self._closed:
                _apply(postings, pending)
                self.postings = postings
        trim_heap()  # the build's token lists and counts go back to the system (~30 MB at 10k chunks)

    def search(
        self,
        query: str,
        where: str,
        params: Sequence[Any],
        limit: int,
        prune: bool = False,
        allowed: frozenset[int] | None = None,
    ) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score; higher is better) for the best keyword matches among the chunks
        of the notes ``where`` selects (``allowed``: their row ids, when the caller has them from
        ``filtered_rowids``). In large indexes the commonest query tokens are left out
        (``over_budget``); ``prune`` (hybrid search, where vectors make up for it) leaves out more."""
        postings = self.postings
        if postings is None and self._building is None:
            self._load_for_search()
            postings = self.postings
        if postings is not None:
            tokens = query_tokens(query, self.over_budget(query, ARRAY_POSTINGS, postings))
            if not tokens or (allowed is not None and not allowed):
                return []
            ranked = self._search_arrays(postings, tokens, where, params, limit, allowed)
            if ranked is not None:
                return ranked
        expression = match_query(query, self.over_budget(query, HYBRID_POSTINGS if prune else KEYWORD_POSTINGS))
        if expression is None or (allowed is not None and not allowed):
            return []
        weights = ", ".join(str(w) for w in FTS_WEIGHTS)
        best_sql = (
            f"SELECT rowid, -bm25(chunks_fts, {weights}) FROM chunks_fts WHERE chunks_fts MATCH ? "
            f"ORDER BY bm25(chunks_fts, {weights}) LIMIT ?"
        )
        depth = max(limit * 4, 200) if allowed is not None else max(limit * 2, 100)
        with self._reader_lock:
            # The best matches from the FTS table alone first, then the filter on those: joining
            # every match to its note before ranking costs more than the ranking (60 -> 25 ms at 100k).
            if allowed is not None:  # the filter's chunks are known: look as deep as their share needs
                total = self._reader.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 1
                depth = min(MAX_KEYWORD_DEPTH, max(depth, int(depth * total / len(allowed))))
                best = self._reader.execute(best_sql, (expression, depth)).fetchall()
                kept = [(rowid, score) for rowid, score in best if rowid in allowed][:limit]
                if len(kept) >= limit or len(best) < depth:
                    return self._chunk_ids_of(kept)
            else:  # no filter but the hidden notes (archived, expired): twice the hits asked for
                best = self._reader.execute(best_sql, (expression, depth)).fetchall()
                if not best:
                    return []
                scores = dict(best)
                marks = ",".join("?" * len(best))
                passing = self._reader.execute(
                    f"SELECT c.rowid, c.chunk_id FROM chunks c CROSS JOIN notes ON notes.path = c.path "
                    f"WHERE c.rowid IN ({marks}) AND ({where})",
                    [*scores, *params],
                ).fetchall()
                if len(passing) >= limit or len(best) < depth:
                    ranked = sorted(((cid, scores[rowid]) for rowid, cid in passing), key=lambda kv: (-kv[1], kv[0]))
                    return ranked[:limit]
            # A narrow filter: too few of the best matches pass it; rank only what passes.
            sql = (
                f"SELECT c.chunk_id, -bm25(chunks_fts, {weights}) AS score FROM chunks_fts "
                "CROSS JOIN chunks c ON c.rowid = chunks_fts.rowid CROSS JOIN notes ON notes.path = c.path "
                f"WHERE chunks_fts MATCH ? AND ({where}) ORDER BY score DESC LIMIT ?"
            )
            return [(r[0], r[1]) for r in self._reader.execute(sql, [expression, *params, limit]).fetchall()]

    def _load_for_search(self) -> None:
        """The first search: build the in-memory copy before answering when the catalog is small
        (the same answers from the first search on), else on a thread (FTS5 answers meanwhile)."""
        with self._reader_lock:
            rows = self._reader.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 0
        self.load(wait=rows <= BUILD_WAITED_ROWS)

    def _search_arrays(
        self,
        postings: Postings,
        tokens: list[str],
        where: str,
        params: Sequence[Any],
        limit: int,
        allowed: frozenset[int] | None,
    ) -> list[tuple[str, float]] | None:
        """``search`` on the in-memory copy; None when a filter it cannot apply leaves too few of its
        best matches (FTS5 then ranks only what passes)."""
        if allowed is not None:  # the filter's rows are known: exact
            best = postings.top(tokens, limit, self._allowed_mask(allowed))
            with self._reader_lock:
                return self._chunk_ids_of(best)
        depth = max(limit * 2, 100)  # no filter but the hidden notes (archived, expired): twice the hits asked for
        best = postings.top(tokens, depth)
        if not best:
            return []
        scores = dict(best)
        marks = ",".join("?" * len(best))
        with self._reader_lock:
            passing = self._reader.execute(
                f"SELECT c.rowid, c.chunk_id FROM chunks c CROSS JOIN notes ON notes.path = c.path "
                f"WHERE c.rowid IN ({marks}) AND ({where})",
                [*scores, *params],
            ).fetchall()
        if len(passing) < limit and len(best) == depth:
            return None
        return sorted(((cid, scores[rowid]) for rowid, cid in passing), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def _allowed_mask(self, allowed: frozenset[int]) -> np.ndarray:
        """``allowed`` as a boolean mask by row, kept for the same set (a filter's rows are kept
        by the catalog until a write)."""
        kept, mask = self._mask
        if kept is not allowed or mask is None:
            rows = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
            mask = np.zeros(int(rows.max()) + 1 if len(rows) else 0, dtype=bool)
            mask[rows] = True
            self._mask = (allowed, mask)
        return mask

    def _chunk_ids_of(self, ranked: list[tuple[int, float]]) -> list[tuple[str, float]]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        ids = dict(
            self._reader.execute(
                f"SELECT rowid, chunk_id FROM chunks WHERE rowid IN ({marks})", [rowid for rowid, _ in ranked]
            ).fetchall()
        )
        return sorted(((ids[r], score) for r, score in ranked if r in ids), key=lambda kv: (-kv[1], kv[0]))

    def over_budget(self, query: str, budget: int, postings: Postings | None = None) -> set[str]:
        """The commonest query tokens, left out so that the rest match at most ``budget`` chunk
        entries in all: FTS5 scores every chunk that matches any token, so a long query of common
        words (or Korean syllables) costs ~100 ms at 100k chunks. Common tokens carry little BM25
        weight (low IDF): measured at 100k chunks, the top 10 stay 96% (hybrid budget) and 99%
        (keyword budget) the same as with every token (docs/search.md). The rarest token always stays."""
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t not in STOPWORDS]
        if postings is not None and postings.rows * len(tokens) <= budget:
            return set()  # every token in every chunk would fit
        with self._reader_lock:
            if (
                len(tokens) < 2
                or (self._reader.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 0) < COMMON_MIN_CHUNKS
            ):
                return set()
            found = {t: postings.chunk_count(t) for t in tokens} if postings is not None else self._chunk_counts(tokens)
        kept, total = 0, 0
        skip: set[str] = set()
        for token in sorted(tokens, key=lambda t: found.get(t, 0)):
            docs = found.get(token, 0)
            if kept and total + docs > budget:
                skip.add(token)
            else:
                kept += 1
                total += docs
        return skip

    def _chunk_counts(self, tokens: list[str]) -> dict[str, int]:
        """How many chunks each token is in, kept until the catalog's next write: FTS5 counts a
        token by reading its whole list of chunks (a tenth of a keyword search at 10k chunks)."""
        generation = self._generation()
        if generation != self._doc_counts_of or len(self._doc_counts) > DOC_COUNTS_KEPT:
            self._doc_counts.clear()
            self._doc_counts_of = generation
        missing = [t for t in tokens if t not in self._doc_counts]
        if missing:
            marks = ",".join("?" * len(missing))
            found = dict(
                self._reader.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", missing).fetchall()
            )
            self._doc_counts.update((t, found.get(t, 0)) for t in missing)
        return {t: self._doc_counts[t] for t in tokens}


def _apply(postings: Postings, changes: list[KeywordChange]) -> None:
    for row, columns in changes:
        if row < 0:
            postings.clear()
        elif columns is None:
            postings.remove(row)
        else:
            postings.add(row, *columns)
