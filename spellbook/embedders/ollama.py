"""Ollama's /api/embed through the official ``ollama`` client. Needs a running Ollama server.

Models that want task prefixes get them (nomic-embed-text: ``search_document:`` /
``search_query:``; e5 family: ``passage:`` / ``query:``). Batching, retries and the breaker
are in ``remote.py``.
"""

from __future__ import annotations

from spellbook.embedders.remote import (
    RETRIES,
    RETRY_SECONDS,
    TIMEOUT_SECONDS,
    RemoteEmbedder,
    Retryable,
    describe_transport_error,
    task_prefixes,
)
from spellbook.errors import EmbedderError, EmbedderInputError

BATCH_SIZE = 64  # texts per request


class OllamaEmbedder(RemoteEmbedder):
    def __init__(
        self,
        url: str,
        model: str,
        timeout: float = TIMEOUT_SECONDS,
        batch_size: int = BATCH_SIZE,
        retries: int = RETRIES,
        cooldown: float = RETRY_SECONDS,
    ) -> None:
        import ollama

        super().__init__(batch_size=batch_size, retries=retries, cooldown=cooldown, prefixes=task_prefixes(model))
        self.url = url
        self.model = model
        self.model_id = f"ollama/{model}"
        self.timeout = timeout
        self._client = ollama.Client(host=url, timeout=timeout)

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx
        import ollama

        try:
            response = self._client.embed(model=self.model, input=texts)
        except ollama.ResponseError as exc:
            code = exc.status_code
            if code == 429 or code >= 500:
                raise Retryable(f"HTTP {code}: {exc.error}") from exc
            if code == 404:
                raise EmbedderError(
                    f"Ollama at {self.url} has no model {self.model!r} ({exc.error}). Run `ollama pull {self.model}`, "
                    "or set SPELLBOOK_OLLAMA_MODEL to an embedding model it has (`ollama list`)."
                ) from exc
            error = EmbedderInputError if code in (400, 413, 422) else EmbedderError
            raise error(
                f"Ollama at {self.url} refused to embed with {self.model!r} (HTTP {code}: {exc.error}). Check that "
                "SPELLBOOK_OLLAMA_MODEL names an embedding model, or set SPELLBOOK_EMBEDDER=use-m3 (offline)."
            ) from exc
        except (ConnectionError, httpx.TransportError) as exc:  # refused, reset, timed out
            raise Retryable(describe_transport_error(exc, self.timeout)) from exc
        return [list(v) for v in response.embeddings]

    def _unreachable(self, reason: str) -> str:
        return (
            f"Ollama at {self.url} is unreachable ({reason}). Start Ollama (`ollama serve`, then "
            f"`ollama pull {self.model}`) and check SPELLBOOK_OLLAMA_URL, or set SPELLBOOK_EMBEDDER=use-m3 to embed "
            "offline (that rebuilds the index)."
        )
