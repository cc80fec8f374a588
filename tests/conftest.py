from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_documents(self, texts):
        self.embedded.extend(texts)
        return super().embed_documents(texts)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def settings(vault: Path) -> Settings:
    return Settings(vault=vault, embedder="hashing", watch=False)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def engine(settings: Settings, embedder: CountingEmbedder):
    engine = Engine(settings, embedder=embedder)
    engine.start()
    yield engine
    engine.close()


def open_engine(settings: Settings, embedder=None) -> Engine:
    engine = Engine(settings, embedder=embedder or HashingEmbedder())
    engine.start()
    return engine


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_")}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """Node 22 (``node``), ``conformance`` and ``claude``, installed if missing: tests/node_tools.py."""
    from .node_tools import node_bin as installed

    return installed()
