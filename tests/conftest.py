"""Fixtures for every suite (unit, engine, e2e); shared helpers are in tests/helpers/."""

from __future__ import annotations

from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from tests.helpers.engine import CountingEmbedder


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


@pytest.fixture
def hub(settings: Settings):
    """A hub owning the index in this process, as a hook or the CLI opens it without a server."""
    from spellbook.server.hub import Hub

    hub = Hub(settings, watch=False, warm_up=False)
    hub.start(background=False)
    yield hub
    hub.close()


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """Node 22 (``node``), ``conformance`` and ``claude``, installed if missing: tests/helpers/node.py."""
    from tests.helpers.node import node_bin as installed

    return installed()
