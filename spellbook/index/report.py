"""What a sync did (``SyncReport``: counts, the files it could not index and why, the embedder's
last error), and a batch on its way through one (``StagedBatch``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spellbook.index.analysis import Prepared
    from spellbook.index.embedding import Vectors


@dataclass
class SyncReport:
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    embedded_chunks: int = 0
    reused_chunks: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    vectors_missing: int = 0  # chunks indexed for keyword search only: the embedder failed
    embedder_error: str | None = None

    def add(self, other: SyncReport) -> None:
        for name in ("indexed", "unchanged", "removed", "skipped", "embedded_chunks", "reused_chunks",
                     "vectors_missing"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)
        self.embedder_error = other.embedder_error or self.embedder_error


@dataclass
class StagedBatch:
    """A batch read and analysed, its vectors reused or being embedded (``Indexer._stage``)."""

    size: int  # paths in the batch
    report: SyncReport
    prepared: list[Prepared]
    gone: list[str]
    chunks: list[tuple[Any, str]]  # (IndexedChunk, the text embedded for it)
    vectors: dict[str, list[float]]  # chunk id -> the vector it reuses
    to_embed: list[tuple[str, str]]  # (chunk id, text) for the model
    embedded: Callable[[], Vectors] | None = None  # waits for the vectors of ``to_embed``
