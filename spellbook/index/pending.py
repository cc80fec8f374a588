"""The files whose vectors no living process can vouch for, so that ``doctor`` tells work a killed
owner left pending from drift (docs/architecture.md, "Crash safety and recovery").

A batch's catalog rows commit before its vectors reach Chroma (they go behind the reply), so a
``kill -9`` in between leaves chunks without a vector, which the next start embeds again. A vector
that disappears behind the catalog's back looks the same in the catalog and in Chroma. So each
file's rows are written with a mark naming the process that wrote them (``session``), in the same
transaction (table ``unconfirmed``, one row a file). The owner clears its marks when it closes with
every vector written (keeping the files whose chunks still wait for the embedder), and a start takes
over the marks of dead sessions: cleared where every vector is there, kept for its fill of the rest.
A mark of another session is work pending; a chunk of the running owner waits only while it is in
the indexer's ``missing``.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import threading
from collections.abc import Iterable

log = logging.getLogger(__name__)


class PendingVectors:
    """Marks on the catalog's connection: ``mark``/``unmark`` run inside its write transaction."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock
        self.session = secrets.token_hex(8)  # this process's catalog (a restart is a new session)

    def mark(self, paths: Iterable[str]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO unconfirmed VALUES (?, ?)", [(p, self.session) for p in paths])

    def unmark(self, path: str) -> None:
        self._db.execute("DELETE FROM unconfirmed WHERE path = ?", (path,))

    def marks(self) -> dict[str, str]:
        """path -> the session that wrote it and did not see its vectors stored."""
        with self._lock:
            return dict(self._db.execute("SELECT path, session FROM unconfirmed").fetchall())

    def settle(self, mine: bool, keep: set[str]) -> None:
        """Clear the marks of this session (``mine``: at a close with every vector written) or of the
        dead ones (at a start, which has just compared catalog and vectors), except the files in
        ``keep`` (chunks still without a vector), which this session takes over."""
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    rows = self._db.execute("SELECT path, session FROM unconfirmed").fetchall()
                    ours = [p for p, s in rows if (s == self.session) == mine]
                    done = [(p,) for p in ours if p not in keep]
                    self._db.executemany("DELETE FROM unconfirmed WHERE path = ?", done)
                    self.mark(p for p in ours if p in keep)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:  # the marks stay: doctor calls their files' missing vectors pending
            log.warning("could not record which vectors are stored: %s", exc)
