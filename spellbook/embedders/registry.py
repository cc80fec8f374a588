"""The registry of embedders: the CLI lists it, and ``load_embedder`` builds the one a ``Settings``
names (settings check the name against ``config.EMBEDDERS``, which must match it). Each provider
is imported only when chosen."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from spellbook.config import EMBEDDERS
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
    from spellbook.embedders import ollama, remote

    return ollama.OllamaEmbedder(
        settings.ollama_url,
        settings.ollama_model,
        timeout=remote.TIMEOUT_SECONDS,
        batch_size=ollama.BATCH_SIZE,
        retries=remote.RETRIES,
        cooldown=remote.RETRY_SECONDS,
    )


def _openai(settings: Settings) -> Embedder:
    from spellbook.embedders import openai_compat, remote

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return openai_compat.OpenAIEmbedder(
        settings.openai_url,
        settings.openai_model,
        api_key=key,
        dimensions=settings.openai_dimensions,
        timeout=remote.TIMEOUT_SECONDS,
        batch_size=settings.openai_batch_size,
        retries=remote.RETRIES,
        cooldown=remote.RETRY_SECONDS,
    )


def _hashing(settings: Settings) -> Embedder:
    from spellbook.embedders.hashing import HashingEmbedder

    return HashingEmbedder()


# The embedder names, in the order the CLI lists them (config.EMBEDDERS, which settings check a name against).
REGISTRY: dict[str, Callable[[Settings], Embedder]] = {
    DEFAULT_EMBEDDER: _use_m3,  # "use-m3"
    "minilm": _minilm,
    "ollama": _ollama,
    "openai": _openai,
    "hashing": _hashing,
}
assert tuple(REGISTRY) == EMBEDDERS, "config.EMBEDDERS names the embedders this registry builds"


def check_embedder_name(name: str) -> str:
    """``name`` if the registry has it, else an error listing the names it has."""
    if name not in REGISTRY:
        raise EmbedderError(f"Unknown embedder {name!r}; choose one of {', '.join(REGISTRY)}.")
    return name


def load_embedder(settings: Settings) -> Embedder:
    return REGISTRY[check_embedder_name(settings.embedder)](settings)
