"""The channel between followers and the owner of an index (server/hub.py): transport and framing.

Transport. The owner listens on a Unix domain socket ``<index>/owner.sock``, mode 0600 (bound in a
private 0700 folder, then renamed into place, so it is never reachable with looser permissions).
The file system is the guard: no port, no token. It reaches across network namespaces (two
containers sharing the vault volume, a sandbox with its own network), which loopback TCP does not.
A path longer than ``sun_path`` (107 bytes on Linux) is reached through ``/proc/self/fd/<dir>/``
(a short alias of the same folder, so it still works across containers). Where Unix sockets are
missing (Windows), ``/proc`` is missing for a long path (macOS), or the file system refuses a socket,
the owner falls back to a random loopback TCP port and a random token. ``<index>/owner.json``
(mode 0600) says which: ``{"pid", "socket"}`` or ``{"pid", "port", "token"}``.

Framing, one request per connection: a header line of JSON (at most ``HEADER_LIMIT`` bytes:
``{"method", "length"[, "token"]}``), then ``length`` bytes of JSON parameters. The owner checks the
token and the method (only the operations it serves) before it reads the body, refuses a body over
``MAX_REQUEST_BYTES``, and drops a connection whose request has not fully arrived
``REQUEST_SECONDS`` after it connected. At most ``MAX_CONNECTIONS`` are served at once. The reply
is framed the same way: ``{"length"}`` then ``{"result": ...}`` or ``{"error": <to_wire()>}``, so a
follower raises the owner's error with its class and fields (spellbook/errors.py).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import selectors
import socket
import socketserver
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from spellbook.errors import InvalidInputError, RemoteError, SpellbookError, UnknownOperationError

log = logging.getLogger(__name__)

HEADER_LIMIT = 4096  # bytes of a header line; read before anything is authenticated
MAX_REQUEST_BYTES = 4 * 2**20  # a request's parameters; the HTTP transport's body limit
REQUEST_SECONDS = 10.0  # a whole request must arrive within this after connecting
MAX_CONNECTIONS = 64
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
SOCKET_NAME = "owner.sock"
UNKNOWN_METHOD = "unknown method"  # how an owner refuses a method it does not serve (part of the wire)


class Unreachable(Exception):
    """The owner did not answer (gone, restarting, stale owner.json): the caller may retry."""


class _Refused(Exception):
    pass


# --- the owner's side ---------------------------------------------------------------------------
class ChannelServer:
    """Serves ``handle(method, params)`` to followers; ``start()`` returns what owner.json publishes."""

    def __init__(
        self,
        index_dir: Path,
        handle: Callable[[str, dict[str, Any]], Any],
        methods: frozenset[str],
        transport: str = "auto",
    ) -> None:
        self.index_dir = index_dir
        self.handle = handle
        self.methods = methods
        self.transport = transport
        self.token: str | None = None
        self._server: socketserver.BaseServer | None = None
        self._listening: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None  # a pipe: close() writes to it, the listener stops at once
        self._socket_id: tuple[int, int] | None = None

    def start(self) -> dict[str, Any]:
        channel = self
        slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                channel._serve_one(self.request)

        class Limited(socketserver.ThreadingMixIn):
            daemon_threads = True

            def process_request(self, request: Any, client_address: Any) -> None:
                if not slots.acquire(blocking=False):
                    self.shutdown_request(request)  # type: ignore[attr-defined]
                    return
                super().process_request(request, client_address)  # type: ignore[misc]

            def process_request_thread(self, request: Any, client_address: Any) -> None:
                try:
                    super().process_request_thread(request, client_address)  # type: ignore[misc]
                finally:
                    slots.release()

        if self.transport != "tcp" and hasattr(socket, "AF_UNIX"):
            with contextlib.suppress(OSError):
                server: socketserver.BaseServer = type("UnixServer", (Limited, socketserver.UnixStreamServer), {})(
                    None, Handler, bind_and_activate=False
                )
                try:
                    self._bind_unix(server.socket)  # type: ignore[attr-defined]
                    server.server_activate()
                except OSError:
                    server.server_close()
                    raise
                self._run(server)
                return {"socket": SOCKET_NAME}
            log.warning("cannot listen on a Unix socket in %s; followers will use loopback TCP", self.index_dir)
        tcp = type("TcpServer", (Limited, socketserver.TCPServer), {"allow_reuse_address": True})(
            ("127.0.0.1", 0), Handler
        )
        self.token = secrets.token_hex(16)
        self._run(tcp)
        return {"port": tcp.server_address[1], "token": self.token}

    def _run(self, server: socketserver.BaseServer) -> None:
        self._server = server
        self._wake = os.pipe()
        self._listening = threading.Thread(
            target=self._listen, args=(server, self._wake[0]), name="spellbook-rpc", daemon=True
        )
        self._listening.start()

    @staticmethod
    def _listen(server: socketserver.BaseServer, wake: int) -> None:
        """Accept connections (each served on a thread of its own) until ``close`` writes to
        ``wake``. socketserver's ``serve_forever`` looks for a shutdown between polls instead, and
        every command that opened the index waited up to a poll at its end (0.05 s here)."""
        server.timeout = 0  # a connection dropped between the select and the accept is not waited for
        with selectors.DefaultSelector() as selector:
            selector.register(server, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while True:
                if any(key.fileobj == wake for key, _ in selector.select()):
                    return
                server.handle_request()

    def _bind_unix(self, sock: socket.socket) -> None:
        # Bind in a fresh 0700 folder, tighten to 0600, then rename over owner.sock (a stale one of a
        # killed owner included): the socket is never reachable with the umask's permissions.
        private = Path(tempfile.mkdtemp(prefix=".owner-", dir=self.index_dir))
        try:
            with short_path(private / SOCKET_NAME) as address:
                sock.bind(address)
            os.chmod(private / SOCKET_NAME, 0o600)
            os.replace(private / SOCKET_NAME, self.index_dir / SOCKET_NAME)
            stat = os.stat(self.index_dir / SOCKET_NAME)
            self._socket_id = (stat.st_dev, stat.st_ino)
        finally:
            with contextlib.suppress(OSError):
                (private / SOCKET_NAME).unlink()
            with contextlib.suppress(OSError):
                private.rmdir()

    def close(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        if self._wake is not None and self._listening is not None:
            os.write(self._wake[1], b"x")
            self._listening.join()
            for fd in self._wake:
                os.close(fd)
        server.server_close()
        if self._socket_id is not None:  # remove owner.sock only if it is still ours
            with contextlib.suppress(OSError):
                stat = os.stat(self.index_dir / SOCKET_NAME)
                if (stat.st_dev, stat.st_ino) == self._socket_id:
                    (self.index_dir / SOCKET_NAME).unlink()

    def _serve_one(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + REQUEST_SECONDS
        try:
            header, rest = _read_line(conn, HEADER_LIMIT, deadline)
            request = json.loads(header)
            if not isinstance(request, dict):
                raise _Refused("the header is not a JSON object")
            if self.token is not None and not hmac.compare_digest(str(request.get("token", "")), self.token):
                _send(conn, {"refused": "bad token"})
                return
            method, length = request.get("method"), request.get("length")
            if method not in self.methods:
                raise _Refused(f"{UNKNOWN_METHOD} {str(method)[:80]!r}")
            if not isinstance(length, int) or not 0 <= length <= MAX_REQUEST_BYTES:
                raise _Refused(f"the request must be at most {MAX_REQUEST_BYTES} bytes")
            params = json.loads(_read_exactly(conn, length, rest, deadline))
            if not isinstance(params, dict):
                raise _Refused("the parameters are not a JSON object")
        except (OSError, ValueError, RecursionError, _Refused) as exc:  # unauthenticated or malformed: hang up
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                _send(conn, {"refused": str(exc)[:200]})
            return
        conn.settimeout(None)  # authenticated: the call may take as long as it takes
        try:
            reply: dict[str, Any] = {"result": self.handle(method, params)}
        except SpellbookError as exc:
            reply = {"error": exc.to_wire()}
        except Exception as exc:
            log.exception("forwarded call failed")
            reply = {
                "error": RemoteError(f"Internal error in the owning process: {type(exc).__name__}: {exc}").to_wire()
            }
        with contextlib.suppress(OSError):
            _send(conn, reply)


# --- the follower's side ------------------------------------------------------------------------
def request(index_dir: Path, method: str, params: dict[str, Any], timeout: float | None) -> Any:
    """One call to the owner. Raises ``Unreachable`` when it cannot be asked, its error when it answers one."""
    body = json.dumps(params, ensure_ascii=False).encode()
    if len(body) > MAX_REQUEST_BYTES:
        raise InvalidInputError(
            f"The request is {len(body):,} bytes; the largest is {MAX_REQUEST_BYTES:,}. "
            "Send less at once (fewer ids, a shorter text)."
        )
    try:
        info = json.loads((index_dir / "owner.json").read_text())
        header: dict[str, Any] = {"method": method, "length": len(body)}
        if "socket" in info:
            sock = socket.socket(socket.AF_UNIX)
            try:
                sock.settimeout(5)
                with short_path(index_dir / str(info["socket"])) as address:
                    sock.connect(address)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection(("127.0.0.1", int(info["port"])), timeout=5)
            header["token"] = info["token"]
        with sock:
            sock.sendall(json.dumps(header).encode() + b"\n" + body)
            sock.settimeout(timeout)
            reply = _read_reply(sock)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from exc
    if "refused" in reply:
        if reply["refused"] == "bad token":
            raise Unreachable("owner.json is stale (token rejected)")
        if str(reply["refused"]).startswith(UNKNOWN_METHOD):  # an owner of an older version
            raise UnknownOperationError(method, by_owner=True)
        raise RemoteError(f"The process that owns the index refused the call: {reply['refused']}")
    if "error" in reply:
        raise SpellbookError.from_wire(reply["error"])
    return reply.get("result")


def _read_reply(sock: socket.socket) -> dict[str, Any]:
    header, rest = _read_line(sock, HEADER_LIMIT, None)
    length = json.loads(header)["length"]
    reply = json.loads(_read_exactly(sock, int(length), rest, None))
    if not isinstance(reply, dict):
        raise ValueError("malformed reply")  # noqa: TRY004 - the wire sent bad JSON: read as the JSON errors are
    return reply


# --- framing and addresses ----------------------------------------------------------------------
def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message, ensure_ascii=False, default=str).encode()
    conn.sendall(json.dumps({"length": len(body)}).encode() + b"\n" + body)


def _recv(conn: socket.socket, deadline: float | None) -> bytes:
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        conn.settimeout(left)
    return conn.recv(65536)


def _read_line(conn: socket.socket, limit: int, deadline: float | None) -> tuple[bytes, bytes]:
    """A line of at most ``limit`` bytes, and whatever arrived after it."""
    data = b""
    while b"\n" not in data:
        if len(data) > limit:
            raise ValueError(f"the header is longer than {limit} bytes")
        chunk = _recv(conn, deadline)
        if not chunk:
            raise ConnectionError("the connection closed mid-message")
        data += chunk
    line, _, rest = data.partition(b"\n")
    if len(line) > limit:
        raise ValueError(f"the header is longer than {limit} bytes")
    return line, rest


def _read_exactly(conn: socket.socket, length: int, data: bytes, deadline: float | None) -> bytes:
    chunks, have = [data], len(data)
    while have < length:
        chunk = _recv(conn, deadline)
        if not chunk:
            raise ConnectionError("the connection closed mid-message")
        chunks.append(chunk)
        have += len(chunk)
    if have > length:
        raise ValueError("more bytes than the header announced")
    return b"".join(chunks)


@contextlib.contextmanager
def short_path(path: Path) -> Iterator[str]:
    """An address for ``path`` that fits ``sun_path``: itself, or ``/proc/self/fd/<folder>/<name>``."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield str(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise OSError(f"{path} is too long for a Unix socket")
    fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        address = f"/proc/self/fd/{fd}/{path.name}"
        if len(address) > SUN_PATH_MAX:
            raise OSError(f"{path} is too long for a Unix socket")
        yield address
    finally:
        os.close(fd)
