"""What the network embedders share: batching, retries with backoff, and a breaker.

    RemoteEmbedder
    ├── OllamaEmbedder   (ollama.py)         Ollama's /api/embed through the ``ollama`` client
    └── OpenAIEmbedder   (openai_compat.py)  POST {base}/embeddings of any OpenAI-compatible server

Texts go out ``batch_size`` at a time. A request that failed for a reason that may pass
(connection refused or reset, timeout, HTTP 5xx or 429) is tried again up to ``retries`` times,
after 0.25 s, 0.5 s, 1 s ... (or what a ``Retry-After`` header asks, at most 10 s). When the
retries run out, ``EmbedderUnavailableError`` says what to start or set, and the endpoint counts
as unreachable for ``cooldown`` seconds: calls in that time fail at once instead of waiting again
(searches fall back to keywords, writes are indexed without vectors, filled in later). After the
cooldown one attempt is made without retries; a success closes the breaker.

A request the endpoint refuses (401/403 wrong key, 404 unknown model, other 4xx) is never retried:
``EmbedderError`` says which setting to fix. Nothing at construction touches the network: a
server starts even when its embedder is down, and ``dimensions`` is known after the first answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from spellbook.embedders.base import Embedder
from spellbook.errors import EmbedderError, EmbedderUnavailableError

log = logging.getLogger(__name__)

BACKOFF_SECONDS = 0.25
MAX_WAIT_SECONDS = 10.0
TIMEOUT_SECONDS = 30.0  # to wait for one request
RETRIES = 3  # on connection errors, timeouts, 5xx and 429
RETRY_SECONDS = 30.0  # an endpoint that failed is skipped this long; the index owner retries missing vectors this often
_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
    "e5": ("passage: ", "query: "),  # multilingual-e5-*, e5-*
}


def task_prefixes(model: str) -> tuple[str, str]:
    """(document, query) prefixes the model family wants, whichever server hosts it:
    ``nomic-embed-text``, ``jeffh/intfloat-multilingual-e5-large:f16``... get theirs."""
    base = model.split(":")[0].split("/")[-1].lower()
    for name, prefixes in _PREFIXES.items():
        if name in base:
            return prefixes
    return ("", "")  # bge-m3, mxbai, all-minilm...: no prefixes


class Retryable(Exception):
    """A failed request worth trying again (internal to the embedders)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def describe_transport_error(exc: BaseException, timeout: float) -> str:
    """A short, secret-free reason for a connection-level failure."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError | ConnectionRefusedError) or type(exc) is ConnectionError:
        return "connection refused"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | ConnectionResetError):
        return "connection closed before the answer"
    return f"{type(exc).__name__}: {exc}"[:200]


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (only the delta-seconds form)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class RemoteEmbedder(Embedder):
    """Base of the network embedders; subclasses set the fields and implement ``_request``."""

    model_id: str
    url: str
    model: str
    _client: Any  # an httpx.Client, or ollama's Client over one

    def __init__(self, *, batch_size: int, retries: int, cooldown: float, prefixes: tuple[str, str] = ("", "")) -> None:
        self.batch_size = max(1, batch_size)
        self.retries = max(0, retries)
        self.cooldown = cooldown
        self._doc_prefix, self._query_prefix = prefixes
        self._dimensions: int | None = None
        self._state = threading.Lock()
        self._down_until = 0.0  # monotonic time until which calls fail at once
        self._half_open = False  # after a cooldown: one attempt, no retries
        self._last_error: str | None = None  # the full message, with what to do
        self._last_reason = ""  # why the endpoint did not answer, short
        self._last_success: float | None = None  # wall clock

    # --- provider-specific ---------------------------------------------------------------------
    def _request(self, texts: list[str]) -> list[list[float]]:
        """One HTTP round trip; raise ``Retryable`` or ``EmbedderError``."""
        raise NotImplementedError

    def _unreachable(self, reason: str) -> str:
        """The message for an endpoint that did not answer: what to start or set."""
        raise NotImplementedError

    # --- the Embedder protocol ------------------------------------------------------------------
    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = len(self.embed_query("dimension probe"))
        return self._dimensions

    def warm_up(self) -> None:
        """Ask the endpoint once, so the first search does not wait; never raises."""
        try:
            _ = self.dimensions
        except EmbedderError as exc:
            log.warning("%s Searches use the keyword index until it answers.", exc)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._call([self._doc_prefix + t for t in texts[start : start + self.batch_size]]))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._call([self._query_prefix + text])[0]

    def close(self) -> None:
        self._client.close()

    # --- health ---------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """For ``stats``: where, which model, and whether the last call worked."""
        return {
            "endpoint": self.url,
            "model": self.model,
            "dimensions": self._dimensions,
            "reachable": None if self._last_error is None and self._last_success is None else self._last_error is None,
            "last_error": self._last_error,
            "last_success": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self._last_success))
            if self._last_success
            else None,
        }

    def probe(self, text: str) -> list[float]:
        """A real embed that ignores the breaker (for ``doctor``)."""
        with self._state:
            self._down_until = 0.0
        return self._call([self._query_prefix + text])[0]

    # --- one batch, with retries ----------------------------------------------------------------
    def _call(self, texts: list[str]) -> list[list[float]]:
        with self._state:
            if time.monotonic() < self._down_until:
                raise EmbedderUnavailableError(self._unreachable(self._last_reason or "unreachable"))
            attempts = 1 if self._half_open else self.retries + 1
        reason = ""
        for attempt in range(attempts):
            try:
                vectors = self._request(texts)
            except Retryable as exc:
                reason = str(exc)
                if attempt + 1 < attempts:
                    wait = exc.retry_after if exc.retry_after is not None else BACKOFF_SECONDS * 2**attempt
                    log.debug("embedder: %s; retrying in %.2f s", reason, wait)
                    time.sleep(min(MAX_WAIT_SECONDS, wait))
                continue
            except EmbedderError as exc:  # refused: wrong key, unknown model... retrying will not help
                self._last_error = str(exc)
                raise
            self._check(vectors, len(texts))
            with self._state:
                if self._half_open:
                    log.info("embedder %s answers again", self.model_id)
                self._down_until, self._half_open = 0.0, False
                self._last_error, self._last_success = None, time.time()
            return vectors
        message = self._unreachable(reason)
        with self._state:
            self._down_until, self._half_open = time.monotonic() + self.cooldown, True
            self._last_error, self._last_reason = message, reason
        raise EmbedderUnavailableError(message)

    def _check(self, vectors: list[list[float]], expected: int) -> None:
        if len(vectors) != expected or not vectors or not all(vectors):
            raise EmbedderError(
                f"{self.url} answered {len(vectors)} vectors for {expected} texts; "
                "it does not behave like an embeddings endpoint. Check the URL and the model."
            )
        dims = len(vectors[0])
        if any(len(v) != dims for v in vectors):
            raise EmbedderError(
                f"{self.url} answered vectors of different lengths for {self.model!r}; check the model."
            )
        self._dimensions = dims
