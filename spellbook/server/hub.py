"""One index owner per vault; every other process forwards to it.

Claude Code, a second Claude Code and Claude Desktop each start their own ``spellbook serve``
on the same vault, and two processes must never open one embedded Chroma folder (it loses
vectors; chroma-core/chroma#961). So:

* The first process to take an exclusive lock on ``<index>/owner.lock`` is the **owner**: it
  opens the engine (Chroma, catalog, model), runs the watcher, and answers the others on the
  channel of server/channel.py: a Unix socket ``<index>/owner.sock`` (mode 0600), or loopback TCP
  with a random token where there is none; ``<index>/owner.json`` (mode 0600) says which.
* Every other process is a **follower**: it forwards each call to the owner, and waits on the
  lock in a background thread. The OS releases the lock when the owner exits, however it
  exits (even kill -9), so the first follower to get it becomes the new owner, and the rest
  reconnect to it. Calls in flight during a hand-over are retried for up to ``HANDOVER_SECONDS``.
* Nothing outlives its client: each process exits when its own client closes stdio.
* With ``SPELLBOOK_SYNC_SECONDS``, the owner also syncs the vault with its git remote on a timer
  and soon after each write (``sync``, docs/sync.md); a ``spellbook sync`` asks it to.

The CLI (``spellbook search``, ``index``, ``stats``) goes through the same hub, so it never opens
the index under a running server either.

A call names an operation of the one table (spellbook/engine/operations.py); the hub sends it
through its transport, chosen when it takes its role (``start``, or a takeover), never per call:
``Local`` runs it in this process through the door every call leaves the owner by (the scope
set, a conflict's text scrubbed), ``Forward`` sends it to the owner over the channel.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from spellbook.engine.operations import OPERATIONS, operation
from spellbook.errors import FileChangedError, IndexUnavailableError, RemoteError
from spellbook.files import atomic_output
from spellbook.scope import Actor, Scope, acting, actor, resolve, scoped
from spellbook.server import channel
from spellbook.vault.fields import new_id

if TYPE_CHECKING:  # not imported at run time: a hook forwarding to a running owner stays light (sessions/hook.py)
    from spellbook.config import Settings

log = logging.getLogger(__name__)

SCOPE_KEY = "_scope"
ACTOR_KEY = "_actor"
HANDOVER_SECONDS = 30.0
MAINTAIN_SECONDS = 2.0  # the owner calls engine.maintain() this often (the sweep has its own interval)
SYNC_AFTER_WRITE_SECONDS = 1.0  # with a sync timer: a round this long after the last of a run of writes
OPEN_TIMEOUT_SECONDS = 300.0

__all__ = ["Forward", "Hub", "Local", "RemoteError", "Transport", "owner_pid"]


class Transport(Protocol):
    """How a hub's calls reach the engine: ``send`` returns the answer or raises the engine's error,
    or ``channel.Unreachable`` when the owner cannot be asked (the hub retries then)."""

    def send(self, method: str, params: dict[str, Any], timeout: float | None) -> Any: ...


class Local:
    """The owner's transport: the call runs here, through ``run`` (``Hub._call_local``, the door)."""

    def __init__(self, run: Callable[[str, dict[str, Any]], Any]) -> None:
        self.run = run

    def send(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        return self.run(method, params)


class Forward:
    """A follower's transport: the call goes to the owner of ``index_dir`` over the channel."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir

    def send(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        return channel.request(self.index_dir, method, params, timeout)


class Hub:
    def __init__(
        self,
        settings: Settings,
        watch: bool | None = None,
        engine_factory: Callable[..., Any] | None = None,
        reconcile_on_open: bool = True,
        warm_up: bool = True,
        load_model: bool = False,
        open_delay: float = 0.0,
        transport: str = "auto",
        client: str | None = None,
    ):
        self.settings = settings
        self.watch = settings.watch if watch is None else watch
        self.reconcile_on_open = reconcile_on_open
        self.warm_up = warm_up
        self.load_model = load_model  # start loading the model as the engine opens (a command that embeds)
        self.open_delay = open_delay
        self._engine_factory = engine_factory
        self.index_dir = settings.index_path
        self.role = "starting"
        self._transport: Transport = Forward(self.index_dir)  # a hub still starting asks an owner, if any
        self.engine: Any = None
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self._lock_fd: int | None = None
        self.transport = transport  # "auto" (Unix socket, else TCP) or "tcp"
        self.client = client  # who calls through this hub when the call does not say (e.g. "cli")
        self._channel: channel.ChannelServer | None = None
        self._watcher: Any = None
        self._maintainer: threading.Thread | None = None
        self._syncer: threading.Thread | None = None
        self._closing = threading.Event()

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
        self._transport = Local(self._call_local)
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
            engine = factory(self.settings, load_model=True) if self.load_model else factory(self.settings)
            engine.prepare()
            self.engine = engine
            if self.watch and not self._closing.is_set():
                # Watch before the first reconcile, so a change made while it runs is not missed.
                from spellbook.index.watcher import VaultWatcher

                self._watcher = VaultWatcher(engine.indexer, reconcile=engine.reconcile)
                self._watcher.start()
            self._serve_followers()
            self._ready.set()
            if self.warm_up and hasattr(engine, "catalog"):
                # The in-memory keyword index, on a thread beside the model's load; it takes in
                # the reconcile's writes as they commit.
                engine.catalog.keywords.load()
            if self.warm_up:
                engine.embedder.warm_up()  # load the model now rather than on the first query (a call waits for it)
            if self.reconcile_on_open:
                engine.reconcile(progress)
                threading.Thread(
                    target=self._fill_vectors, args=(engine,), name="spellbook-vectors", daemon=True
                ).start()
            if self.warm_up:
                engine.vectors.matrix()  # the in-memory vectors filtered searches use
                if hasattr(engine.vectors, "rest_after_start"):
                    engine.vectors.rest_after_start()  # read once; idle until a write
            if hasattr(engine, "maintain") and not self._closing.is_set():
                maintainer = threading.Thread(target=self._maintain, name="spellbook-maintain", daemon=True)
                maintainer.start()  # before close() can see it: joining a thread not yet started raises
                self._maintainer = maintainer
            if self.settings.sync_seconds and self.client != "cli" and not self._closing.is_set():
                syncer = threading.Thread(target=self._sync_timer, name="spellbook-sync", daemon=True)
                syncer.start()
                self._syncer = syncer
        except BaseException as exc:
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

    def _sync_timer(self) -> None:
        """``SPELLBOOK_SYNC_SECONDS``: a sync round that often, and soon after each run of writes
        (a commit the engine made, ``SYNC_AFTER_WRITE_SECONDS`` after the last one), until close."""
        every = float(self.settings.sync_seconds or 0)
        git = self.engine.git
        seen, after_write = git.counts["commits"], None
        due = time.monotonic()  # a first round at once: what others wrote while this one was away
        while not self._closing.wait(0.2):
            now = time.monotonic()
            if git.counts["commits"] != seen:
                seen, after_write = git.counts["commits"], now + SYNC_AFTER_WRITE_SECONDS
            if now < due and (after_write is None or now < after_write):
                continue
            try:
                self.engine.sync()
            except Exception:  # a failed round must not end the loop
                log.exception("sync failed; will retry")
            seen, after_write, due = git.counts["commits"], None, time.monotonic() + every

    def _fill_vectors(self, engine: Any) -> None:
        """Every ``RETRY_SECONDS``, embed what was indexed while the embedder was failing."""
        from spellbook.embedders import remote

        while not self._closing.wait(remote.RETRY_SECONDS):
            if engine.indexer.missing:
                try:
                    engine.fill_missing_vectors()
                except Exception:  # e.g. the engine closing under it; try again later
                    log.exception("filling in missing vectors failed")

    def close(self) -> None:
        self._closing.set()
        if self._maintainer is not None:
            self._maintainer.join(timeout=30)
        if self._syncer is not None:
            self._syncer.join(timeout=60)
        if self._watcher is not None:
            self._watcher.stop()
        if self._channel is not None:
            self._channel.close()
            with contextlib.suppress(OSError, ValueError):
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
        """Run an operation (engine/operations.py) here (owner) or in the owner process (follower)."""
        op = operation(method)  # UnknownOperationError for a name the table does not hold
        params = dict(params or {})
        if op.creates and self.settings.session_id and not params.get("session"):
            params["session"] = self.settings.session_id  # this client's session (Claude Code's env)
        # context/user are the call's scope (spellbook/scope.py), resolved here against this
        # process's settings: a follower's client may be scoped differently from the owner's.
        scope = resolve(
            params.pop("context", None), params.pop("user", None), self.settings.context, self.settings.user
        )
        if scope:
            params[SCOPE_KEY] = {"context": scope.context, "user": scope.user}
        who = actor()  # the MCP client (server/tools.py), else this process's own label
        params[ACTOR_KEY] = {"client": who.client or self.client, "session": who.session or self.settings.session_id}
        if op.creates:  # a retry after the owner died must not write the note twice
            params.setdefault("_id", new_id())
        deadline = time.monotonic() + HANDOVER_SECONDS
        while True:
            try:  # the transport of the moment: a takeover makes this process the owner meanwhile
                return self._transport.send(op.name, params, timeout)
            except channel.Unreachable as exc:  # the owner's own errors are raised as they are
                if time.monotonic() > deadline:
                    raise IndexUnavailableError(
                        f"The process that owns the index at {self.index_dir} is not answering ({exc}). "
                        "Retry in a moment; if it persists, restart your MCP client."
                    ) from exc
                time.sleep(0.1)  # owner restarting or handing over: retry

    def _call_local(self, method: str, params: dict[str, Any]) -> Any:
        """The door every call leaves the owner by, its own and its followers': run in the call's
        scope and as its actor, and a changed file's text scrubbed (``Access.conflict``)."""
        if not self._ready.wait(OPEN_TIMEOUT_SECONDS):
            raise IndexUnavailableError("The index is still opening; retry in a few seconds.")
        if self._open_error is not None:
            raise IndexUnavailableError(f"The index could not be opened: {self._open_error}") from self._open_error
        params = dict(params)
        with scoped(Scope(**params.pop(SCOPE_KEY, {}))), acting(_actor_of(params.pop(ACTOR_KEY, None))):
            try:
                return getattr(self.engine, method)(**params)
            except FileChangedError as exc:  # the one door: the file's text is scrubbed as it leaves the owner
                raise self.engine.access.conflict(exc) from None

    # --- serving followers --------------------------------------------------------------------
    def _serve_followers(self) -> None:
        self._channel = channel.ChannelServer(self.index_dir, self._call_local, frozenset(OPERATIONS), self.transport)
        info = {"pid": os.getpid(), **self._channel.start()}
        with atomic_output(self.index_dir / "owner.json", mode=0o600) as file:  # not a note: no crash point
            file.write(json.dumps(info).encode())


def _actor_of(value: Any) -> Actor:
    """The client and session a forwarded call carries (short strings, or nothing)."""
    if not isinstance(value, dict):
        return Actor()
    client, session = value.get("client"), value.get("session")
    return Actor(client[:100] if isinstance(client, str) else None, session[:100] if isinstance(session, str) else None)


def owner_pid(index_dir: Path) -> int | None:
    """The pid of the process that owns the index at ``index_dir`` now, None when none does, -1 when
    one holds the lock but has not published its pid yet (it is starting)."""
    try:
        fd = os.open(index_dir / "owner.lock", os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        if _try_lock(fd, blocking=False):
            return None  # free (closing the descriptor releases it again)
        try:
            pid = json.loads((index_dir / "owner.json").read_text()).get("pid")
        except (OSError, ValueError):
            return -1
        return pid if isinstance(pid, int) else -1
    finally:
        os.close(fd)


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
