"""Embedding the chunks of a batch for the indexer.

A large batch is cut into as many parts of about equal length as the embedder may run at once
(``parallel``) and embedded on that many threads: the default model leaves the GIL for most of its
work, so two parts take about the time of one on a 2-core machine. ``embed`` answers now (the
calling thread embeds one part); ``start`` leaves every part to the workers and answers later, so
the indexer reads and writes other batches meanwhile (``Indexer.sync_batches``). ``ahead`` starts
the texts a tool's write is about to ask for (``Indexer.expect``), so the model works while the file
is written, synced and read back; ``embed`` takes those vectors when it gets there.

During a bulk job (``bulk``: a first index, an import, filling in missing vectors) the parts go to
child processes where the embedder allows it (``spellbook/embedders/lanes.py``): there the model
does not wait for the GIL that the indexer's and the importer's own Python work holds.

A text the endpoint refuses does not hold back the others: the batch is tried again text by text,
and only when the first few are all refused too does the endpoint count as refusing everything (a
wrong model, unsupported dimensions), with no text blamed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from spellbook.embedders.lanes import LaneError, Lanes, can_fork
from spellbook.errors import EmbedderError, EmbedderInputError, IndexUnavailableError

PROCESSES = True  # a first index, an import or a catch-up embeds in child processes forked with the model (lanes.py)
PART_MIN = 16  # texts in each part of a batch embedded on several threads
REFUSED_IN_A_ROW = 3  # texts refused one by one before the endpoint counts as refusing everything
AHEAD_KEPT = 64  # texts embedded ahead of a write, kept until it asks for them (older ones are dropped)

Vectors = list[list[float] | EmbedderError]  # a vector per text, or the error that kept it from one


class BatchEmbedder:
    def __init__(self, embedder: Any, processes: bool | None = None) -> None:
        self.embedder = embedder
        processes = PROCESSES if processes is None else processes
        self.parallel = max(1, getattr(embedder, "parallel", 1))
        # Child processes only pay where parts run at once, for a model that says a fork is safe.
        self.processes = processes and self.parallel > 1 and getattr(embedder, "forks", False) and can_fork()
        self._workers: ThreadPoolExecutor | None = None
        self._ahead_worker: ThreadPoolExecutor | None = None  # its own thread: never queued behind a bulk job
        self._ahead: OrderedDict[str, tuple[Future[Vectors], int]] = OrderedDict()  # text -> (its part, place)
        self._lanes: Lanes | None = None
        self._bulk = 0  # bulk jobs under way
        self._closed = False  # no child process is forked once closing began
        self._lock = threading.Lock()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """A large job: while one runs, parts go to child processes (forked at the first part,
        closed when the last job ends)."""
        with self._lock:
            self._bulk += 1
        try:
            yield
        finally:
            with self._lock:
                self._bulk -= 1
                lanes = self._lanes if self._bulk == 0 else None
                if lanes is not None:
                    self._lanes = None
            if lanes is not None:
                lanes.close()

    def lane_pids(self) -> list[int]:
        """The child processes embedding now (tests, stats)."""
        with self._lock:
            lanes = self._lanes
        return lanes.pids() if lanes is not None else []

    def ahead(self, texts: Sequence[str]) -> None:
        """Start embedding ``texts`` that a write is about to ask ``embed`` for."""
        texts = list(dict.fromkeys(texts))
        if not texts:
            return
        with self._lock:
            if self._closed:
                return
            if self._ahead_worker is None:
                self._ahead_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spellbook-ahead")
            future = self._ahead_worker.submit(self._embed_part, texts)
            for place, text in enumerate(texts):
                self._ahead[text] = (future, place)
                self._ahead.move_to_end(text)
            while len(self._ahead) > AHEAD_KEPT:
                self._ahead.popitem(last=False)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The vectors now: those started ``ahead`` from their part, the rest here."""
        with self._lock:
            taken = {i: self._ahead.pop(text) for i, text in enumerate(texts) if text in self._ahead}
        if not taken:
            return self._embed_now(texts)
        rest = [i for i in range(len(texts)) if i not in taken]
        out: Vectors = [None] * len(texts)  # type: ignore[list-item]  # every place is filled below
        for i, vector in zip(rest, self._embed_now([texts[i] for i in rest]) if rest else []):
            out[i] = vector
        for i, (future, place) in taken.items():
            out[i] = _answer(future)[place]
        return out

    def on_demand(self, texts: Sequence[str]) -> Callable[[], Vectors]:
        """``embed`` at the first call of the answer, in the caller's thread (or from the parts
        started ``ahead``): the caller writes what needs no vector first. Later calls answer the same."""
        kept: list[Vectors] = []

        def answer() -> Vectors:
            if not kept:
                kept.append(self.embed(texts))
            return kept[0]

        return answer

    def _embed_now(self, texts: Sequence[str]) -> Vectors:
        """This thread embeds the first part, the workers the others."""
        parts = split(texts, self.parallel)
        if len(parts) == 1:
            return self._embed_part(parts[0])
        others = [self._pool().submit(self._embed_part, part) for part in parts[1:]]
        out = self._embed_part(parts[0])
        for future in others:
            out += future.result()
        return out

    def start(self, texts: Sequence[str]) -> Callable[[], Vectors]:
        """Every part started on the workers; call the answer to wait for the vectors. During a
        bulk job a small part goes to the child processes too, once they are forked (the last of a
        batch cut by characters, a batch whose other texts reuse vectors): embedded here, it waited
        for the GIL the importer held while a child sat idle (a 1,000-note import: 0.3 s)."""
        futures: list[Future[Vectors]] = [
            self._pool().submit(self._embed_part, part, True) for part in split(texts, self.parallel)
        ]

        def wait() -> Vectors:
            return [vector for future in futures for vector in _answer(future)]

        return wait

    def close(self) -> None:
        """Stop the workers; parts not started yet are dropped (nothing waits for them any more).
        The child processes exit once the parts under way have their answers."""
        with self._lock:
            workers, self._workers = self._workers, None
            ahead, self._ahead_worker = self._ahead_worker, None
            lanes, self._lanes = self._lanes, None
            self._closed = True
            self._ahead.clear()
        for pool in (workers, ahead):
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        if lanes is not None:
            lanes.close()

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="spellbook-embed")
            return self._workers

    def _embed_part(self, texts: Sequence[str], whole: bool = False) -> Vectors:
        """``whole``: a part of a batch ``start`` cut, which goes to the child processes however
        small once they are forked (``_lanes_for``)."""
        try:
            return self._vectors(texts, whole)
        except EmbedderInputError as exc:
            if len(texts) == 1:
                return [exc]
        except EmbedderError as exc:
            return [exc] * len(texts)
        out: Vectors = []
        for text in texts:
            (one,) = self._embed_part([text], whole)
            out.append(one)
            if len(out) == REFUSED_IN_A_ROW and all(isinstance(v, EmbedderInputError) for v in out):
                return [EmbedderError(str(one))] * len(texts)
        return out

    def _vectors(self, texts: Sequence[str], whole: bool) -> list[list[float]]:
        lanes = self._lanes_for(texts, whole)
        if lanes is not None:
            try:
                return lanes.embed(texts)
            except LaneError:
                pass  # embedded here instead (Lanes logs why, once)
        return [list(v) for v in self.embedder.embed_documents(list(texts))]

    def _lanes_for(self, texts: Sequence[str], whole: bool) -> Lanes | None:
        """The child processes for these texts during a bulk job: a part of ``PART_MIN`` texts or
        more forks them; a smaller part of a batch (``whole``) uses them once forked; a few texts
        of a tool's write stay here, not queued behind a bulk part."""
        small = len(texts) < PART_MIN
        if not self.processes or (small and not whole):
            return None
        with self._lock:
            if not self._bulk or self._closed:
                return None
            if self._lanes is None:
                if small:  # a job this small is not worth a fork
                    return None
                self._lanes = Lanes(self.embedder, self.parallel)
            return self._lanes


def _answer(future: Future[Vectors]) -> Vectors:
    try:
        return future.result()
    except CancelledError:  # close() dropped it
        raise IndexUnavailableError(
            "The index is closing (the server is shutting down); retry after it restarts."
        ) from None


def split(texts: Sequence[str], parallel: int) -> list[Sequence[str]]:
    """``texts`` cut in order into up to ``parallel`` runs of about equal characters, none under
    about ``PART_MIN`` texts."""
    count = max(1, min(parallel, len(texts) // PART_MIN))
    if count == 1:
        return [texts]
    total = sum(map(len, texts)) or 1
    parts: list[list[str]] = [[]]
    done = 0
    for text in texts:
        if done >= total * len(parts) / count and len(parts) < count and len(parts[-1]) >= PART_MIN:
            parts.append([])
        parts[-1].append(text)
        done += len(text)
    return parts
