"""Every stored vector in one float32 matrix, kept in step with the vector index: the exact search
behind filters, and behind every query up to ``EXACT_ROWS`` vectors (``index/chroma.py``)."""

from __future__ import annotations

import mmap
import sys
import threading
from collections.abc import Iterator, Sequence

import numpy as np

GATHER_SHARE = 0.25  # below this share of all rows, score only the rows asked for; above, score all
GROWS_IN_PLACE = sys.platform.startswith("linux")  # mremap: a private anonymous mapping grows without a copy


def zero_rows(rows: int, dimensions: int) -> np.ndarray:
    """A float32 array of ``rows`` zero rows. On Linux it is a private anonymous mapping of its
    own: a page takes memory once a row on it is written, and the matrix grows it in place
    (``VectorMatrix._resize``). A copy into a larger array would hold the old rows and the new
    ones at once: at 10k vectors of 512 dimensions the server's peak went 18 MB over its size."""
    size = rows * dimensions * 4
    if not GROWS_IN_PLACE or size == 0:
        return np.zeros((rows, dimensions), dtype=np.float32)
    return np.frombuffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE), dtype=np.float32).reshape(rows, dimensions)


def _mapping_of(data: np.ndarray) -> mmap.mmap | None:
    """The mapping ``zero_rows`` made for ``data``, if it made one."""
    base: object = data
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


class VectorMatrix:
    """Every stored vector, normalised, in one float32 matrix: the exact search behind filters.

    Chroma's HNSW answers unfiltered queries fast, but a ``where`` or ``ids`` restriction costs it
    ~100 ms at 100k records (../shared/RESEARCH.md). A matrix product over the allowed rows is
    exact and costs ~1 ms per 10k rows of 512 dimensions. Memory: 4 bytes x dimensions per chunk
    (200 MB at 100k chunks of 512 dimensions). Rows of deleted vectors are reused.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []
        self._data = np.zeros((0, 0), dtype=np.float32)
        self._version = 0  # bumped when rows are added or removed
        self._last: tuple[Sequence[str], int, np.ndarray] | None = None  # ids -> rows of the last query

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        if not ids:
            return
        block = np.asarray(vectors, dtype=np.float32)
        block /= np.clip(np.linalg.norm(block, axis=1, keepdims=True), 1e-12, None)
        with self._lock:
            if self._data.shape[1] != block.shape[1]:
                if self._rows:  # another model's vectors: the index is being rebuilt
                    self._clear()
                self._data = np.zeros((0, block.shape[1]), dtype=np.float32)
            for chunk_id, vector in zip(ids, block, strict=True):
                row = self._rows.get(chunk_id)
                if row is None:
                    self._version += 1
                    row = self._free.pop() if self._free else self._grow()
                    self._rows[chunk_id] = row
                    self._ids[row] = chunk_id
                self._data[row] = vector

    @staticmethod
    def room(rows: int) -> int:
        """Rows to allocate when ``rows`` vectors are loaded: room for an eighth more."""
        return rows + rows // 8 + 256

    @classmethod
    def of_rows(cls, ids: list[str], rows: np.ndarray) -> VectorMatrix:
        """A matrix over ``rows`` as they are (normalised, as ``blocks`` gave them): the first
        ``len(ids)`` are the vectors of ``ids``, the others zeros to grow into."""
        matrix = cls()
        matrix._data = rows if rows.dtype == np.float32 else rows.astype(np.float32)
        matrix._ids = list(ids)
        matrix._rows = {chunk_id: row for row, chunk_id in enumerate(ids)}
        return matrix

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._rows)

    def shape(self) -> tuple[int, int]:
        """(vectors, dimensions)."""
        with self._lock:
            return len(self._rows), self._data.shape[1]

    def blocks(self, size: int = 1024) -> Iterator[tuple[list[str], np.ndarray]]:
        """Every vector as (ids, rows) ``size`` rows at a time, in row order, each block copied
        under the lock (a writer meanwhile may change rows between blocks: callers check)."""
        start = 0
        while True:
            with self._lock:
                end = min(start + size, len(self._ids))
                if start >= end:
                    return
                used = [row for row in range(start, end) if self._ids[row] is not None]
                block = ([self._ids[row] for row in used], self._data[used])  # type: ignore[misc]
            yield block  # type: ignore[misc]
            start = end

    def remove(self, ids: Sequence[str]) -> None:
        with self._lock:
            for chunk_id in ids:
                row = self._rows.pop(chunk_id, None)
                if row is not None:
                    self._version += 1
                    self._ids[row] = None
                    self._data[row] = 0.0
                    self._free.append(row)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._version += 1
        self._rows.clear()
        self._ids = []
        self._free = []
        self._data = np.zeros((0, self._data.shape[1]), dtype=np.float32)

    def reserve(self, rows: int, dimensions: int) -> None:
        """Room for ``rows`` vectors in one allocation (a load, instead of growing as it goes)."""
        with self._lock:
            if self._data.shape[1] != dimensions:
                self._data = np.zeros((0, dimensions), dtype=np.float32)
            if rows > len(self._data):
                self._resize(rows)

    def _grow(self) -> int:
        used = len(self._ids)
        if used == len(self._data):
            self._resize(max(1024, used + used // 8))  # not x2: 2 KB a row
        self._ids.append(None)
        return used

    def _resize(self, rows: int) -> None:
        """``rows`` rows, the new ones zeros: the mapping grown in place where it can be (no other
        array may look into it then: every reader copies what it takes under the lock), else the
        used rows copied into a new array. The caller holds the lock."""
        dimensions, used = self._data.shape[1], len(self._ids)
        mapping = _mapping_of(self._data)
        if mapping is not None:
            self._data = np.zeros((0, dimensions), dtype=np.float32)  # lets go of the mapping's buffer
            try:
                mapping.resize(rows * dimensions * 4)
            except (BufferError, OSError, SystemError, ValueError):
                pass  # a view still open somewhere, or no mremap: copied below
            size = len(mapping) // (dimensions * 4)
            old = np.frombuffer(mapping, dtype=np.float32).reshape(size, dimensions)
            if size == rows:
                self._data = old
                return
        else:
            old = self._data
        bigger = zero_rows(rows, dimensions)
        bigger[:used] = old[:used]
        self._data = bigger

    def _rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Matrix rows of ``ids``; remembered for the same ids object (the catalog hands out one
        tuple per filter until the next write) while no row is added or removed."""
        last = self._last
        if last is not None and last[0] is ids and last[1] == self._version:
            return last[2]
        rows = np.fromiter((r for r in map(self._rows.get, ids) if r is not None), dtype=np.int64)
        self._last = (ids, self._version, rows)
        return rows

    def get(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The (normalised) vectors of those ``ids`` the matrix has."""
        with self._lock:
            return {cid: self._data[row].tolist() for cid in ids if (row := self._rows.get(cid)) is not None}

    def sample(self, limit: int) -> list[list[float]]:
        """Up to ``limit`` vectors, in row order (normalised)."""
        with self._lock:
            rows = [row for row, chunk_id in enumerate(self._ids) if chunk_id is not None][:limit]
            return self._data[rows].tolist()

    def query_all(self, vector: Sequence[float], limit: int) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) of the ``limit`` best of all rows, best first."""
        q = np.asarray(vector, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        with self._lock:
            n = len(self._ids)
            if not self._rows or limit <= 0:
                return []
            scores = self._data[:n] @ q
            k = min(n, limit + len(self._free))  # free rows are zeros: room to skip them
            best = np.argpartition(-scores, k - 1)[:k] if n > k else np.arange(n)
            best = best[np.argsort(-scores[best], kind="stable")]
            found = [(self._ids[i], float(scores[i])) for i in best if self._ids[i] is not None]
        return found[:limit]  # type: ignore[return-value]

    def query(self, vector: Sequence[float], limit: int, ids: Sequence[str]) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) of the ``limit`` best among ``ids``, best first."""
        q = np.asarray(vector, dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        with self._lock:
            rows = self._rows_of(ids)
            if not len(rows) or limit <= 0:
                return []
            if len(rows) < GATHER_SHARE * len(self._ids):
                scores = self._data[rows] @ q
            else:
                scores = (self._data[: len(self._ids)] @ q)[rows]
            if len(rows) > limit:
                best = np.argpartition(-scores, limit - 1)[:limit]
            else:
                best = np.arange(len(rows))
            best = best[np.argsort(-scores[best], kind="stable")]
            return [(self._ids[rows[i]], float(scores[i])) for i in best]
