"""The vectors of an embedded Chroma saved beside it, so that a start reads them in one go.

A restarted owner reads every vector back from Chroma into the matrix (``index/matrix.py``) before
its first query can be answered: ~45 ms per 1,000 vectors here, 1.6 s at 35k. The same vectors as
one file of float32 rows take ~1 ms per 1,000. The file is derived, like the rest of the index, and
trusted only while it describes Chroma exactly:

- it is written when nothing is waiting to be written to Chroma and no write runs (when the owner
  closes, and when an idle Chroma rests), and not renamed into place if a vector changed meanwhile;
- it carries a stamp of the Chroma it was taken from: the collection's id (new after a rebuild or
  a deleted index folder) and the last sequence number of Chroma's write log (``embeddings_queue``
  in ``chroma.sqlite3``, read-only), which every write moves on; a start loads it only when the
  stamp is Chroma's now;
- the first change to Chroma in every process deletes it before the change (``VectorIndex``), so
  a crash afterwards leaves no file, whatever the stamp says.

Anything else (no file, a damaged one, another format, a Chroma whose log cannot be read) means the
vectors are read from Chroma, as before.

The file: one line ``spellbook-vectors 1``, one line of JSON (stamp, count, dimensions), ``count``
rows of little-endian float32, then their ids, one per line.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np

from spellbook.files import atomic_output, fsync_dir
from spellbook.index.matrix import VectorMatrix, zero_rows

log = logging.getLogger(__name__)

MAGIC = b"spellbook-vectors 1\n"
ROW_TYPE = np.dtype("<f4")


class _NotSaved(Exception):
    """A save given blocks that do not add up, or overtaken by a change to the vectors."""


class VectorSnapshot:
    def __init__(self, file: Path, chroma_folder: Path) -> None:
        self.file = file
        self._chroma_db = chroma_folder / "chroma.sqlite3"

    def collection_id(self, name: str) -> str | None:
        """The id of Chroma's collection ``name``, read from its database without opening Chroma (so a
        start that finds the snapshot good need not load Chroma at all); None: unknown."""
        try:
            with closing(sqlite3.connect(f"file:{quote(str(self._chroma_db))}?mode=ro", uri=True, timeout=2)) as db:
                rows = db.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchall()
        except sqlite3.Error as exc:
            log.debug("no collection id from Chroma's database: %s", exc)
            return None
        return str(rows[0][0]) if len(rows) == 1 else None

    def stamp(self, collection_id: str) -> str | None:
        """Chroma's state now: the collection's id and the head of its write log (None: unknown)."""
        try:
            with closing(sqlite3.connect(f"file:{quote(str(self._chroma_db))}?mode=ro", uri=True, timeout=2)) as db:
                (head,) = db.execute("SELECT MAX(seq_id) FROM embeddings_queue").fetchone()
        except sqlite3.Error as exc:
            log.debug("no stamp for the vector snapshot: %s", exc)
            return None
        return None if head is None else f"{collection_id}/{head}"

    def load(self, stamp: str, room: Callable[[int], int] = lambda count: count) -> tuple[list[str], np.ndarray] | None:
        """The ids and rows saved under ``stamp``, or None (no file, another stamp, damaged). The
        rows come in an array of ``room(count)`` rows (the rest zeros), read into it in place."""
        try:
            with open(self.file, "rb") as f:
                if f.readline() != MAGIC:
                    return None
                head = json.loads(f.readline())
                if head.get("stamp") != stamp:
                    return None
                count, dimensions = int(head["count"]), int(head["dimensions"])
                row_bytes = count * dimensions * ROW_TYPE.itemsize
                if min(count, dimensions) < 0 or f.tell() + row_bytes > os.fstat(f.fileno()).st_size:
                    return None  # a head that does not fit the file: never allocate what it claims
                shape = (max(count, room(count)), dimensions)
                rows = (
                    zero_rows(*shape) if ROW_TYPE == np.float32 else np.zeros(shape, dtype=ROW_TYPE)
                )  # can grow in place
                if f.readinto(memoryview(rows[:count]).cast("B")) != row_bytes:
                    return None
                ids = f.read().decode("utf-8").split("\n")[:-1]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring the vector snapshot %s (%s); reading the vectors from Chroma", self.file, exc)
            return None
        if len(ids) != count or len(set(ids)) != count:
            log.warning("ignoring the vector snapshot %s (its ids do not match its rows)", self.file)
            return None
        return ids, rows

    def keep(self, collection_id: str, matrix: VectorMatrix, still: Callable[[], bool]) -> bool:
        """Save ``matrix`` under Chroma's stamp now (see ``save``)."""
        stamp = self.stamp(collection_id)
        return stamp is not None and self.save(stamp, *matrix.shape(), matrix.blocks(), still)

    def save(
        self,
        stamp: str,
        count: int,
        dimensions: int,
        blocks: Iterable[tuple[list[str], np.ndarray]],
        still: Callable[[], bool],
    ) -> bool:
        """Write ``count`` rows, given in blocks, under ``stamp``; the file takes its place only if
        ``still()`` answers True once it is written (no vector changed meanwhile)."""
        for left in self.file.parent.glob(f".{self.file.name}.*.tmp"):  # a save cut short (kill -9)
            left.unlink(missing_ok=True)
        try:
            with atomic_output(self.file) as out:
                ids: list[str] = []
                head = {"stamp": stamp, "count": count, "dimensions": dimensions}
                out.write(MAGIC + json.dumps(head).encode() + b"\n")
                for block_ids, rows in blocks:
                    if rows.shape != (len(block_ids), dimensions):
                        raise _NotSaved
                    out.write(np.ascontiguousarray(rows, dtype=ROW_TYPE).data)  # no copy of a float32 block
                    ids += block_ids
                if len(ids) != count or any("\n" in i for i in ids):
                    raise _NotSaved
                out.write("".join(f"{i}\n" for i in ids).encode("utf-8"))
                out.flush()
                os.fsync(out.fileno())  # on disk before asking, so ``still`` is asked last (the rename is next)
                if not still():
                    raise _NotSaved
            return True
        except _NotSaved:
            return False
        except OSError as exc:
            log.warning("could not save the vector snapshot %s: %s", self.file, exc)
            return False

    def discard(self) -> None:
        """Delete the file (before a change to Chroma), and make the deletion stick."""
        try:
            self.file.unlink()
        except FileNotFoundError:
            return
        fsync_dir(self.file.parent)


class SnapshotKeeper:
    """The rules around a ``VectorSnapshot`` for the vector index: every put or removal runs inside
    ``changing``, and calls ``before_change`` before it changes Chroma (under the index's write
    lock); ``keep`` runs under that lock too."""

    def __init__(self, snapshot: VectorSnapshot | None) -> None:
        self.snapshot = snapshot
        self.current: bool | None = None  # the file is Chroma now (None: not known)
        self._lock = threading.Lock()
        self._changes = 0  # puts and removals done...
        self._under_way = 0  # ...and under way: a file is kept only if neither moved while it was written

    @contextmanager
    def changing(self) -> Iterator[None]:
        with self._lock:
            self._under_way += 1
        try:
            yield
        finally:
            with self._lock:
                self._under_way -= 1
                self._changes += 1

    def before_change(self) -> None:
        if self.snapshot is not None and self.current is not False:
            self.snapshot.discard()
            self.current = False

    def load(self, collection_id: str) -> VectorMatrix | None:
        """The matrix from the file, if it is Chroma's now."""
        if self.snapshot is None or self.current is False:
            return None
        stamp = self.snapshot.stamp(collection_id)
        loaded = self.snapshot.load(stamp, VectorMatrix.room) if stamp else None
        if loaded is None:
            return None
        self.current = True
        return VectorMatrix.of_rows(*loaded)

    def keep(self, collection_id: str, matrix: VectorMatrix | None, quiet: Callable[[], bool]) -> bool:
        """Save ``matrix`` when no file describes Chroma now, no put or removal is under way, and
        ``quiet()`` (nothing waits to be written): then the matrix is exactly Chroma."""
        if self.snapshot is None or self.current is True or matrix is None:
            return False
        with self._lock:
            if self._under_way:
                return False
            mark = self._changes
        if not quiet():
            return False

        def still() -> bool:
            with self._lock:
                return self._changes == mark and not self._under_way

        if not self.snapshot.keep(collection_id, matrix, still):
            return False
        self.current = True
        return True
