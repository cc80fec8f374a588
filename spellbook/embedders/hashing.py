"""A deterministic hashing embedder: words and character trigrams hashed into a fixed vector.

No model, instant, and stable across runs: for tests of plumbing, not for search quality.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from spellbook.embedders.base import Embedder

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(Embedder):
    model_id = "hashing-v1"
    forks = True  # no state: a forked child embeds the same

    def __init__(self, dimensions: int = 256, parallel: int | None = None) -> None:
        self.dimensions = dimensions
        if parallel is not None:  # tests of large batches (the class's 1 otherwise)
            self.parallel = parallel

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self.dimensions
        words = _WORD.findall(text.lower())
        features = words + [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimensions
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        if not any(vec):
            vec[0] = 1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)
