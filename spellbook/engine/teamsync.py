"""Team memory over git: ``sync`` runs one round with the vault's remote (git/sync.py), then
brings the index level with what arrived, and keeps the last result for ``stats``, ``doctor``
and the web view. The owner's timer (server/hub.py) calls it every ``SPELLBOOK_SYNC_SECONDS``
and soon after each write. The rules are in docs/sync.md.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from spellbook.config import Settings
from spellbook.git.committer import Committer
from spellbook.git.repo import GitFailed
from spellbook.git.sync import Syncer, SyncFailed
from spellbook.index.indexer import Indexer
from spellbook.vault.note import now_iso
from spellbook.vault.paths import is_ignored

log = logging.getLogger(__name__)


class TeamSync:
    """Sync rounds with the vault's git remote, and their record."""

    def __init__(self, settings: Settings, indexer: Indexer, git: Committer) -> None:
        self.indexer = indexer
        self.syncer = Syncer(git)  # the remote named origin
        self._lock = threading.Lock()
        self.record: dict[str, Any] = {
            "remote": self.syncer.remote,
            "every_seconds": settings.sync_seconds,
            "running": False,
            "rounds": 0,
            "failures": 0,
            "last": None,
            "last_success_at": None,
        }

    def recover(self) -> None:
        """Finish a round a killed process left half way (the owner's start; the reconcile that
        follows indexes what it wrote)."""
        try:
            self.syncer.recover()
        except (GitFailed, OSError) as exc:
            log.warning("sync: could not finish the round a stopped process left: %s", exc)

    def sync(self) -> dict[str, Any]:
        """One round: commit what is pending, fetch, merge, push; then index what arrived. The answer
        says ``in_sync`` (the branch and the remote's at one commit) or, in ``error``, why not."""
        started = time.perf_counter()
        self.record["running"] = True
        try:
            with self._lock:
                try:
                    outcome = self.syncer.round()
                except SyncFailed as exc:
                    result: dict[str, Any] = {"in_sync": False, "error": str(exc), "kind": exc.kind}
                except GitFailed as exc:
                    result = {"in_sync": False, "error": f"git failed: {exc}", "kind": "git"}
                else:
                    notes = [p for p in outcome.changed if not is_ignored(p)]
                    if notes:
                        self.indexer.sync_paths(notes)  # the watcher would too, later: read-your-sync
                    result = outcome.data()
        finally:
            self.record["running"] = False
        result["seconds"] = round(time.perf_counter() - started, 3)
        result["at"] = now_iso()
        self.record["rounds"] += 1
        if result.get("error"):
            self.record["failures"] += 1
            log.warning("sync: %s", result["error"])
        else:
            self.record["last_success_at"] = result["at"]
        self.record["last"] = result
        return result

    def status(self) -> dict[str, Any]:
        return {**self.record, "phase": self.syncer.phase}
