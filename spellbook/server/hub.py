"""One index owner per vault; every other process forwards to it.

Claude Code, a second Claude Code and Claude Desktop each start their own ``spellbook serve``
on the same vault, and two processes must never open one embedded Chroma folder (it loses
vectors; chroma-core/chroma#961). So:

* The first process to take an exclusive lock on ``<index>/owner.lock`` is the **owner**: it
  opens the engine (Chroma, catalog, model), runs the watcher, and answers the others on a
  loopback TCP port written, with a random token, to ``<index>/owner.json`` (mode 0600).
* Every other process is a **follower**: it forwards each call to the owner, and waits on the
  lock in a background thread. The OS releases the lock when the owner exits, however it
  exits (even kill -9), so the first follower to get it becomes the new owner, and the rest
  reconnect to it. Calls in flight during a hand-over are retried for up to ``HANDOVER_SECONDS``.
* Nothing outlives its client: each process exits when its own client closes stdio.

The CLI (``spellbook search``, ``index``, ``stats``) goes through the same hub, so it never opens
the index under a running server either.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spellbook.errors import IndexUnavailableError, SpellbookError
from spellbook.scope import Scope, resolve, scoped

if TYPE_CHECKING:  # not imported at run time: a hook forwarding to a running owner stays light (sessions/hook.py)
    from spellbook.config import Settings

log = logging.getLogger(__name__)

METHODS = frozenset(
    {"scribe", "memorize", "get_memories", "revise", "erase", "list_memories", "stats", "rebuild_index",
     "get_index", "reconcile", "related", "timeline", "check", "repair", "get_topic",
     "describe", "erase_topic", "sweep_expired",
     "export", "import_memories",
     "history", "restore",
     "link", "unlink", "get_links", "explore_related", "analyze_knowledge",
     "fill_missing_vectors", "probe_embedder"}
)
SCOPE_KEY = "_scope"
HANDOVER_SECONDS = 30.0
MAINTAIN_SECONDS = 2.0  # the owner calls engine.maintain() this often (the sweep has its own interval)
OPEN_TIMEOUT_SECONDS = 300.0


class RemoteError(SpellbookError):
    """An error raised by the owner process, carried over with its message intact."""


class Hub:
    def __init__(
        self,
        settings: Settings,
        watch: bool | None = None,
        engine_factory: Callable[..., Any] | None = None,
        reconcile_on_open: bool = True,
        warm_up: bool = True,
        open_delay: float = 0.0,
    ):
        self.settings = settings
        self.watch = settings.watch if watch is None else watch
        self.reconcile_on_open = reconcile_on_open
        self.warm_up = warm_up
        self.open_delay = open_delay
        self._engine_factory = engine_factory
        self.index_dir = settings.index_path
        self.role = "starting"
        self.engine: Any = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self._lock_fd: int | None = None
        self._server: socketserver.ThreadingTCPServer | None = None
        self._watcher: Any = None
        self._maintainer: threading.Thread | None = None
        self._closing = threading.Event()
        self._token = secrets.token_hex(16)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, background: bool = True, progress: Callable[[int, int], None] | None = None) -> None:
        """Become owner if the lock is free, else follower. With ``background``, the owner opens
        the engine in a thread so the MCP handshake is answered at once."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.index_dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        if _try_lock(self._lock_fd, blocking=False):
            self._become_owner(background, progress)
        else:
            self.role = "follower"
            log.info("another Spellbook process owns %s; forwarding to it", self.index_dir)
            threading.Thread(target=self._await_ownership, name="spellbook-takeover", daemon=True).start()

    def _await_ownership(self) -> None:
        assert self._lock_fd is not None
        while not self._closing.is_set():
            if _try_lock(self._lock_fd, blocking=True):
                if self._closing.is_set():
                    return
                log.info("previous owner exited; this process takes over the index")
                self._become_owner(background=True, progress=None)
                return

    def _become_owner(self, background: bool, progress: Callable[[int, int], None] | None) -> None:
        self.role = "owner"
        if background:
            # Give the MCP handshake a head start: importing Chroma and loading the model hold the
            # GIL for seconds, and a client waits for tools/list before it does anything else.
            opener = threading.Timer(self.open_delay, self._open, args=(progress,))
            opener.name, opener.daemon = "spellbook-open", True
            opener.start()
        else:
            self._open(progress)

    def _open(self, progress: Callable[[int, int], None] | None) -> None:
        try:
            from spellbook.engine import Engine

            factory = self._engine_factory or Engine
            engine = factory(self.settings)
            engine.prepare()
            self.engine = engine
            if self.watch and not self._closing.is_set():
                # Watch before the first reconcile, so a change made while it runs is not missed.
                from spellbook.indexing.watcher import VaultWatcher

                self._watcher = VaultWatcher(engine.indexer, self.settings.debounce_seconds, reconcile=engine.reconcile)
                self._watcher.start()
            self._serve_followers()
            self._ready.set()
            warm = getattr(engine.embedder, "warm_up", None)
            if self.warm_up and warm:
                warm()  # load the model now rather than on the first query (a call waits for it)
            if self.reconcile_on_open:
                engine.reconcile(progress)
                threading.Thread(target=self._fill_vectors, args=(engine,), name="spellbook-vectors", daemon=True).start()
            if self.warm_up:
                engine.vectors.matrix()  # the in-memory vectors filtered searches use
            if hasattr(engine, "maintain") and not self._closing.is_set():
                self._maintainer = threading.Thread(target=self._maintain, name="spellbook-maintain", daemon=True)
                self._maintainer.start()
        except BaseException as exc:  # noqa: BLE001 - reported to every caller instead
            log.exception("could not open the index")
            self._open_error = exc
            self._ready.set()

    def _maintain(self) -> None:
        """Expired memories to the archive, overview notes (engine.maintain), until close."""
        while not self._closing.wait(MAINTAIN_SECONDS):
            try:
                self.engine.maintain()
            except Exception:  # a failed round must not end the loop
                log.exception("maintenance failed; will retry")

    def _fill_vectors(self, engine: Any) -> None:
        """Every ``embed_retry_seconds``, embed what was indexed while the embedder was failing."""
        while not self._closing.wait(self.settings.embed_retry_seconds):
            if engine.indexer.missing:
                try:
                    engine.fill_missing_vectors()
                except Exception:  # e.g. the engine closing under it; try again later
                    log.exception("filling in missing vectors failed")

    def close(self) -> None:
        self._closing.set()
        if self._maintainer is not None:
            self._maintainer.join(timeout=30)
        if self._watcher is not None:
            self._watcher.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            with contextlib.suppress(OSError):
                info = json.loads((self.index_dir / "owner.json").read_text())
                if info.get("pid") == os.getpid():
                    (self.index_dir / "owner.json").unlink()
        if self.engine is not None:
            self.engine.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    # --- calls --------------------------------------------------------------------------------
    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Run an engine method here (owner) or in the owner process (follower)."""
        if method not in METHODS:
            raise ValueError(f"unknown method {method}")
        params = dict(params or {})
        if method == "scribe" and self.settings.session_id and not params.get("session"):
            params["session"] = self.settings.session_id  # this client's session (Claude Code's env)
        # context/user are the call's scope (spellbook/scope.py), resolved here against this
        # process's settings: a follower's client may be scoped differently from the owner's.
        scope = resolve(params.pop("context", None), params.pop("user", None), self.settings.context, self.settings.user)
        if scope:
            params[SCOPE_KEY] = {"context": scope.context, "user": scope.user}
        deadline = time.monotonic() + HANDOVER_SECONDS
        while True:
            if self.role == "owner":
                return self._call_local(method, params)
            try:
                return self._call_remote(method, params, timeout)
            except (OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise IndexUnavailableError(
                        f"The process that owns the index at {self.index_dir} is not answering ({exc}). "
                        "Retry in a moment; if it persists, restart your MCP client."
                    ) from exc
                time.sleep(0.1)  # owner restarting or handing over: retry

    def _call_local(self, method: str, params: dict[str, Any]) -> Any:
        if not self._ready.wait(OPEN_TIMEOUT_SECONDS):
            raise IndexUnavailableError("The index is still opening; retry in a few seconds.")
        if self._open_error is not None:
            raise IndexUnavailableError(f"The index could not be opened: {self._open_error}") from self._open_error
        params = dict(params)
        with scoped(Scope(**params.pop(SCOPE_KEY, {}))):
            return getattr(self.engine, method)(**params)

    def _call_remote(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        info = json.loads((self.index_dir / "owner.json").read_text())
        with socket.create_connection(("127.0.0.1", int(info["port"])), timeout=5) as sock:
            sock.settimeout(timeout)
            request = {"token": info["token"], "method": method, "params": params}
            sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")
            data = _read_line(sock)
        if not data:
            raise ConnectionError("owner closed the connection")
        reply = json.loads(data)
        if reply.get("error") == "bad token":
            raise ConnectionError("owner.json is stale (token rejected)")
        if "error" in reply:
            raise RemoteError(reply["error"])
        return reply["result"]

    # --- serving followers --------------------------------------------------------------------
    def _serve_followers(self) -> None:
        hub = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    request = json.loads(self.rfile.readline())
                    if not hmac.compare_digest(str(request.get("token", "")), hub._token):
                        reply: dict[str, Any] = {"error": "bad token"}
                    else:
                        reply = {"result": hub._call_local(request["method"], request.get("params") or {})}
                except SpellbookError as exc:
                    reply = {"error": str(exc)}
                except Exception as exc:  # noqa: BLE001
                    log.exception("forwarded call failed")
                    reply = {"error": f"Internal error in the owning process: {type(exc).__name__}: {exc}"}
                self.wfile.write(json.dumps(reply, ensure_ascii=False, default=str).encode() + b"\n")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="spellbook-rpc", daemon=True).start()
        info = {"pid": os.getpid(), "port": self._server.server_address[1], "token": self._token}
        target = self.index_dir / "owner.json"
        tmp = self.index_dir / f".owner.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        os.replace(tmp, target)


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        data = sock.recv(65536)
        if not data:
            break
        chunks.append(data)
        if data.endswith(b"\n"):
            break
    return b"".join(chunks)


def _try_lock(fd: int, blocking: bool) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        mode = msvcrt.LK_LOCK if blocking else msvcrt.LK_NBLCK
        while True:
            try:
                msvcrt.locking(fd, mode, 1)
                return True
            except OSError:
                if not blocking:
                    return False
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
