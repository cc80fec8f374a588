"""Keyword search over the catalog's FTS5 index (BM25), on its own SQLite connection so the vector
side of a hybrid search never waits behind it (``Catalog.keywords``); docs/search.md."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from spellbook.index.keyword import STOPWORDS, match_query, tokenize

FTS_WEIGHTS = (3.0, 2.0, 1.0)
HYBRID_POSTINGS = 20_000  # the commonest query tokens are left out past this many matches in all...
KEYWORD_POSTINGS = 40_000  # ...(keyword mode keeps more: no vectors make up for them)...
COMMON_MIN_CHUNKS = 2_000  # ...once the index is this large (docs/search.md)
MAX_KEYWORD_DEPTH = 10_000  # best matches looked through before a filter is applied in SQL instead
DOC_COUNTS_KEPT = 50_000  # tokens whose chunk counts are kept until the next write


class KeywordIndex:
    """BM25 ranking of chunks for a query, within the notes a filter selects."""

    def __init__(self, reader: sqlite3.Connection, lock: threading.Lock, generation: Callable[[], int]) -> None:
        self._reader = reader
        self._reader_lock = lock
        self._generation = generation  # the catalog's write count: the kept counts below go when it moves
        self._doc_counts: dict[str, int] = {}
        self._doc_counts_of = -1

    def search(
        self, query: str, where: str, params: Sequence[Any], limit: int, prune: bool = False,
        allowed: frozenset[int] | None = None,
    ) -> list[tuple[str, float]]:
        """(chunk_id, bm25 score; higher is better) for the best keyword matches among the chunks
        of the notes ``where`` selects (``allowed``: their row ids, when the caller has them from
        ``filtered_rowids``). In large indexes the commonest query tokens are left out
        (``over_budget``); ``prune`` (hybrid search, where vectors make up for it) leaves out more."""
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
                    f"WHERE c.rowid IN ({marks}) AND ({where})", [*scores, *params],
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

    def _chunk_ids_of(self, ranked: list[tuple[int, float]]) -> list[tuple[str, float]]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        ids = dict(self._reader.execute(f"SELECT rowid, chunk_id FROM chunks WHERE rowid IN ({marks})",
                                        [rowid for rowid, _ in ranked]).fetchall())
        return sorted(((ids[r], score) for r, score in ranked if r in ids), key=lambda kv: (-kv[1], kv[0]))

    def over_budget(self, query: str, budget: int) -> set[str]:
        """The commonest query tokens, left out so that the rest match at most ``budget`` chunk
        entries in all: FTS5 scores every chunk that matches any token, so a long query of common
        words (or Korean syllables) costs ~100 ms at 100k chunks. Common tokens carry little BM25
        weight (low IDF): measured at 100k chunks, the top 10 stay 96% (hybrid budget) and 99%
        (keyword budget) the same as with every token (docs/search.md). The rarest token always stays."""
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t not in STOPWORDS]
        with self._reader_lock:
            if len(tokens) < 2 or (self._reader.execute("SELECT max(rowid) FROM chunks").fetchone()[0] or 0) < COMMON_MIN_CHUNKS:
                return set()
            found = self._chunk_counts(tokens)
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
            found = dict(self._reader.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", missing).fetchall())
            self._doc_counts.update((t, found.get(t, 0)) for t in missing)
        return {t: self._doc_counts[t] for t in tokens}
