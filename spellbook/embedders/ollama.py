"""Ollama's /api/embed through the official ``ollama`` client. Needs a running Ollama server.

Models that want task prefixes get them (nomic-embed-text: ``search_document:`` /
``search_query:``; e5 family: ``passage:`` / ``query:``).
"""

from __future__ import annotations

from collections.abc import Sequence

from spellbook.errors import EmbedderError

_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
    "e5": ("passage: ", "query: "),  # multilingual-e5-*, e5-*
}
_BATCH = 64


def _prefixes(model: str) -> tuple[str, str]:
    """Task prefixes by model family: ``nomic-embed-text``, ``jeffh/intfloat-multilingual-e5-large:f16``..."""
    base = model.split(":")[0].split("/")[-1].lower()
    for name, prefixes in _PREFIXES.items():
        if name in base:
            return prefixes
    return ("", "")  # bge-m3, mxbai, all-minilm...: no prefixes


class OllamaEmbedder:
    def __init__(self, url: str, model: str, timeout: float = 30.0) -> None:
        import ollama

        self.url = url
        self.model = model
        self.model_id = f"ollama/{model}"
        self._client = ollama.Client(host=url, timeout=timeout)
        self._doc_prefix, self._query_prefix = _prefixes(model)
        self._dimensions: int | None = None

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = len(self.embed_query("dimension probe"))
        return self._dimensions

    def warm_up(self) -> None:
        _ = self.dimensions

    def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            response = self._client.embed(model=self.model, input=texts)
        except Exception as exc:  # connection refused, timeout, model missing
            raise EmbedderError(
                f"Ollama at {self.url} could not embed with {self.model!r}: {exc}. "
                f"Start Ollama and run `ollama pull {self.model}`, or set SPELLBOOK_EMBEDDER=use-m3."
            ) from exc
        return [list(v) for v in response.embeddings]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            out.extend(self._embed([self._doc_prefix + t for t in texts[start : start + _BATCH]]))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._embed([self._query_prefix + text])[0]
