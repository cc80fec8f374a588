"""The embedder base class: what every provider implements, with defaults for the rest.

An embedder's ``model_id`` is stored with the index: vectors from two models never mix, and a
different ``model_id`` makes the index rebuild itself. Heavy imports live inside each provider.
The names and how to build each are in ``registry.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class Embedder(ABC):
    """What the index needs from an embedding model; the defaults suit one that runs in process.

    A provider sets ``model_id`` and ``dimensions`` and implements the two ``embed_*`` methods;
    a network embedder (``remote.py``) also overrides ``health``, ``probe`` and ``close``.
    """

    model_id: str
    dimensions: int
    english_only: bool = False  # memorize ranks non-Latin queries by keywords; stats warns (docs/search.md)
    # Parts of a large batch (a first index, an import) the indexer may embed at once, each on its
    # own thread: a model that computes on one core with the GIL released says how many cores it
    # may use. 1 for a model that already spreads over the cores itself or runs elsewhere.
    parallel: int = 1
    # Whether a child process forked with this embedder loaded may embed (the parts of a large batch
    # then run in such processes: spellbook/embedders/lanes.py). Only for a model that computes in
    # process on state a fork copies whole; ``after_fork`` renews what the child cannot share.
    forks: bool = False

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    @abstractmethod
    def embed_query(self, text: str) -> list[float]: ...

    def warm_up(self) -> None:
        """Load the model now rather than on the first query (the hub calls it at start)."""

    def probe(self, text: str) -> list[float]:
        """A real embed for ``doctor`` (a network embedder ignores its breaker here)."""
        return self.embed_query(text)

    def health(self) -> dict[str, Any]:
        """For ``stats``: where the model runs and whether it answers."""
        return {"endpoint": "in process", "reachable": True}

    def after_fork(self) -> None:
        """In a forked child (``forks``): new locks for the ones another thread may have held at the
        fork, and the files it reads opened again (the child closes every inherited descriptor)."""

    def close(self) -> None:
        """Release connections or sessions (the engine calls it for an embedder it built)."""
