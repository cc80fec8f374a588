"""The stdio wire, and the client's opening requests answered while the server is still starting.

A client (Claude Code, Claude Desktop, Cursor) starts ``spellbook serve`` and waits for the
handshake and the tool list before its session begins. Importing the MCP SDK takes ~1 s of a start
on a 2-core machine (its protocol types are pydantic models), and those answers are the same on
every start of one installation. So a stdio server's first step is this module (standard library
only, before the rest of Spellbook is imported; ``spellbook.startup.begin``): ``start`` takes the
wire (fds 0 and 1 are pointed at ``/dev/null`` and stderr, so a stray print or a child process
never writes into it), reads the client's messages on a thread of its own and answers
``initialize`` (the handshake of the protocol versions up to 2025-11-25), ``server/discover``
(2026-07-28) and ``tools/list`` with what the SDK answered to the same request, from the same
client, on an earlier start (the handshake cache, ``mcp-front-<digest>.json`` in the cache folder).
Every other message waits, in order, for the SDK, which then serves the connection as if it had
read the wire itself (``serve``).

An early answer is never the cache's word alone: the request is also handed to the SDK, under an
id of the front's own, and the SDK's answer is compared with the one sent; a difference is logged,
the cache rewritten and, for the tool list, the client told to list again
(``notifications/tools/list_changed``). The file's digest covers what those answers come from
(Spellbook's source files, the installed SDK and pydantic, Python), so a new version starts with
no cache. A request the cache does not hold (a first start, another client, another protocol
version) waits for the SDK like the rest, and its answer is kept for the next start.

Once the SDK serves, the front stays its transport, one step shorter each way than the SDK's own
(which hands every read and every write to a worker thread): the reader thread wakes the event
loop when a line arrives, and a message is written from the loop when the client has read the
pipe empty and the message fits it (a write that cannot block), else from a worker thread. A
cheap tool call over the SDK's client: 3.0-3.2 -> 2.25-2.7 ms.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import stat
import sys
import threading
import time
from typing import Any

from spellbook.defaults import cache_dir as configured_cache_dir

try:
    import fcntl
    import termios
except ImportError:  # Windows: `serve` runs the SDK's own stdio transport there
    fcntl = termios = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

EARLY_METHODS = ("initialize", "server/discover", "tools/list")  # what the front may answer
_NEEDLES = tuple(f'"{m}"'.encode() for m in EARLY_METHODS)  # a line without one is never parsed
_PRIVATE_ID = "spellbook.front/"  # ids of the requests the front hands the SDK in place of answered ones
_MAX_ANSWERS = 64  # kept in the cache file (a few clients x protocol versions x methods)
STALE_DAYS = 14  # another digest's cache file unused this long is removed
_PACKAGES = ("mcp", "mcp_types", "pydantic", "pydantic_core")  # whose versions shape the answers

_running: Front | None = None


def serves_stdio(argv: list[str]) -> bool:
    """Whether ``spellbook <argv>`` is ``serve`` over stdio with a client on the other end (not a
    terminal, not ``--help``, not ``--http`` or an abbreviation of it)."""
    if (
        sys.platform == "win32"
        or argv[:1] != ["serve"]
        or any(a in ("-h", "--help") or a.startswith("--ht") for a in argv[1:])
    ):
        return False
    try:
        return not os.isatty(0)
    except OSError:
        return False


def start(cache_dir: str | None = None) -> Front:
    """Take the wire and start reading it (once a process). Without ``cache_dir``: the cache folder
    of the settings (``spellbook.defaults.cache_dir``)."""
    global _running
    if _running is None:
        _running = Front(_take_fd(0, os.O_RDONLY), _take_fd(1, os.O_WRONLY), cache_dir or configured_cache_dir())
    return _running


def running() -> Front | None:
    return _running


def _take_fd(fd: int, mode: int) -> int:
    """A private duplicate of ``fd`` for the wire; ``fd`` itself now reads ``/dev/null`` (0) or
    writes to stderr (1), for the process and every child it starts."""
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    if fd == 1:
        os.dup2(2, 1)
    else:
        null = os.open(os.devnull, mode)
        os.dup2(null, fd)
        os.close(null)
    return wire


def cache_digest() -> str:
    """What the SDK's answers to the opening requests depend on: Spellbook's files (every tool,
    model and description is in them), the installed SDK and pydantic, and Python."""
    h = hashlib.sha256(sys.version.encode())
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{os.path.relpath(folder, package)}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for name in _PACKAGES:
        for entry in sys.path:
            init = os.path.join(entry or ".", name, "__init__.py")
            try:
                st = os.stat(init)
            except OSError:
                continue
            versions = sorted(
                f for f in os.listdir(entry or ".") if f.startswith(f"{name}-") and f.endswith(".dist-info")
            )
            h.update(f"{init}:{st.st_size}:{st.st_mtime_ns}:{versions}\n".encode())
            break
    return h.hexdigest()[:24]


class Front:
    """The wire's reader and writer. The reader thread answers what it can from the cache until
    the SDK starts reading (``lines``); the SDK writes through ``write``."""

    def __init__(self, wire_in: int, wire_out: int, cache_dir: str) -> None:
        self._in = os.fdopen(wire_in, "rb", closefd=False)
        self._out = wire_out
        self._write_lock = threading.Lock()
        self._pipe_size = _pipe_size(wire_out)
        self._lock = threading.Lock()  # the fields below, between the reader thread and the SDK's loop
        self._inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._waiter: Any = None  # (loop, future) of the SDK's reader waiting for a line
        self._serving = False  # the SDK reads the messages: nothing more is answered early
        self._opening: Any = None  # the client's `initialize` params: later answers in its session depend on them
        self._waiting: dict[str, tuple[str, str, Any]] = {}  # id -> (method, cache key, early answer or None)
        self._replays = 0
        self._cache_path = os.path.join(cache_dir, f"mcp-front-{cache_digest()}.json")
        self._answers = self._load()
        self._changed = False
        self.answered_early = 0  # how many requests the cache answered (tests, logs)
        self._reported = False
        self._disagreed = False
        threading.Thread(target=self._read, name="spellbook-wire", daemon=True).start()

    # --- the reader thread ------------------------------------------------------------------
    def _read(self) -> None:
        try:
            for line in self._in:
                self._put(self._early(line))
        except (OSError, ValueError) as exc:  # the wire is gone: like its end
            log.debug("reading stdin stopped: %s", exc)
        finally:
            self._put(None)

    def _put(self, line: bytes | None) -> None:
        self._inbox.put(line)
        with self._lock:
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            loop, woken = waiter
            try:
                loop.call_soon_threadsafe(_wake, woken)
            except RuntimeError:  # the loop is closed: nobody reads any more
                pass

    def _early(self, line: bytes) -> bytes:
        """The line to hand the SDK: as read, or with a private id when the cache answered it."""
        if not any(needle in line for needle in _NEEDLES):
            return line
        try:
            message = json.loads(line)
        except ValueError:
            return line  # the SDK answers it with its parse error
        method = message.get("method") if isinstance(message, dict) else None
        if method not in EARLY_METHODS or "id" not in message:
            return line
        params = message.get("params")
        if method == "initialize":
            self._opening = params
        key = _key(method, params, None if method == "initialize" else self._opening)
        with self._lock:
            answer = (
                None if self._serving or (isinstance(params, dict) and params.get("cursor")) else self._answers.get(key)
            )
            if answer is None:
                self._waiting[_id(message["id"])] = (method, key, None)  # its answer is kept for next time
                return line
            self._replays += 1
            private = f"{_PRIVATE_ID}{self._replays}"
            self._waiting[_id(private)] = (method, key, answer)
            self.answered_early += 1
        self._send(_line({"jsonrpc": "2.0", "id": message["id"], "result": answer}))
        message["id"] = private
        return _line(message)

    # --- the SDK's side ---------------------------------------------------------------------
    def lines(self) -> _Lines:
        """What the SDK's stdio transport reads (``stdio_server(stdin=...)``): every line the client
        sent, in order, from the first; the SDK's reading ends the early answers."""
        with self._lock:
            self._serving = True
        return _Lines(self)

    def writer(self) -> _Writer:
        """What the SDK's stdio transport writes to (``stdio_server(stdout=...)``)."""
        return _Writer(self)

    def _outgoing(self, text: str) -> bytes | None:
        """The SDK's message as bytes for the wire, or None when it answers the front's own request
        (compared with the early answer). Answers to cacheable requests are kept."""
        data = text.encode("utf-8")
        if not self._waiting:
            return data
        try:
            message = json.loads(data)
            with self._lock:
                pending = self._waiting.pop(_id(message["id"]))
        except (ValueError, KeyError, TypeError):
            return data
        method, key, early = pending
        result = message.get("result")
        if early is not None and not isinstance(result, dict):  # the SDK refused what the cache answered
            self._disagreed = True
            log.warning(
                "the server answered the handshake cache's %s with %s; the cache entry is dropped",
                method,
                message.get("error"),
            )
            with self._lock:
                self._changed = self._answers.pop(key, None) is not None or self._changed
        if isinstance(result, dict) and self._answers.get(key) != result:
            if early is not None:
                self._disagreed = True
                log.warning(
                    "the handshake cache's answer to %s differs from the server's; it is replaced%s",
                    method,
                    " and the client told to list the tools again" if method == "tools/list" else "",
                )
                if method == "tools/list":
                    self._send(_line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
            with self._lock:
                self._answers[key] = result
                self._changed = True
        if not self._waiting:
            if self._changed:
                self._save()
            if self.answered_early and not self._reported:
                self._reported = True
                log.info(
                    "answered %d opening request(s) from the handshake cache before the MCP SDK was loaded; "
                    "the server's own answers matched%s",
                    self.answered_early,
                    "" if not self._disagreed else " except where logged above",
                )
        return None if early is not None else data

    def _room_for(self, size: int) -> bool:
        """Whether a write of ``size`` bytes returns at once: the wire is a pipe the client has read
        empty and the data fits it (Linux). Else the write goes to a worker thread, as the SDK's."""
        if size > self._pipe_size:
            return False
        try:
            unread = fcntl.ioctl(self._out, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return False
        return unread == b"\0\0\0\0"

    def _send(self, data: bytes) -> None:
        with self._write_lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view) :]

    # --- the cache file ---------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        try:
            with open(self._cache_path, "rb") as f:
                answers = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.debug("handshake cache %s unreadable (%s): starting without it", self._cache_path, exc)
            return {}
        try:
            os.utime(self._cache_path)  # in use: not one of the stale files another installation removes
        except OSError:
            pass
        return {k: v for k, v in answers.items() if isinstance(v, dict)} if isinstance(answers, dict) else {}

    def _save(self) -> None:
        with self._lock:
            answers = dict(list(self._answers.items())[-_MAX_ANSWERS:])
            self._changed = False
        folder = os.path.dirname(self._cache_path)
        temp = f"{self._cache_path}.{os.getpid()}.tmp"
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with open(fd, "wb") as f:
                f.write(json.dumps(answers, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            os.replace(temp, self._cache_path)
        except OSError as exc:  # a read-only home: every start waits for the SDK, as before
            log.info("could not write the handshake cache %s: %s", self._cache_path, exc)
            try:
                os.unlink(temp)
            except OSError:
                pass
            return
        _remove_stale(folder)


def _remove_stale(folder: str) -> None:
    """Cache files of other digests (an earlier version, an edited checkout) unused for
    ``STALE_DAYS``: each start of an installation touches its own, so another one in use stays."""
    cutoff = time.time() - STALE_DAYS * 86400
    try:
        names = [n for n in os.listdir(folder) if n.startswith("mcp-front-") and n.endswith((".json", ".tmp"))]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if os.lstat(path).st_mtime < cutoff:
                os.unlink(path)
        except OSError:
            pass


class _Lines:
    """``async for line in stdin``, as the SDK's transport reads it."""

    def __init__(self, front: Front) -> None:
        self._front = front

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        import asyncio

        front = self._front
        inbox = front._inbox
        while True:
            try:
                line = inbox.get_nowait()
                break
            except queue.Empty:
                pass
            loop = asyncio.get_running_loop()
            woken = loop.create_future()
            with front._lock:
                front._waiter = (loop, woken)
            if not inbox.empty():  # a line came between the two looks: no wake-up was due
                with front._lock:
                    front._waiter = None
                continue
            try:
                await woken
            finally:
                with front._lock:
                    front._waiter = None
        if line is None:
            inbox.put(None)  # for anyone reading after the end
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """``await stdout.write(line)`` and ``await stdout.flush()``, as the SDK's transport writes."""

    def __init__(self, front: Front) -> None:
        self._front = front

    async def write(self, text: str) -> None:
        import anyio

        data = self._front._outgoing(text)
        if data is None:
            return
        if self._front._room_for(len(data)):
            self._front._send(data)  # an empty pipe takes it whole: os.write returns at once
        else:
            await anyio.to_thread.run_sync(self._front._send, data)

    async def flush(self) -> None:
        return None


def _pipe_size(fd: int) -> int:
    """The capacity of the pipe ``fd`` writes to; 0 when it is not a pipe (or not Linux)."""
    try:
        if hasattr(fcntl, "F_GETPIPE_SZ") and stat.S_ISFIFO(os.fstat(fd).st_mode):
            return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except OSError:
        pass
    return 0


def _wake(woken: Any) -> None:
    if not woken.done():
        woken.set_result(None)


def _key(method: str, params: Any, opening: Any) -> str:
    """The cache's key for a request: its method and params (the client, its protocol version and
    capabilities ride in them) and, within an ``initialize`` session, that handshake's params."""
    blob = json.dumps([method, params, opening], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _id(value: Any) -> str:
    return json.dumps(value)  # 1 and "1" are different ids


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
