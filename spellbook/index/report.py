"""What a sync did (``SyncReport``: counts, the files it could not index and why, the embedder's
last error)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
        for name in (
            "indexed",
            "unchanged",
            "removed",
            "skipped",
            "embedded_chunks",
            "reused_chunks",
            "vectors_missing",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)
        self.embedder_error = other.embedder_error or self.embedder_error
