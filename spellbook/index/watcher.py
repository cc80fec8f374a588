"""Watch the vault (watchdog) and sync what changed, debounced and batched.

File events mark paths dirty; a quiet period of ``debounce`` seconds flushes them in one
``sync_paths`` call. Directory events (a folder moved, created or deleted, as in a git checkout)
ask for a whole-vault ``reconcile`` instead, which is cheap when little changed: it compares
mtime and size first and hashes only what moved.

A file still open for writing is not read yet. An editor that saves in place (Obsidian among them)
truncates the file, then writes it, then closes it; read between the two, the note would be
indexed empty until the write's own event, and a save that stalls there (a slow disk, a network
folder) would leave it so for the stall. Where the file system reports closes (inotify, Linux), a
path modified since its last close waits for that close, up to ``hold`` seconds (a file kept open,
like a log, is indexed all the same); elsewhere, the debounce is all there is.

Folders Spellbook never indexes (the index's own ``.spellbook``, ``.git``, ``.obsidian``...: see
``IGNORED_DIRS``) are not watched at all where watchdog's inotify allows it: a scribe's catalog
and Chroma writes were half the events the watcher's three threads passed along to be dropped, and
a git commit writes dozens of files under ``.git``.

A path a writer has claimed (an import indexes the files it writes itself: index/claims.py) is
held until its release, then synced only if the file on disk is not what the index holds, and a
folder it claimed is no reason for a whole-vault reconcile when it is created: without that, an
import's files were read and embedded twice, by the import and here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from inspect import signature
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from spellbook.index.indexer import Indexer, file_changed
from spellbook.vault.paths import IGNORED_DIRS, is_ignored

log = logging.getLogger(__name__)
# watchdog's inotify adds the watch of a new folder twice when files appear in it at once (an import
# making folders) and says so in a RuntimeWarning of a few KB on the server's stderr; the second
# watch replaces the first with the same callback, so nothing is lost.
warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning, module="watchdog")

DEBOUNCE_SECONDS = 0.25  # a quiet period this long after a change flushes the changes around it
MAX_DELAY = 2.0  # seconds a change waits at most for the events around it to quiet down
HOLD_SECONDS = 5.0  # seconds a file open for writing waits at most for its close
# The events the watcher acts on. Not a file opened or closed unwritten (every read of a note, the
# indexer's own among them) nor a folder's "modified" beside each change in it: inotify is not
# even asked for the first two, and watchdog makes no event object for any of them.
EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


class VaultWatcher(FileSystemEventHandler):
    def __init__(
        self,
        indexer: Indexer,
        debounce: float | None = None,
        reconcile: Callable[[], object] | None = None,
        hold: float = HOLD_SECONDS,
    ) -> None:
        self.indexer = indexer
        self._reconcile = reconcile or indexer.reconcile
        self.root = indexer.vault.root
        self.debounce = DEBOUNCE_SECONDS if debounce is None else debounce
        self.hold = hold
        self._dirty: set[str] = set()
        self._writing: dict[str, float] = {}  # path -> when it was first modified since its last close
        self._claimed: set[str] = set()  # dirty paths held for a writer's claim (synced if changed)
        self._full = False
        self._cond = threading.Condition()
        self._stopped = False
        self._last_event = 0.0
        self._observer = _observer()
        self._closes = _reports_closes(self._observer)
        self._worker = threading.Thread(target=self._run, name="spellbook-watcher", daemon=True)

    def start(self) -> None:
        self._observer.schedule(self, str(self.root), recursive=True, event_filter=EVENTS)
        self._observer.start()
        self._worker.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._observer.stop()
        self._observer.join(timeout=5)
        self._worker.join(timeout=30)

    # watchdog calls this from its own thread
    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path] + ([event.dest_path] if getattr(event, "dest_path", "") else [])
        relevant, claims = False, self.indexer.claims
        with self._cond:
            for raw in paths:
                path = self._relative(raw)
                if path is None:
                    continue
                if event.is_directory:  # a folder a writer made for its claimed files is no news
                    if event.event_type != "modified" and not (event.event_type == "created" and path in claims):
                        self._full = relevant = True
                elif not is_ignored(path):
                    self._dirty.add(path)
                    relevant = True
                    if event.event_type == "modified":
                        self._writing.setdefault(path, time.monotonic())
                    elif event.event_type in ("closed", "deleted", "moved"):
                        self._writing.pop(path, None)
            if relevant:
                self._last_event = time.monotonic()
                self._cond.notify()

    def _relative(self, raw: str | bytes) -> str | None:
        text = raw.decode() if isinstance(raw, bytes) else raw
        try:
            path = Path(text).relative_to(self.root).as_posix()
        except ValueError:
            return None
        if path == "." or any(part in IGNORED_DIRS for part in path.split("/")):
            return None
        return path

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._dirty or self._full or self._stopped):
                    self._cond.wait()
                if self._stopped and not (self._dirty or self._full):
                    return
                # Debounce: wait until no relevant event arrived for `debounce` seconds, so a
                # burst (a git checkout, an editor's save) is synced once, after it ends; but no
                # longer than MAX_DELAY, or a steady stream of events (agents writing through the
                # owner) would hold a person's edit back until the server exits.
                first = time.monotonic()
                while not self._stopped:
                    now = time.monotonic()
                    quiet = now - self._last_event
                    if quiet >= self.debounce or now - first >= MAX_DELAY:
                        break
                    self._cond.wait(min(self.debounce - quiet, MAX_DELAY - (now - first)))
                if self._stopped and not (self._dirty or self._full):
                    return
                held = self._held() if not self._stopped else {}
                dirty, full = self._dirty - held.keys(), self._full
                self._dirty, self._full = set(held), False
                settled, self._claimed = dirty & self._claimed, self._claimed - dirty
                if not (dirty or full):  # every change is a file still being written: wait for a close
                    self._cond.wait(min(held.values()) - time.monotonic())
                    continue
            try:  # on stop, what is still pending is synced first (the index is closed after)
                if full:
                    self._reconcile()
                else:
                    paths = [p for p in sorted(dirty) if p not in settled or self._changed(p)]
                    if paths:
                        self.indexer.sync_paths(paths)
            except Exception:
                log.exception("watcher: sync failed; will retry on the next change")

    def _held(self) -> dict[str, float]:
        """The dirty paths still open for writing, each with the time its hold runs out, and the
        claimed ones, looked at again after a debounce. A hold that ran out is forgotten: the file
        is read now, and its next change waits again."""
        now = time.monotonic()
        held: dict[str, float] = {}
        if self._closes:
            for path in [p for p, since in self._writing.items() if since + self.hold <= now]:
                del self._writing[path]
            held = {path: self._writing[path] + self.hold for path in self._dirty if path in self._writing}
        claims = self.indexer.claims
        if len(claims):
            claimed = [path for path in self._dirty if path in claims]
            self._claimed.update(claimed)
            held.update((path, min(held.get(path, now + self.debounce), now + self.debounce)) for path in claimed)
        return held

    def _changed(self, path: str) -> bool:
        """Whether a path released by its claim is not what the index holds (read it again)."""
        return file_changed(self.indexer.vault, self.indexer.catalog.file(path), path)


def _observer() -> BaseObserver:
    """watchdog's observer for this platform; on Linux, one whose inotify watches leave out the
    folders named in ``IGNORED_DIRS`` (and all below them). Needs watchdog 7's inotify classes; any
    other observer watches everything, and the events from those folders are dropped on arrival."""
    try:
        from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
    except ImportError:  # not Linux
        return Observer()
    if not (
        hasattr(InotifyWatchGroup, "_add_callback")
        and isinstance(Observer, type)
        and issubclass(Observer, InotifyObserver)
        and "inotify_fd" in signature(InotifyEmitter).parameters
    ):
        return Observer()

    class Group(InotifyWatchGroup):
        def _add_callback(self, path: bytes) -> None:  # every folder watched goes through here
            below = path[len(self.path) :].split(b"/") if path.startswith(self.path + b"/") else []
            if any(os.fsdecode(part) in IGNORED_DIRS for part in below):
                return
            super()._add_callback(path)

    class Emitter(InotifyEmitter):
        def on_thread_start(self) -> None:  # InotifyEmitter's, with the group above
            self._inotify = Group(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
            )

    class Pruned(InotifyObserver):
        def __init__(self) -> None:
            super().__init__()
            self._emitter_class = Emitter

    return Pruned()


def _reports_closes(observer: object) -> bool:
    """Whether the observer tells when a file opened for writing is closed (inotify does)."""
    try:
        from watchdog.observers.inotify import InotifyObserver
    except ImportError:  # not Linux
        return False
    return isinstance(observer, InotifyObserver)
