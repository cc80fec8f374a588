"""Any OpenAI-compatible embeddings endpoint: ``POST {base}/embeddings`` through httpx.

OpenAI itself, Azure-style gateways, LiteLLM, vLLM, LM Studio, llama.cpp's server, TEI, Infinity...
The API key is sent as ``Authorization: Bearer`` and nowhere else: it is never logged, and never
part of an error message or of ``stats``. Batching, retries and the breaker are in ``remote.py``.
"""

from __future__ import annotations

from typing import Any

from spellbook.embedders.remote import (
    RETRIES,
    RETRY_SECONDS,
    TIMEOUT_SECONDS,
    RemoteEmbedder,
    Retryable,
    describe_transport_error,
    retry_after,
    task_prefixes,
)
from spellbook.errors import EmbedderError, EmbedderInputError


class OpenAIEmbedder(RemoteEmbedder):
    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = TIMEOUT_SECONDS,
        batch_size: int = 128,
        retries: int = RETRIES,
        cooldown: float = RETRY_SECONDS,
    ) -> None:
        import httpx

        # nomic / e5 models served over this API want their task prefixes too
        super().__init__(batch_size=batch_size, retries=retries, cooldown=cooldown, prefixes=task_prefixes(model))
        self.url = url.rstrip("/")
        self.model = model
        self.requested_dimensions = dimensions
        self.model_id = f"openai/{model}" + (f"@{dimensions}" if dimensions else "")
        self.timeout = timeout
        self._has_key = bool(api_key)
        self._scrub = (api_key,) if api_key else ()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.url + "/", headers=headers, timeout=timeout)

    def __repr__(self) -> str:  # no key in it
        return f"OpenAIEmbedder(url={self.url!r}, model={self.model!r})"

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx

        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.requested_dimensions:
            payload["dimensions"] = self.requested_dimensions
        try:
            response = self._client.post("embeddings", json=payload)
        except httpx.TransportError as exc:
            raise Retryable(describe_transport_error(exc, self.timeout)) from exc
        code = response.status_code
        if code == 429 or code >= 500:
            raise Retryable(f"HTTP {code}: {self._message(response)}", retry_after(response.headers.get("retry-after")))
        if code in (401, 403):
            hint = "a valid key for it" if self._has_key else "the key (it is not set)"
            raise EmbedderError(
                f"The embeddings endpoint {self.url} rejected the API key (HTTP {code}: {self._message(response)}). "
                f"Set SPELLBOOK_OPENAI_API_KEY to {hint}."
            )
        if code == 404:
            raise EmbedderError(
                f"{self.url}/embeddings answered 404 for model {self.model!r} "
                f"({self._message(response)}): the model is "
                "unknown or the URL is wrong. Set SPELLBOOK_OPENAI_MODEL to an embedding model the server offers, "
                "and SPELLBOOK_OPENAI_URL to its base URL (usually ending in /v1)."
            )
        if code in (400, 413, 422):
            raise EmbedderInputError(
                f"The embeddings endpoint {self.url} refused the input for {self.model!r} (HTTP {code}: "
                f"{self._message(response)}). If every request fails, check SPELLBOOK_OPENAI_MODEL and "
                "SPELLBOOK_OPENAI_DIMENSIONS; if only some texts do, they may be too long for the model."
            )
        if code >= 400:
            raise EmbedderError(
                f"The embeddings endpoint {self.url} refused the request for {self.model!r} (HTTP {code}: "
                f"{self._message(response)}). Check SPELLBOOK_OPENAI_MODEL and SPELLBOOK_OPENAI_DIMENSIONS."
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item.get("index", 0))
            return [list(map(float, item["embedding"])) for item in data]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbedderError(
                f"{self.url}/embeddings did not answer like an OpenAI embeddings endpoint (HTTP {code}). "
                "Check SPELLBOOK_OPENAI_URL: it is the base URL, usually ending in /v1."
            ) from None

    def _message(self, response: Any) -> str:
        text = _message(response)
        for secret in self._scrub:  # a server that echoes the key back does not get it into a log
            text = text.replace(secret, "[REDACTED]")
        return text

    def _unreachable(self, reason: str) -> str:
        return (
            f"The embeddings endpoint {self.url} is unreachable ({reason}). Start the server or check "
            "SPELLBOOK_OPENAI_URL, or set SPELLBOOK_EMBEDDER=use-m3 to embed "
            "offline (that rebuilds the index)."
        )


def _message(response: Any) -> str:
    """The error message of an OpenAI-style error body, short."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200] or response.reason_phrase
    error = body.get("error", body.get("detail", body)) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message", error)
    return str(error)[:200]
