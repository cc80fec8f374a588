"""The embedder base class and the registry that builds one from Settings.

An embedder's ``model_id`` is stored with the index: vectors from two models never mix, and a
different ``model_id`` makes the index rebuild itself. Heavy imports live inside each provider.

``REGISTRY`` is the one list of embedder names: settings validation (``config.py``) and the
CLI's ``--embedder`` choices read it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spellbook.errors import EmbedderError

if TYPE_CHECKING:
    from spellbook.config import Settings


class Embedder(ABC):
    """What the index needs from an embedding model; the defaults suit one that runs in process.

    A provider sets ``model_id`` and ``dimensions`` and implements the two ``embed_*`` methods;
    a network embedder (``remote.py``) also overrides ``health``, ``probe`` and ``close``.
    """

    model_id: str
    dimensions: int
    english_only: bool = False  # memorize ranks non-Latin queries by keywords; stats warns (docs/search.md)

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

    def close(self) -> None:
        """Release connections or sessions (the engine calls it for an embedder it built)."""


def _use_m3(settings: Settings) -> Embedder:
    from spellbook.embedders.use import USEEmbedder

    return USEEmbedder()


def _minilm(settings: Settings) -> Embedder:
    from spellbook.embedders.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def _ollama(settings: Settings) -> Embedder:
    from spellbook.embedders.ollama import OllamaEmbedder

    return OllamaEmbedder(
        settings.ollama_url, settings.ollama_model, timeout=settings.ollama_timeout,
        batch_size=settings.ollama_batch_size, retries=settings.ollama_retries, cooldown=settings.embed_retry_seconds,
    )


def _openai(settings: Settings) -> Embedder:
    from spellbook.embedders.openai_compat import OpenAIEmbedder

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAIEmbedder(
        settings.openai_url, settings.openai_model, api_key=key, dimensions=settings.openai_dimensions,
        timeout=settings.openai_timeout, batch_size=settings.openai_batch_size, retries=settings.openai_retries,
        cooldown=settings.embed_retry_seconds,
    )


def _hashing(settings: Settings) -> Embedder:
    from spellbook.embedders.hashing import HashingEmbedder

    return HashingEmbedder()


# The embedder names, in the order the CLI lists them; the first is the default.
REGISTRY: dict[str, Callable[[Settings], Embedder]] = {
    "use-m3": _use_m3,
    "minilm": _minilm,
    "ollama": _ollama,
    "openai": _openai,
    "hashing": _hashing,
}


def check_embedder_name(name: str) -> str:
    """``name`` if the registry has it, else an error listing the names it has."""
    if name not in REGISTRY:
        raise EmbedderError(f"Unknown embedder {name!r}; choose one of {', '.join(REGISTRY)}.")
    return name


def load_embedder(settings: Settings) -> Embedder:
    return REGISTRY[check_embedder_name(settings.embedder)](settings)
