"""The embedder protocol and the registry that builds one from Settings.

An embedder's ``model_id`` is stored with the index: vectors from two models never mix, and a
different ``model_id`` makes the index rebuild itself. Heavy imports live inside each provider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from spellbook.errors import EmbedderError

if TYPE_CHECKING:
    from spellbook.config import Settings


class Embedder(Protocol):
    model_id: str
    dimensions: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


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


REGISTRY: dict[str, Callable[[Settings], Embedder]] = {
    "use-m3": _use_m3,
    "minilm": _minilm,
    "ollama": _ollama,
    "openai": _openai,
    "hashing": _hashing,
}


def load_embedder(settings: Settings) -> Embedder:
    try:
        factory = REGISTRY[settings.embedder]
    except KeyError:
        raise EmbedderError(
            f"Unknown embedder {settings.embedder!r}; choose one of {', '.join(REGISTRY)}."
        ) from None
    return factory(settings)
