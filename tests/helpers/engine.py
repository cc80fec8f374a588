"""An engine on a temporary vault, and an embedder that counts what it was asked to embed."""

from __future__ import annotations

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_documents(self, texts):
        self.embedded.extend(texts)
        return super().embed_documents(texts)


def open_engine(settings: Settings, embedder=None) -> Engine:
    engine = Engine(settings, embedder=embedder or HashingEmbedder())
    engine.start()
    return engine
