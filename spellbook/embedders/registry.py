"""The one registry of embedder names: settings check a name against it, the CLI lists it, and
``load_embedder`` builds the one a ``Settings`` names. Each provider is imported only when chosen."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from spellbook.defaults import DEFAULT_EMBEDDER
from spellbook.embedders.base import Embedder
from spellbook.errors import EmbedderError

if TYPE_CHECKING:
    from spellbook.config import Settings


def _use_m3(settings: Settings) -> Embedder:
    from spellbook.embedders.use import USEEmbedder

    return USEEmbedder(cache_dir=settings.cache_dir.expanduser())


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
    DEFAULT_EMBEDDER: _use_m3,  # "use-m3"
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
