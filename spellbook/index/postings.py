"""BM25 over the keyword tokens of every chunk, held in memory as numpy arrays.

FTS5's own ``bm25()`` costs ~1.3 us for every chunk a query token is in: ~10 ms for a typical
query at 10,000 chunks, the longest part of a hybrid search. The same sums over arrays cost well
under a millisecond. FTS5 stays the table of record (the catalog writes it, and searches it until
these arrays are built); this is a copy of what it holds, scored with FTS5's formula and column
weights, so the two rank alike (docs/search.md)::

    score(row) = sum over query tokens t of
                 idf(t) * f(t, row) * (K1 + 1) / (f(t, row) + K1 * (1 - B + B * length(row) / mean length))
    idf(t)     = ln((rows - n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    f(t, row)  = 3 x its count in the title, 2 x in the metadata, 1 x in the body (capped at 255)

Layout: immutable segments, each a sorted array of token keys (a 64-bit hash of the token)
with, per key, the rows holding it and their weighted counts; plus a small tail of recent writes in
dicts, frozen into a segment every ``TAIL_ROWS`` rows. A row's live postings are in the one segment
``owner[row]`` names: a removed or rewritten row is dropped from the older segments by changing
that one entry, never by rewriting them. The two newest segments are merged on a background
thread when they are of a size and together hold at most ``SEGMENT_POSTINGS`` (sizes grow
geometrically up to that, so a posting is rewritten a few times; a merge's arrays stay a few MB:
merging everything into one segment took 60 MB more at its peak at 10k notes); the merged segment
takes over only the rows still owned by its parts, so removed rows go at the next merge (in a
segment of the largest size, they stay until the process ends: at most the size of the index
again).
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

from spellbook.startup.heap import trim_heap

log = logging.getLogger(__name__)

K1, B = 1.2, 0.75  # FTS5's bm25() constants
WEIGHTS = (3, 2, 1)  # title/heading, agent metadata, body: as the catalog's FTS_WEIGHTS
MAX_FREQ = 255  # a weighted count past this scores as this (BM25 has long saturated)
TAIL_ROWS = 128  # rows written since the last segment, kept in dicts (~30 KB a row)
BUILD_ROWS = 250  # rows counted at a time while building
MERGE_RATIO = 2  # merge the two newest segments when the newer holds at least 1/this of the older's postings...
SEGMENT_POSTINGS = 300_000  # ...and the merged one holds at most this many (a merge's memory stays small)


def term_key(token: str) -> int:
    """A token's key: Python's 64-bit hash of its UTF-8 bytes. Not of the string itself: CPython
    hashes a string's internal buffer, so 'on' (bytes 6f 6e) and '湯' (U+6E6F, stored as 6f 6e)
    hash alike. It differs between processes; the arrays live and die with theirs."""
    return hash(token.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, eq=False)
class _Segment:
    id: int
    keys: np.ndarray  # int64, sorted, unique
    starts: np.ndarray  # int64, len(keys) + 1: key i's postings are [starts[i], starts[i + 1])
    rows: np.ndarray  # int32
    freqs: np.ndarray  # uint8

    @classmethod
    def of(cls, id: int, keys: np.ndarray, rows: np.ndarray, freqs: np.ndarray) -> _Segment:
        """A segment from one (key, row, weighted count) triple per posting, in any order (a
        key's rows need no order: their scores are summed by row)."""
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        rows, freqs = rows[order], freqs[order]
        del order
        starts = np.flatnonzero(keys[1:] != keys[:-1]) + 1 if len(keys) else np.zeros(0, dtype=np.int64)
        starts = np.concatenate(([0], starts, [len(keys)])).astype(np.int64) if len(keys) else np.zeros(1, np.int64)
        return cls(id, keys[starts[:-1]], starts, rows, freqs)

    @property
    def size(self) -> int:
        return len(self.rows)

    def triples(self, live: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(key, row, count) of every posting whose row ``live`` marks, for a merge."""
        keys = np.repeat(self.keys, np.diff(self.starts))
        keep = live[self.rows]
        return keys[keep], self.rows[keep], self.freqs[keep]


class Postings:
    """The in-memory keyword index: ``add`` / ``remove`` rows as the catalog writes them, ``top``
    ranks rows for query tokens. Thread-safe; merges run on their own thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []
        self._tail: dict[int, dict[int, int]] = {}  # row -> {key: weighted count}
        self._tail_keys: dict[int, dict[int, int]] = {}  # key -> {row: weighted count}
        self._tail_id = 1
        self._next_id = 2
        self._owner = np.zeros(1024, dtype=np.int32)  # row -> id of the segment (or tail) with its postings; 0: none
        self._length = np.zeros(1024, dtype=np.float32)  # row -> tokens in its three columns
        self._rows = 0
        self._tokens = 0.0
        self._merging: threading.Thread | None = None

    # --- building and writing ------------------------------------------------------------------
    @classmethod
    def build(cls, rows: Iterable[tuple[int, str, str, str]], stop: Callable[[], bool] = lambda: False) -> Postings:
        """From (row, title, meta, body) of pre-tokenised text (tokens joined by spaces): a
        segment for every ``BUILD_ROWS`` rows, counted in numpy rather than token by token (~2x
        faster: the build shares the GIL with the searches it is for; small batches keep its
        token lists small), then merged on a thread. ``stop``: asked between batches; when it
        says so, what was read so far is returned."""
        out = cls()
        vocabulary: dict[str, int] = {}  # token -> its number here
        keys = array("q")  # number -> key
        batches = iter(rows)
        while not stop():
            batch = list(islice(batches, BUILD_ROWS))
            if not batch:
                break
            lengths: dict[int, int] = {}
            numbers, row_ids, freqs = _count(batch, vocabulary, keys, lengths)
            with out._lock:
                out._grow(max(lengths))
                rows_array = np.fromiter(lengths.keys(), dtype=np.int64, count=len(lengths))
                out._length[rows_array] = np.fromiter(lengths.values(), dtype=np.float32, count=len(lengths))
                out._rows += len(lengths)
                out._tokens += float(sum(lengths.values()))
                if len(numbers):
                    segment = _Segment.of(
                        out._next_id,
                        np.frombuffer(keys, dtype=np.int64)[numbers],
                        row_ids,
                        np.minimum(freqs, MAX_FREQ).astype(np.uint8),
                    )
                    out._next_id += 1
                    out._owner[segment.rows] = segment.id
                    out._segments.append(segment)
        with out._lock:
            out._merge_later()  # the batches' small segments into fewer
        return out

    def add(self, row: int, title: str, meta: str, body: str) -> None:
        """A row the catalog wrote (replacing whatever that row held)."""
        counts, length = _weighted_counts((title, meta, body))
        entry = {term_key(token): min(f, MAX_FREQ) for token, f in counts.items()}
        with self._lock:
            self._drop(row)
            self._grow(row)
            self._tail[row] = entry
            for key, f in entry.items():
                self._tail_keys.setdefault(key, {})[row] = f
            self._owner[row] = self._tail_id
            self._length[row] = length
            self._rows += 1
            self._tokens += length
            if len(self._tail) >= TAIL_ROWS:
                self._freeze()

    def remove(self, row: int) -> None:
        with self._lock:
            self._drop(row)

    def clear(self) -> None:
        with self._lock:
            self._segments, self._tail, self._tail_keys = [], {}, {}
            self._owner[:] = 0
            self._length[:] = 0
            self._rows, self._tokens = 0, 0.0

    def _drop(self, row: int) -> None:
        if row >= len(self._owner) or not self._owner[row]:
            return
        entry = self._tail.pop(row, None)
        for key in entry or ():
            holders = self._tail_keys[key]
            del holders[row]
            if not holders:
                del self._tail_keys[key]
        self._owner[row] = 0
        self._rows -= 1
        self._tokens -= float(self._length[row])

    def _grow(self, row: int) -> None:
        if row >= len(self._owner):
            size = max(row + 1, len(self._owner) + len(self._owner) // 4)
            self._owner = np.concatenate([self._owner, np.zeros(size - len(self._owner), dtype=np.int32)])
            self._length = np.concatenate([self._length, np.zeros(size - len(self._length), dtype=np.float32)])

    def _freeze(self) -> None:
        """The tail becomes a segment (the lock is held)."""
        keys, rows, freqs = array("q"), array("i"), array("B")
        for row, entry in self._tail.items():
            keys.extend(entry.keys())
            freqs.extend(entry.values())
            rows.extend([row] * len(entry))
        segment = _Segment.of(
            self._tail_id,
            np.frombuffer(keys, dtype=np.int64),
            np.frombuffer(rows, dtype=np.int32),
            np.frombuffer(freqs, dtype=np.uint8),
        )
        self._segments.append(segment)
        self._tail, self._tail_keys = {}, {}
        self._tail_id, self._next_id = self._next_id, self._next_id + 1
        self._merge_later()

    # --- merging -------------------------------------------------------------------------------
    def _merge_later(self) -> None:
        """Start merging two neighbouring segments of a size, the newest such pair first, when
        together they hold at most ``SEGMENT_POSTINGS`` (the lock is held)."""
        if self._merging is not None:
            return
        segments = self._segments
        for at in range(len(segments) - 2, -1, -1):
            older, newer = segments[at], segments[at + 1]
            if newer.size * MERGE_RATIO >= older.size and older.size + newer.size <= SEGMENT_POSTINGS:
                self._merging = threading.Thread(
                    target=self._merge, args=(older, newer), name="spellbook-postings", daemon=True
                )
                self._merging.start()
                return

    def _merge(self, older: _Segment, newer: _Segment) -> None:
        try:
            with self._lock:
                owner = self._owner.copy()
                merged_id = self._next_id
                self._next_id += 1
            parts = [segment.triples(owner == segment.id) for segment in (older, newer)]
            merged = _Segment.of(merged_id, *(np.concatenate(p) for p in zip(*parts)))
            with self._lock:
                if not any(s is older for s in self._segments):
                    return  # cleared meanwhile
                at = next(i for i, s in enumerate(self._segments) if s is older)
                self._segments[at : at + 2] = [merged]
                rows = merged.rows
                still = (self._owner[rows] == older.id) | (self._owner[rows] == newer.id)
                self._owner[rows[still]] = merged_id
        except Exception:
            log.exception("keyword index: merging two segments failed")
        finally:
            with self._lock:
                self._merging = None
                self._merge_later()
            trim_heap()  # the merge's sorting arrays

    def wait_merged(self, timeout: float = 30.0) -> None:
        """Wait for merges under way (tests, benchmarks)."""
        while True:
            with self._lock:
                thread = self._merging
            if thread is None:
                return
            thread.join(timeout)

    # --- ranking -------------------------------------------------------------------------------
    def top(self, tokens: Sequence[str], limit: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(row, BM25 score) of the ``limit`` best rows holding any of ``tokens``, best first;
        ``allowed``: a boolean mask by row of the rows that may be returned."""
        keys = [term_key(t) for t in dict.fromkeys(tokens)]
        if not keys or limit < 1:
            return []
        wanted = np.array(keys, dtype=np.int64)
        rows_parts: list[np.ndarray] = []
        freq_parts: list[np.ndarray] = []
        which_parts: list[np.ndarray] = []  # the index in ``keys`` of each posting
        with self._lock:
            if not self._rows:
                return []
            rows_total, mean_length = self._rows, self._tokens / self._rows
            for segment in self._segments:  # every posting of the wanted keys, in a few array operations
                at = np.minimum(np.searchsorted(segment.keys, wanted), len(segment.keys) - 1)
                hit = np.flatnonzero(segment.keys[at] == wanted)
                if not len(hit):
                    continue
                starts, ends = segment.starts[at[hit]], segment.starts[at[hit] + 1]
                sizes = ends - starts
                offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
                positions = offsets + np.arange(int(sizes.sum()))
                rows = segment.rows[positions]
                live = self._owner[rows] == segment.id
                rows_parts.append(rows[live])
                freq_parts.append(segment.freqs[positions][live])
                which_parts.append(np.repeat(hit, sizes)[live])
            for i, key in enumerate(keys):
                holders = self._tail_keys.get(key)
                if holders:
                    rows_parts.append(np.fromiter(holders.keys(), dtype=np.int32, count=len(holders)))
                    freq_parts.append(np.fromiter(holders.values(), dtype=np.uint8, count=len(holders)))
                    which_parts.append(np.full(len(holders), i, dtype=np.int64))
            if not rows_parts:
                return []
            rows = np.concatenate(rows_parts)
            lengths = self._length[rows].astype(np.float64)
        if not len(rows):
            return []
        which = np.concatenate(which_parts)
        freqs = np.concatenate(freq_parts).astype(np.float64)
        hits = np.bincount(which, minlength=len(keys))
        idf = np.maximum(np.log((rows_total - hits + 0.5) / (hits + 0.5)), 1e-6)
        contribution = idf[which] * freqs * (K1 + 1) / (freqs + K1 * (1 - B + B * lengths / mean_length))
        scores = np.bincount(rows, weights=contribution)
        if allowed is not None:
            scores[: len(allowed)][~allowed[: len(scores)]] = 0.0
            scores[len(allowed) :] = 0.0
        candidates = np.flatnonzero(scores)
        if len(candidates) > limit:
            candidates = candidates[np.argpartition(-scores[candidates], limit - 1)[:limit]]
        ranked = candidates[np.lexsort((candidates, -scores[candidates]))]
        return [(int(row), float(scores[row])) for row in ranked]

    @property
    def rows(self) -> int:
        return self._rows

    def chunk_count(self, token: str) -> int:
        """How many rows hold ``token``."""
        key = term_key(token)
        count = 0
        with self._lock:
            for segment in self._segments:
                j = int(np.searchsorted(segment.keys, key))
                if j < len(segment.keys) and segment.keys[j] == key:
                    rows = segment.rows[segment.starts[j] : segment.starts[j + 1]]
                    count += int(np.count_nonzero(self._owner[rows] == segment.id))
            count += len(self._tail_keys.get(key, ()))
        return count

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "rows": self._rows,
                "segments": len(self._segments),
                "tail": len(self._tail),
                "postings": sum(s.size for s in self._segments),
                "bytes": sum(s.keys.nbytes + s.starts.nbytes + s.rows.nbytes + s.freqs.nbytes for s in self._segments)
                + self._owner.nbytes
                + self._length.nbytes,
            }


def _count(
    batch: list[tuple[int, str, str, str]], vocabulary: dict[str, int], keys: array, lengths: dict[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token number, row, weighted count) of every (token, row) pair of ``batch``; new tokens are
    numbered in ``vocabulary`` (their keys appended to ``keys``), and each row's token count goes
    into ``lengths``."""
    tokens: list[str] = []
    spans, span_rows, span_weights = array("q"), array("i"), array("B")  # per (row, column)
    for row, *columns in batch:
        length = 0
        for weight, text in zip(WEIGHTS, columns):
            split = (text or "").split()
            tokens.extend(split)
            spans.append(len(split))
            span_rows.append(row)
            span_weights.append(weight)
            length += len(split)
        lengths[row] = length
    new = list(dict.fromkeys(tokens).keys() - vocabulary.keys())
    vocabulary.update(zip(new, range(len(vocabulary), len(vocabulary) + len(new))))
    keys.extend(map(term_key, new))
    numbers = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    counts = np.frombuffer(spans, dtype=np.int64)
    token_rows = np.repeat(np.frombuffer(span_rows, dtype=np.int32).astype(np.int64), counts)
    pairs, where = np.unique((token_rows << 32) | numbers, return_inverse=True)
    weights = np.bincount(where, weights=np.repeat(np.frombuffer(span_weights, dtype=np.uint8), counts))
    return pairs & 0xFFFFFFFF, (pairs >> 32).astype(np.int32), weights


def _weighted_counts(columns: Sequence[str]) -> tuple[Counter[str], int]:
    """(token -> weighted count, tokens in all columns) of a row's three pre-tokenised columns."""
    counts: Counter[str] = Counter()
    length = 0
    for weight, text in zip(WEIGHTS, columns):
        tokens = (text or "").split()
        length += len(tokens)
        if weight == 1:
            counts.update(tokens)
        else:
            for token, n in Counter(tokens).items():
                counts[token] += weight * n
    return counts, length
