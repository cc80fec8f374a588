"""Embedding in child processes forked from the server ("lanes"), for the large batches of a first
index or an import.

The default model is numpy: it leaves the GIL for each matrix product and takes it back between
them, so every Python thread beside it (the importer writing files, the indexer reading and
analysing them, Chroma's writer, the watcher) costs it more than that thread's own CPU: a thread
that holds the GIL makes the model's threads wait up to the switch interval after each product.
Measured here over MCP, a 1,000-note import: while the importer wrote files the model's two
threads ran at 0.4 of a core each, and at 0.9 once it had finished. A child process has an
interpreter lock of its own, so the model there waits for nobody; the two cores are shared by the
scheduler instead (the same import 68% -> 77% of the model alone).

A lane is forked once the model is loaded: the child has the model's weights copy-on-write (no
second load, little memory of its own), closes every file it inherited (the owner lock, the MCP
pipes, SQLite and Chroma files: it must not keep any of them open), and serves embedding requests
on a socket pair until the parent closes it or dies (it reads end-of-file then and exits). It runs
only the embedder: the embedder's ``after_fork`` makes new locks and reopens its own files. Forking
a process that runs threads is only safe where the child touches nothing another thread may hold;
hence Linux only, the embedder's opt-in (``Embedder.forks``), and a deadline on every answer after
which the lane is killed and the texts are embedded in process.

Lanes live for one bulk job (``BatchEmbedder.bulk``): forked at its first large part, closed at its
end. A lane that fails (killed, out of memory, too slow) is closed and every later part of the job
is embedded in process, as before there were lanes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import logging
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

try:
    import fcntl  # imported here, not in the child: an import there could wait on a lock another thread held
except ImportError:  # Windows: no fork, no lanes
    fcntl = None  # type: ignore[assignment]

import numpy as np

from spellbook.errors import EmbedderError, EmbedderInputError

log = logging.getLogger(__name__)

DEADLINE_SECONDS = 60.0  # an answer may take this long, plus PER_TEXT_SECONDS a text
PER_TEXT_SECONDS = 1.0
CLOSE_SECONDS = 2.0  # a closed lane's child has this long to exit before it is killed
_HEADER = struct.Struct("!II")  # the JSON part's length, then the bytes'
_PR_SET_NAME = 15


class LaneError(Exception):
    """A lane could not answer (its child died, timed out, or could not be forked); the caller
    embeds the texts in process instead."""


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class Lanes:
    """Up to ``count`` child processes, each embedding one request at a time. ``embed`` may be
    called from several threads at once; each call takes a free lane (forking one while fewer than
    ``count`` exist) and waits for its answer."""

    def __init__(self, embedder: Any, count: int) -> None:
        self.embedder = embedder
        self.count = count
        self._free: queue.Queue[_Lane] = queue.Queue()
        self._all: list[_Lane] = []
        self._lock = threading.Lock()
        self._closed = False
        self.broken: str | None = None  # why the lanes stopped, once one failed

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors from a lane. Raises ``EmbedderError``/``EmbedderInputError`` as the
        embedder did in the child, and ``LaneError`` when no lane could answer."""
        lane = self._take()
        try:
            return lane.embed(texts)
        except LaneError as exc:
            lane.close(kill=True)
            with self._lock:
                first, self.broken = self.broken is None, self.broken or str(exc)
            if first:
                log.warning(
                    "embedding in a child process failed (%s); embedding in this process for the rest of this job", exc
                )
            raise
        finally:
            self._free.put(lane)  # a closed one too: a thread waiting for a lane then sees it closed

    def _take(self) -> _Lane:
        with self._lock:
            self._check()
            if len(self._all) < self.count and self._free.empty():
                try:
                    lane = _Lane.fork(self.embedder)  # under the lock: one fork at a time, counted once
                except LaneError as exc:
                    self.broken = str(exc)
                    log.warning("could not start a child process to embed in (%s); embedding in this process", exc)
                    raise
                self._all.append(lane)
                return lane
        while True:
            try:
                lane = self._free.get(timeout=0.5)
            except queue.Empty:
                with self._lock:
                    self._check()
                continue
            if lane.alive:
                return lane
            with self._lock:
                self._check()

    def _check(self) -> None:
        if self._closed or self.broken:
            raise LaneError(self.broken or "the lanes are closed")

    def close(self) -> None:
        """Close every lane once its call under way has its answer: the child reads end-of-file
        and exits (killed if it has not within CLOSE_SECONDS). Later calls raise ``LaneError``."""
        with self._lock:
            self._closed = True
            lanes = list(self._all)
        for lane in lanes:
            lane.hang_up()  # every child reads end-of-file now: they exit at once, not one after another
        for lane in lanes:
            lane.close()

    def pids(self) -> list[int]:
        """The children alive now (for tests and ``stats``)."""
        with self._lock:
            return [lane.pid for lane in self._all if lane.alive]


class _Lane:
    """One child process and the parent's end of its socket pair; one call at a time."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.alive = True
        self._busy = threading.Lock()

    @classmethod
    def fork(cls, embedder: Any) -> _Lane:
        try:
            embedder.warm_up()  # the child gets the model loaded: no second load, weights shared
        except Exception as exc:  # noqa: BLE001 - embedding in process meets and reports the same error
            raise LaneError(f"the model did not load: {exc}") from None
        name = _namer()  # resolved here: the child must not look a symbol up (the loader's lock)
        parent, child = socket.socketpair()
        try:
            with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads: see the docstring
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            parent.close()
            child.close()
            raise LaneError(f"could not fork ({exc})") from None
        if pid == 0:  # the child: never returns
            _child(child.fileno(), embedder, name)
        child.close()
        return cls(pid, parent)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._busy:
            if not self.alive:
                raise LaneError(f"the child process {self.pid} is closed")
            deadline = time.monotonic() + DEADLINE_SECONDS + PER_TEXT_SECONDS * len(texts)
            try:
                self.sock.settimeout(DEADLINE_SECONDS)
                _send(self.sock, list(texts))
                head, data = _recv(self.sock, deadline)
            except (OSError, EOFError, ValueError) as exc:
                raise LaneError(self._why(exc)) from None
        if head.get("kind") == "ok":
            rows, dim = int(head["rows"]), int(head["dim"])
            dtype = _DTYPES.get(head.get("dtype", "<f8"))
            if dtype is None:
                raise LaneError(f"the child process {self.pid} answered with vectors of type {head.get('dtype')!r}")
            return np.frombuffer(data, dtype=dtype).reshape(rows, dim).tolist() if rows else []
        if head.get("kind") == "input":
            raise EmbedderInputError(str(head.get("message")))
        raise EmbedderError(str(head.get("message")))

    def _why(self, exc: BaseException) -> str:
        """What became of the child: its exit (looked for a moment, as it may be dying), or silence."""
        if isinstance(exc, TimeoutError):
            return f"the child process {self.pid} did not answer in time"
        deadline = time.monotonic() + 1.0
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return f"the child process {self.pid} is gone ({exc})"
            if pid:
                self.alive = False
                if os.WIFSIGNALED(status):
                    return f"the child process {self.pid} was killed by signal {os.WTERMSIG(status)}"
                return f"the child process {self.pid} exited with status {os.waitstatus_to_exitcode(status)}"
            if time.monotonic() > deadline:
                return f"the child process {self.pid} closed its socket ({exc})"
            time.sleep(0.01)

    def hang_up(self) -> None:
        """Close the socket once the call under way has its answer: the child reads end-of-file
        and exits (``close`` then reaps it)."""
        with self._busy:
            try:
                self.sock.close()
            except OSError:
                pass

    def close(self, kill: bool = False) -> None:
        """Close the socket (the child then exits), and reap the child, killed if it lingers."""
        if kill:  # it may be stuck mid-call: not waiting for the call's lock
            self._reap(kill=True)
        with self._busy:
            self._reap(kill=False)

    def _reap(self, kill: bool) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if not self.alive:
            return
        if kill:
            _kill(self.pid)
        deadline = time.monotonic() + CLOSE_SECONDS
        while True:
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                break
            if time.monotonic() > deadline:
                _kill(self.pid)
                try:
                    os.waitpid(self.pid, 0)
                except ChildProcessError:
                    pass
                break
            time.sleep(0.005)
        self.alive = False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# --- the child ------------------------------------------------------------------------------------


def _child(fd: int, embedder: Any, name: Any) -> None:
    """The child's whole life: keep only its socket, embed what it is sent, exit at end-of-file."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which closes the lanes
        for sig in (signal.SIGTERM, signal.SIGHUP):  # not a handler the parent's event loop set
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)  # ...nor its wakeup descriptor (closed below, its number maybe reused)
        gc.disable()  # nothing it allocates is cyclic, and no finalizer of the parent's objects runs here
        fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)  # never one of the standard three
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):  # the MCP pipes and the server's log are the parent's
            os.dup2(null, std)
        if fd != 3:
            os.dup2(fd, 3, inheritable=False)
        os.closerange(4, _max_fd())  # the owner lock, other lanes' sockets, SQLite and Chroma files...
        name(b"spellbook-embed")
        embedder.after_fork()
        sock = socket.socket(fileno=3)
        while True:
            try:
                texts, _ = _recv(sock, None)
            except (EOFError, OSError, ValueError):
                break
            data = b""
            try:
                array = _vectors(embedder, texts)
                head: dict[str, Any] = {
                    "kind": "ok",
                    "rows": len(array),
                    "dim": array.shape[1] if len(array) else 0,
                    "dtype": array.dtype.str,
                }
                data = array.tobytes()
            except EmbedderInputError as exc:
                head = {"kind": "input", "message": str(exc)}
            except EmbedderError as exc:
                head = {"kind": "error", "message": str(exc)}
            except Exception as exc:  # noqa: BLE001 - the parent raises it as the embedder's error
                head = {"kind": "error", "message": f"{type(exc).__name__}: {exc}"}
            try:
                _send(sock, head, data)
            except OSError:
                break
    except BaseException:  # noqa: BLE001 - nothing of the parent's may run on in the child
        code = 1
    finally:
        os._exit(code)


_DTYPES = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8")}  # what an answer's vectors may be


def _vectors(embedder: Any, texts: list[str]) -> np.ndarray:
    """The texts' vectors as the embedder's own array where it gives one (``embed_array``: use-m3's
    float32, sent as it is, where its lists of floats cost the child 23 ms a 1,000 texts to make
    and turn back into an array), else its lists as float64: either way the parent's floats are
    the ones ``embed_documents`` gives in process."""
    own = getattr(embedder, "embed_array", None)
    if own is not None and texts:
        array = np.ascontiguousarray(own(texts))
        if array.dtype.str in _DTYPES and array.ndim == 2 and len(array) == len(texts):
            return array
    return np.asarray(embedder.embed_documents(texts), dtype=np.float64)


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 20)
    except (OSError, ValueError):
        return 65536


def _namer() -> Any:
    """A function that names the calling process in ``ps``/``top`` (its command line stays the
    parent's), or one that does nothing."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except Exception:  # noqa: BLE001 - cosmetic
        return lambda name: None

    def name(value: bytes) -> None:
        prctl(_PR_SET_NAME, ctypes.c_char_p(value), 0, 0, 0)

    return name


# --- framing: two lengths, a JSON value, then raw bytes (the vectors) ---------------------------------


def _send(sock: socket.socket, value: Any, data: bytes = b"") -> None:
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")  # any str goes across
    sock.sendall(_HEADER.pack(len(text), len(data)) + text + data)


def _recv(sock: socket.socket, deadline: float | None) -> tuple[Any, bytes]:
    size, extra = _HEADER.unpack(_read(sock, _HEADER.size, deadline))
    return json.loads(_read(sock, size, deadline).decode("utf-8", "surrogatepass")), _read(sock, extra, deadline)


def _read(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    out = bytearray()
    while len(out) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer before the deadline")
            sock.settimeout(left)
        chunk = sock.recv(min(size - len(out), 1 << 20))
        if not chunk:
            raise EOFError("closed")
        out += chunk
    return bytes(out)
