"""Vault paths a writer indexes itself, for the watcher to leave alone meanwhile.

An import writes a batch of files, then reads them back and indexes them while it writes the
next batch (``Indexer.sync_batches``): for the seconds between, the files are on disk and not in
the index. The watcher sees them written and, without a claim, would read and embed them a second
time, holding the indexer's lock while the model ran. A writer claims its paths before it writes
them and releases them once they are indexed (or it failed); the watcher keeps a claimed path's
event until then, and syncs it only if the file is not what the index holds (an edit made after
the writer read it, or a write the writer never indexed). The claim is a reference count: two
writers may claim one path; ``Claims.hold()`` is one writer's share, released whole at its end.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import PurePosixPath
from types import TracebackType
from typing import Self


def with_folders(paths: Iterable[str]) -> set[str]:
    """The vault paths and every folder above them: a writer that may create the folders claims
    them too (their creation is then no reason for the watcher to reconcile the whole vault)."""
    out: set[str] = set()
    for path in paths:
        out.add(path)
        out.update(str(folder) for folder in PurePosixPath(path).parents if str(folder) != ".")
    return out


class Claims:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: Counter[str] = Counter()

    def hold(self) -> Hold:
        return Hold(self)

    def claim(self, paths: Iterable[str]) -> None:
        with self._lock:
            self._count.update(paths)

    def release(self, paths: Iterable[str]) -> None:
        with self._lock:
            for path in paths:
                if self._count[path] <= 1:
                    self._count.pop(path, None)
                else:
                    self._count[path] -= 1

    def __contains__(self, path: object) -> bool:
        with self._lock:
            return path in self._count

    def __len__(self) -> int:
        with self._lock:
            return len(self._count)


class Hold:
    """One writer's claims: ``add`` before writing, ``release`` once indexed; leaving the ``with``
    block releases the rest (what failed, or was never indexed, goes back to the watcher)."""

    def __init__(self, claims: Claims) -> None:
        self._claims = claims
        self._held: Counter[str] = Counter()

    def add(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        self._claims.claim(paths)
        self._held.update(paths)

    def release(self, paths: Iterable[str]) -> None:
        mine = []
        for path in paths:
            if self._held[path] > 0:
                self._held[path] -= 1
                mine.append(path)
        self._claims.release(mine)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._claims.release(self._held.elements())
        self._held.clear()
