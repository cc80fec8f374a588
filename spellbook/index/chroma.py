"""The vector index: one adapter over any chromadb ``ClientAPI`` (embedded folder or server).

Spellbook always passes vectors: the collection has no embedding function, so Chroma never tries
to download its default model. Records carry no documents; text lives in the catalog.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spellbook.vault.store import private_folder

log = logging.getLogger(__name__)

COLLECTION = "spellbook"
MAX_BATCH = 5_000  # Chroma refuses more than 5,461 records per call
GATHER_SHARE = 0.25  # below this share of all rows, score only the rows asked for; above, score all


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

    def _grow(self) -> int:
        used = len(self._ids)
        if used == len(self._data):
            bigger = np.zeros((max(1024, used * 2), self._data.shape[1]), dtype=np.float32)
            bigger[:used] = self._data[:used]
            self._data = bigger
        self._ids.append(None)
        return used

    def _rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Matrix rows of ``ids``; remembered for the same ids object (the catalog hands out one
        tuple per filter until the next write) while no row is added or removed."""
        last = self._last
        if last is not None and last[0] is ids and last[1] == self._version:
            return last[2]
        rows = np.fromiter((r for r in map(self._rows.get, ids) if r is not None), dtype=np.int64)
        self._last = (ids, self._version, rows)
        return rows

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


class VectorIndex:
    def __init__(self, client: Any, collection: str = COLLECTION) -> None:
        self._client = client
        self._name = collection
        self._collection = self._open()
        self._count: int | None = None
        self._matrix: VectorMatrix | None = None  # loaded on the first filtered query
        self._matrix_lock = threading.Lock()

    @classmethod
    def embedded(cls, folder: Path) -> VectorIndex:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        private_folder(folder)  # vectors and documents of every note: owner only
        client = chromadb.PersistentClient(
            path=str(folder), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=True)
        )
        return cls(client)

    @classmethod
    def server(cls, url: str, collection: str) -> VectorIndex:
        """A Chroma server (``chroma run --host 127.0.0.1 --port 8000`` -> ``http://127.0.0.1:8000``)."""
        from urllib.parse import urlparse

        import chromadb
        from chromadb.config import Settings as ChromaSettings

        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"chroma_url must look like http://127.0.0.1:8000, not {url!r}")
        client = chromadb.HttpClient(
            host=parsed.hostname, port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https", settings=ChromaSettings(anonymized_telemetry=False),
        )
        client.heartbeat()  # fail now, with the URL in the message, rather than on the first query
        return cls(client, collection)

    def _open(self):
        return self._client.get_or_create_collection(
            self._name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if close is not None:
            close()  # releases Chroma's SQLite handles; the same folder can be reopened later

    def reset(self) -> None:
        """Drop every vector (for a rebuild)."""
        try:
            self._client.delete_collection(self._name)
        except Exception:  # noqa: BLE001 - a missing collection is what we want anyway
            pass
        self._collection = self._open()
        self._count = None
        with self._matrix_lock:
            if self._matrix is not None:
                self._matrix.clear()

    def count(self) -> int:
        if self._count is None:
            self._count = self._collection.count()
        return self._count

    def ids(self) -> set[str]:
        out: set[str] = set()
        offset = 0
        while True:
            page = self._collection.get(include=[], limit=MAX_BATCH, offset=offset)
            out.update(page["ids"])
            if len(page["ids"]) < MAX_BATCH:
                return out
            offset += MAX_BATCH

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for start in range(0, len(ids), MAX_BATCH):
            got = self._collection.get(ids=list(ids[start : start + MAX_BATCH]), include=["embeddings"])
            for chunk_id, vector in zip(got["ids"], got["embeddings"]):
                out[chunk_id] = list(vector)
        return out

    def sample(self, limit: int) -> list[list[float]]:
        """Up to ``limit`` stored vectors (in storage order), for calibrating similarities."""
        got = self._collection.get(limit=limit, include=["embeddings"])
        return [list(v) for v in got["embeddings"]] if got["embeddings"] is not None else []

    def delete(self, ids: Sequence[str]) -> None:
        self._count = None
        for start in range(0, len(ids), MAX_BATCH):
            self._collection.delete(ids=list(ids[start : start + MAX_BATCH]))
        with self._matrix_lock:  # after a load in progress, so the matrix misses nothing
            if self._matrix is not None:
                self._matrix.remove(ids)

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[dict]) -> None:
        for start in range(0, len(ids), MAX_BATCH):
            end = start + MAX_BATCH
            self._collection.upsert(
                ids=list(ids[start:end]), embeddings=[list(v) for v in vectors[start:end]],
                metadatas=list(metadatas[start:end]),
            )
        self._count = None
        with self._matrix_lock:
            if self._matrix is not None:
                self._matrix.put(ids, vectors)

    def query(self, vector: Sequence[float], limit: int, ids: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) nearest first. Unrestricted: Chroma's HNSW index.
        Restricted to ``ids`` (a filter): an exact search over those rows of the in-memory matrix."""
        if limit <= 0:
            return []
        if ids is not None:
            return self.matrix().query(vector, limit, ids) if ids else []
        result = self._collection.query(query_embeddings=[list(vector)], n_results=limit, include=["distances"])
        return [(cid, 1.0 - float(dist)) for cid, dist in zip(result["ids"][0], result["distances"][0])]

    def matrix(self) -> VectorMatrix:
        """The in-memory copy of every vector, read from Chroma once, then kept in step by
        ``upsert``/``delete``/``reset``."""
        with self._matrix_lock:
            if self._matrix is None:
                # One BLAS thread, as for the embedder (spellbook/embedders/use.py): a second one
                # spins against the other work of a 2-core machine (measured: 2,000 rows of 512
                # dimensions take 8 ms with 2 threads under load, 1.2 ms with one).
                from threadpoolctl import threadpool_limits

                threadpool_limits(1, user_api="blas")
                matrix = VectorMatrix()
                offset = 0
                while True:
                    page = self._collection.get(include=["embeddings"], limit=MAX_BATCH, offset=offset)
                    if page["ids"]:
                        matrix.put(page["ids"], page["embeddings"])
                    if len(page["ids"]) < MAX_BATCH:
                        break
                    offset += MAX_BATCH
                self._matrix = matrix
            return self._matrix
