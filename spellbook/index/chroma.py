"""The vector index: one adapter over an embedded Chroma folder or a Chroma server.

Spellbook always passes vectors: the collection has no embedding function, so Chroma never tries
to download its default model. Records carry no documents; text lives in the catalog.

Writes can be left behind (``upsert(..., wait=False)``): a background thread writes them to Chroma
while every read of this class sees them already (read-your-writes). A crash before they are
written loses nothing: the catalog has the chunks and Chroma lacks their vectors, so the next
start finds them missing and embeds them again (``Indexer._drop_orphan_vectors``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from spellbook.crashpoints import crash_point
from spellbook.files import private_folder
from spellbook.index.chroma_clients import embedded_client, http_client
from spellbook.index.matrix import VectorMatrix
from spellbook.index.snapshot import SnapshotKeeper, VectorSnapshot
from spellbook.startup.heap import trim_heap

log = logging.getLogger(__name__)

COLLECTION = "spellbook"
MAX_BATCH = 5_000  # Chroma refuses more than 5,461 records per call
FLUSH_SECONDS = 10.0  # how long a count or a close waits for the writer (a Chroma server may be down)
LOAD_PAGE = 1_000  # vectors read from Chroma at a time when the matrix is loaded
EXACT_ROWS = 50_000  # up to this many vectors a query scores them all in the matrix (~2 ms per 10k)
QUERY_BEHIND = 256  # a query scores up to this many vectors left behind itself; above, it waits for them
QUIET_SECONDS = 0.05  # the writer waits for this long without a new vector...
QUIET_BULK_SECONDS = 0.6  # ...during a bulk job, whose batches come every ~0.5 s (``bulk``)...
LATEST_SECONDS = 1.0  # ...but not longer than this after the first one
MAX_BEHIND = 20_000  # vectors waiting for Chroma before a writer waits too (float32: ~42 MB at 512 dimensions)
REST_SECONDS = 20.0  # an embedded Chroma untouched this long is closed until it is needed again
SNAPSHOT_FILE = "vectors.snapshot"  # beside the embedded Chroma folder (index/snapshot.py)


class VectorIndex:
    """Chroma, with the matrix in front of it. An embedded Chroma holds its HNSW graph and every
    vector in memory once anything reads or writes them (~30 MB at 10k vectors of 512 dimensions),
    though queries up to ``EXACT_ROWS`` never need them: an embedded one is opened at the first call
    that does (a write, mostly), ``rest`` closes it when idle, which gives that memory back, and the
    next call opens it again (the first write after that loads the graph, ~50 ms at 10k)."""

    def __init__(
        self,
        client: Any,
        collection: str = COLLECTION,
        connect: Callable[[], Any] | None = None,
        snapshot: VectorSnapshot | None = None,
        collection_id: str | None = None,
    ) -> None:
        self._client: Any = client
        self._connect = connect  # makes a new client after a rest (None: never rests)
        self._name = collection
        self._keeper = SnapshotKeeper(snapshot)  # the vectors saved beside an embedded Chroma
        self._collection_id = collection_id or ""  # given: an existing embedded Chroma, opened on first use
        self._chroma_lock = threading.RLock()  # held through every Chroma call, so a rest never closes one under way
        self._last_used = time.monotonic()
        self._collection: Any = self._open() if client is not None else None
        self._new = client is None and collection_id is None  # no database yet: opened by the first write
        self._count: int | None = 0 if self._new else None
        self._matrix: VectorMatrix | None = VectorMatrix() if self._new else None  # else: on the first query
        self._matrix_lock = threading.Lock()
        self._behind: dict[str, np.ndarray] = {}  # chunk id -> float32 vector not in Chroma yet
        self._behind_changed = threading.Condition()  # guards _behind
        self._write_lock = threading.Lock()  # one Chroma write at a time: a delete never meets a write under way
        self._writer: threading.Thread | None = None
        self._closing = False
        self._hurry = False  # someone waits for the writer (flush)
        self._bulk = 0  # bulk jobs under way (``bulk``)

    @classmethod
    def embedded(cls, folder: Path) -> VectorIndex:
        """Chroma in ``folder`` (through its Rust bindings: ``startup/chroma_local.py``), opened when first needed."""
        private_folder(folder)  # vectors and documents of every note: owner only
        new = not (folder / "chroma.sqlite3").exists()
        snapshot = VectorSnapshot(folder.parent / SNAPSHOT_FILE, folder)
        known = None if new else snapshot.collection_id(COLLECTION)  # read without opening Chroma

        def connect() -> Any:
            return embedded_client(folder)

        return cls(None if new or known else connect(), connect=connect, snapshot=snapshot, collection_id=known)

    @classmethod
    def server(cls, url: str, collection: str) -> VectorIndex:
        """A Chroma server (``chroma run --host 127.0.0.1 --port 8000`` -> ``http://127.0.0.1:8000``)."""
        return cls(http_client(url), collection)

    def _open(self):
        collection = self._client.get_or_create_collection(
            self._name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        self._collection_id = str(collection.id)
        return collection

    @contextmanager
    def _chroma(self) -> Iterator[Any]:
        """The collection, opened again if it rested; no rest closes it until the block ends."""
        with self._chroma_lock:
            if self._collection is None:
                if self._connect is None:
                    raise RuntimeError("the vector index was closed")
                self._client = self._connect()
                self._collection = self._open()
            try:
                yield self._collection
            finally:
                self._last_used = time.monotonic()

    def rest(self, idle_seconds: float = REST_SECONDS) -> bool:
        """Close an embedded Chroma that nothing has used for ``idle_seconds`` and that has no
        vectors waiting (the owner's maintenance calls this); True if it closed it."""
        if self._connect is None or self._behind or self._collection is None:
            return False
        if time.monotonic() - self._last_used >= idle_seconds:
            self.keep_snapshot()  # before the Chroma lock: it takes the write lock, which comes first
        with self._chroma_lock:
            if self._collection is None or self._behind or time.monotonic() - self._last_used < idle_seconds:
                return False
            self._collection = None
            self._client.close()
        return True

    def rest_after_start(self) -> bool:
        """After the start-up scan has read the vectors into the matrix: when queries score the
        matrix (up to EXACT_ROWS), write what the scan left behind and ``rest`` at once, since
        nothing needs Chroma until the next write (its graph is ~35 MB at 10k vectors, otherwise
        held for REST_SECONDS more)."""
        with self._matrix_lock:
            small = self._matrix is not None and len(self._matrix) <= EXACT_ROWS
        return small and self.flush(FLUSH_SECONDS) == 0 and self.rest(0)

    def close(self) -> None:
        left = self.flush(FLUSH_SECONDS)
        with self._behind_changed:
            self._closing = True
            self._behind_changed.notify_all()
        if self._writer is not None:
            self._writer.join(FLUSH_SECONDS)  # not inside a write when the client goes
        if left:
            log.warning("%d vectors were not written to Chroma; the next start embeds them again", left)
        else:
            self.keep_snapshot()
        with self._chroma_lock:
            close = getattr(self._client, "close", None)
            if close is not None and self._collection is not None:
                close()  # releases Chroma's SQLite handles; the same folder can be reopened later
            self._collection = None
            self._connect = None  # closed for good: a late call fails instead of reopening

    def reset(self) -> None:
        """Drop every vector (for a rebuild)."""
        with self._keeper.changing():
            with self._write_lock:
                with self._behind_changed:
                    self._behind.clear()
                self._keeper.before_change()
                if self._new and self._client is None:  # a new index never opened: nothing in Chroma to drop
                    self._matrix_clear()
                    return
                with self._chroma():
                    with suppress(Exception):  # a missing collection is what we want anyway
                        self._client.delete_collection(self._name)
                    self._collection = self._open()
            self._count = None
            self._matrix_clear()

    def _matrix_clear(self) -> None:
        with self._matrix_lock:
            if self._matrix is not None:
                self._matrix.clear()

    def count(self) -> int:
        """Vectors in Chroma once the writer caught up: the matrix's count (loaded from the snapshot if
        need be) when none is behind: it holds what Chroma holds, and Chroma's count loads its graph."""
        self.flush(FLUSH_SECONDS)
        matrix = self._load_matrix(from_chroma=False)  # read from the snapshot if it is not yet
        if matrix is not None and not self.behind():
            return len(matrix)
        if self._count is None:
            with self._chroma() as collection:
                self._count = collection.count()
        return self._count

    def ids(self, stored: bool = False) -> set[str]:
        """Every vector's id: the matrix's when it is loaded (or loads at once from the snapshot)
        and nothing waits, since it then holds what Chroma holds; ``stored``: read from Chroma
        (``doctor`` checks what is stored)."""
        self.flush(FLUSH_SECONDS)
        matrix = None if stored else self._load_matrix(from_chroma=False)
        if matrix is not None and not self.behind():
            return matrix.ids()
        out: set[str] = set()
        offset = 0
        while True:
            with self._chroma() as collection:
                page = collection.get(include=[], limit=MAX_BATCH, offset=offset)
            out.update(page["ids"])
            if len(page["ids"]) < MAX_BATCH:
                return out
            offset += MAX_BATCH

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of ``ids``: those on their way to Chroma, then the matrix's (normalised,
        which cosine search does not tell apart), then Chroma's for the rest."""
        with self._behind_changed:
            out = {cid: self._behind[cid].tolist() for cid in ids if cid in self._behind}
        with self._matrix_lock:
            matrix = self._matrix
        if matrix is not None:
            out.update(matrix.get([cid for cid in ids if cid not in out]))
        ids = [cid for cid in ids if cid not in out]
        for start in range(0, len(ids), MAX_BATCH):
            with self._chroma() as collection:
                got = collection.get(ids=list(ids[start : start + MAX_BATCH]), include=["embeddings"])
            for chunk_id, vector in zip(got["ids"], got["embeddings"]):
                out[chunk_id] = list(vector)
        return out

    def size(self) -> int:
        """How many vectors there are, counting those still on their way to Chroma: the matrix's
        count once it is loaded (no wait for the writer, no call to Chroma), else ``count()``."""
        with self._matrix_lock:
            matrix = self._matrix
        return len(matrix) if matrix is not None else self.count()

    def sample(self, limit: int) -> list[list[float]]:
        """Up to ``limit`` stored vectors, for calibrating similarities (from the matrix once loaded)."""
        with self._matrix_lock:
            matrix = self._matrix
        if matrix is not None:
            return matrix.sample(limit)
        with self._chroma() as collection:
            got = collection.get(limit=limit, include=["embeddings"])
        return [list(v) for v in got["embeddings"]] if got["embeddings"] is not None else []

    def delete(self, ids: Sequence[str]) -> None:
        with self._keeper.changing():
            self._delete(ids)

    def _delete(self, ids: Sequence[str]) -> None:
        with self._write_lock:  # after the write under way, which may hold these ids
            with self._behind_changed:
                for chunk_id in ids:
                    self._behind.pop(chunk_id, None)
                self._behind_changed.notify_all()
            self._count = None
            self._keeper.before_change()
            for start in range(0, len(ids), MAX_BATCH):
                with self._chroma() as collection:
                    collection.delete(ids=list(ids[start : start + MAX_BATCH]))
        with self._matrix_lock:  # after a load in progress, so the matrix misses nothing
            if self._matrix is not None:
                self._matrix.remove(ids)

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], wait: bool = True) -> None:
        """Store these vectors. ``wait=False``: return at once and let the writer thread put them
        in Chroma (reads here see them meanwhile); a writer waits only while MAX_BEHIND are behind.
        Calls that put the same ids take turns (the indexer holds its lock): the later one wins.
        Chroma gets ids and vectors only: the catalog holds everything else, and Chroma holds the
        interpreter lock through a write, ~40% longer with a metadata row per record (measured:
        1,000 records of 512 dimensions 0.22-0.41 s without, 0.40-0.64 s with a path each)."""
        with self._keeper.changing():
            self._upsert(ids, vectors, wait)

    def _upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], wait: bool) -> None:
        if wait:
            with self._write_lock:
                with self._behind_changed:  # an older vector of these ids, left behind, must not land after this one
                    for chunk_id in ids:
                        self._behind.pop(chunk_id, None)
                    self._behind_changed.notify_all()
                self._write(list(ids), [list(v) for v in vectors])
        else:
            with self._behind_changed:
                self._behind_changed.wait_for(lambda: len(self._behind) < MAX_BEHIND or self._closing)
                for chunk_id, vector in zip(ids, vectors, strict=True):
                    self._behind[chunk_id] = np.array(vector, dtype=np.float32)  # 2 KB, not a 16 KB list
                self._start_writer()
                self._behind_changed.notify_all()
        with self._matrix_lock:
            if self._matrix is not None:
                self._matrix.put(ids, vectors)

    def _write(self, ids: list[str], vectors: list[Any]) -> None:
        self._keeper.before_change()
        for start in range(0, len(ids), MAX_BATCH):
            end = start + MAX_BATCH
            with self._chroma() as collection:
                collection.upsert(ids=ids[start:end], embeddings=vectors[start:end])
        self._count = None

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """A bulk job (an import, a first index) writing: the writer gathers its ~0.5 s batches for up to
        ``LATEST_SECONDS`` (Chroma costs ~10 ms of CPU and the GIL a call: a 1,000-note import made 11
        calls, now 4). ``Indexer.sync_batches`` ends it once its last batch is in; a flush never waits."""
        with self._behind_changed:
            self._bulk += 1
        try:
            yield
        finally:
            with self._behind_changed:
                self._bulk -= 1
                self._behind_changed.notify_all()  # the writer waits QUIET_SECONDS again

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every vector left behind is in Chroma; returns how many are still not."""
        with self._behind_changed:
            if self._behind:
                self._hurry = True  # the writer stops batching
                self._behind_changed.notify_all()
            self._behind_changed.wait_for(lambda: not self._behind or self._closing, timeout)
            return len(self._behind)

    def behind(self) -> int:
        """Vectors not yet written to Chroma (``stats``)."""
        with self._behind_changed:
            return len(self._behind)

    def _start_writer(self) -> None:
        if self._writer is None or not self._writer.is_alive():
            self._writer = threading.Thread(target=self._write_behind, name="spellbook-vectors", daemon=True)
            self._writer.start()

    def _write_behind(self) -> None:
        """The writer thread: Chroma gets what ``upsert(wait=False)`` left, a batch at a time."""
        pause = 0.0
        while True:
            with self._behind_changed:
                self._behind_changed.wait_for(lambda: self._behind or self._closing)
                if self._closing:
                    return
                # Batch what comes in quick succession, and stay off the CPU (and the GIL) while the
                # writes arrive: Chroma costs ~10 ms a call, per call more than per record.
                changed, first = self._behind_changed, time.monotonic()
                while (
                    not self._hurry
                    and changed.wait(QUIET_BULK_SECONDS if self._bulk else QUIET_SECONDS)
                    and not self._hurry
                    and not self._closing
                    and len(self._behind) < MAX_BATCH
                    and time.monotonic() - first < LATEST_SECONDS
                ):
                    pass
                self._hurry = False
            time.sleep(pause)
            with self._write_lock:
                with self._behind_changed:  # a delete may have taken some since
                    batch = dict(list(self._behind.items())[:MAX_BATCH])
                if not batch:
                    continue
                crash_point("vectors-behind")
                try:
                    self._write(list(batch), list(batch.values()))
                except Exception as exc:  # noqa: BLE001 - a server down: keep them, try again
                    pause = min(max(pause * 2, 0.5), 30.0)
                    log.warning(
                        "could not write %d vectors to Chroma (%s); trying again in %.1f s", len(batch), exc, pause
                    )
                    continue
                pause = 0.0
                with self._behind_changed:
                    for chunk_id, entry in batch.items():
                        if self._behind.get(chunk_id) is entry:  # not replaced meanwhile
                            del self._behind[chunk_id]
                    self._behind_changed.notify_all()

    def query(self, vector: Sequence[float], limit: int, ids: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) nearest first: an exact search over the in-memory matrix
        (restricted to ``ids``, a filter, or all rows up to EXACT_ROWS); above that, unrestricted
        queries go to Chroma's HNSW index, with the vectors it does not have yet scored here."""
        if limit <= 0:
            return []
        if ids is not None:
            return self.matrix().query(vector, limit, ids) if ids else []
        matrix = self.matrix()
        if len(matrix) <= EXACT_ROWS:  # exact, as fast as HNSW here, and Chroma never loads its graph
            return matrix.query_all(vector, limit)
        if self.behind() > QUERY_BEHIND:  # an import under way: let the writer catch up
            self.flush(FLUSH_SECONDS)
        with self._behind_changed:
            behind = dict(self._behind)
        with self._chroma() as collection:
            result = collection.query(
                query_embeddings=[list(vector)], n_results=limit + len(behind), include=["distances"]
            )
        found = [(cid, 1.0 - float(d)) for cid, d in zip(result["ids"][0], result["distances"][0]) if cid not in behind]
        if behind:  # not in Chroma yet (or an older vector is): score them here
            q = np.asarray(vector, dtype=np.float32)
            q /= max(float(np.linalg.norm(q)), 1e-12)
            m = np.asarray(list(behind.values()), dtype=np.float32)
            m /= np.clip(np.linalg.norm(m, axis=1, keepdims=True), 1e-12, None)
            found += zip(behind, (float(x) for x in m @ q))
            found.sort(key=lambda kv: -kv[1])
        return found[:limit]

    def matrix(self) -> VectorMatrix:
        """The in-memory copy of every vector, read once (from the snapshot when it is Chroma's
        now, else from Chroma), then kept in step by ``upsert``/``delete``/``reset``."""
        matrix = self._load_matrix(from_chroma=True)
        assert matrix is not None
        return matrix

    def _load_matrix(self, from_chroma: bool) -> VectorMatrix | None:
        if self._matrix is not None:  # loaded once for good: no wait for a Chroma write under way
            return self._matrix
        with self._matrix_lock, self._write_lock:  # no write lands between the read and the overlay
            if self._matrix is None:
                # One BLAS thread, as for the embedder (spellbook/embedders/use.py): a second one
                # spins against the other work of a 2-core machine (measured: 2,000 rows of 512
                # dimensions take 8 ms with 2 threads under load, 1.2 ms with one).
                from threadpoolctl import threadpool_limits

                threadpool_limits(1, user_api="blas")
                matrix = self._keeper.load(self._collection_id)
                if matrix is None:
                    if not from_chroma:
                        return None
                    matrix = self._chroma_matrix()
                with self._behind_changed:
                    behind = list(self._behind.items())
                if behind:
                    matrix.put([cid for cid, _ in behind], [v for _, v in behind])
                self._matrix = matrix
                trim_heap()
            return self._matrix

    def _chroma_matrix(self) -> VectorMatrix:
        matrix = VectorMatrix()
        with self._chroma() as collection:
            total, offset = collection.count(), 0
        while True:  # small pages: Chroma hands out float64, twice what is kept
            with self._chroma() as collection:
                page = collection.get(include=["embeddings"], limit=LOAD_PAGE, offset=offset)
            if page["ids"]:
                if not len(matrix):
                    matrix.reserve(VectorMatrix.room(total), len(page["embeddings"][0]))
                matrix.put(page["ids"], page["embeddings"])
            if len(page["ids"]) < LOAD_PAGE:
                return matrix
            offset += LOAD_PAGE

    def keep_snapshot(self) -> bool:
        """Save the matrix beside an embedded Chroma for the next start, if it is exactly Chroma
        (index/snapshot.py). True if a new file was saved."""
        with self._matrix_lock:
            matrix = self._matrix
        with self._write_lock:  # no Chroma write meanwhile
            return self._keeper.keep(self._collection_id, matrix, lambda: not self.behind())
