"""The engine: builds the services over one vault and index, and exposes what the tools call.

Each concern is a service in its own module, given what it needs in its constructor
(``engine/memories.py``, ``search.py``, ``structure.py``, ``lifecycle.py``, ``links.py``,
``health.py``, ``history.py``, ``exchange.py``, ``maintenance.py``, ``merging.py``, ``graph.py``);
the scope rule, the privacy filter and the id lookup live once, in ``access.py``; the activity log
(``activity.py``) and the memo of whole-vault answers (``memo.py``) are shared components.
``Engine`` owns the shared components (vault store, catalog, vectors, embedder, indexer, git
committer, activity log, memo), wires the services in the one order their needs allow, and
exposes every operation of the one table (``engine/operations.py``) under its name, which the MCP
tools, the CLI and the hub call. It holds no logic of its own beyond ``maintain``, which runs the
lifecycle's upkeep and then the memo's refresh.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

from spellbook.config import Settings
from spellbook.embedders.base import Embedder
from spellbook.embedders.registry import load_embedder
from spellbook.engine.access import Access, Readiness
from spellbook.engine.activity import FILE_NAME as ACTIVITY_FILE
from spellbook.engine.activity import ActivityLog
from spellbook.engine.exchange import Exchange
from spellbook.engine.graph import Graph
from spellbook.engine.health import Health
from spellbook.engine.history import History, Recorder
from spellbook.engine.lifecycle import Lifecycle
from spellbook.engine.links import Links
from spellbook.engine.maintenance import Maintenance
from spellbook.engine.memo import Memo
from spellbook.engine.memories import Memories
from spellbook.engine.merging import Merging
from spellbook.engine.operations import OPERATIONS
from spellbook.engine.search import Search
from spellbook.engine.structure import Structure
from spellbook.engine.teamsync import TeamSync
from spellbook.errors import IndexUnavailableError, VaultPathError
from spellbook.git.committer import Committer
from spellbook.index.catalog import Catalog
from spellbook.index.indexer import Indexer
from spellbook.vault.store import Vault

log = logging.getLogger(__name__)


class Engine:
    def __init__(
        self, settings: Settings, embedder: Embedder | None = None, vectors: Any | None = None, load_model: bool = False
    ) -> None:
        self.settings = settings
        # Writes make their temp files in the index folder when it is in the vault (the default): its
        # files take the vault's own SELinux label and default ACLs, as they would beside the note.
        inside = settings.vault_dir in settings.index_path.parents
        self.vault = Vault(settings.vault_dir, temp_dir=settings.index_path / "tmp" if inside else None)
        if not self.vault.root.is_dir():
            raise VaultPathError(f"Vault {self.vault.root} does not exist; run `spellbook init {self.vault.root}`.")
        settings.index_path.mkdir(parents=True, exist_ok=True)
        self._owns_embedder = embedder is None
        self.embedder = embedder or load_embedder(settings)
        self._loading = _start_loading(self.embedder) if load_model else None  # while Chroma opens
        self.vectors = vectors if vectors is not None else _open_vectors(settings, self.vault.root)
        self.catalog = Catalog(settings.index_path / "catalog.sqlite3")
        self.access = Access(settings, self.catalog)  # privacy settings are checked here
        self.indexer = Indexer(self.vault, self.catalog, self.vectors, self.embedder)
        self.git = Committer(self.vault.root, settings.git_commit)
        self.readiness = Readiness()
        self.progress = self.readiness.progress

        base = (self.vault, self.catalog, self.indexer)
        self.activity_log = ActivityLog(settings.index_path / ACTIVITY_FILE, self.access.scope, settle=self.git.flush)
        recorder = Recorder(self.git, self.activity_log)
        self.structure = Structure(*base, self.access, self.readiness, recorder)
        self.lifecycle = Lifecycle(settings, *base, self.access, self.git, recorder, self.structure)
        self.team = TeamSync(settings, self.indexer, self.git)
        self.maintenance = Maintenance(
            settings,
            self.vault,
            self.catalog,
            self.vectors,
            self.embedder,
            self.indexer,
            self.git,
            self.readiness,
            self.lifecycle,
            self.team,
        )
        self.search = Search(
            settings,
            self.vault,
            self.catalog,
            self.vectors,
            self.embedder,
            self.indexer,
            self.access,
            self.readiness,
            self.maintenance,
        )
        self.memories = Memories(settings, *base, self.access, self.readiness, recorder, self.search, self.structure)
        self.links = Links(*base, self.access, self.readiness, recorder, self.search)
        self.merging = Merging(settings, *base, self.access, self.readiness, recorder, self.links)
        self.memo = Memo(
            self.catalog.changes, self.access
        )  # whole-vault answers (health, graph), kept until the index changes
        self.health = Health(settings, self.catalog, self.vectors, self.access, self.readiness, self.memo)
        self.history_service = History(*base, self.git, self.access, recorder)
        self.exchange = Exchange(settings, *base, self.git, self.access, self.readiness, self.activity_log)
        self.graph_service = Graph(self.catalog, self.access, self.readiness, self.memo)

        # Every operation under its own name (engine/operations.py): what the tools, the CLI and the hub call.
        for op in OPERATIONS.values():
            setattr(self, op.name, getattr(getattr(self, op.service), op.method))
        self.prepare, self.start = self.maintenance.prepare, self.maintenance.start  # the owner's, before any call
        self.write_overviews = self.structure.write_overviews

    def maintain(self, force: bool = False) -> None:
        """The owner's periodic upkeep (server/hub.py): the lifecycle's, then the memo's refresh."""
        self.lifecycle.maintain(force)
        self.memo.refresh()

    def close(self) -> None:
        self.indexer.close()  # lets the write under way finish, refuses new ones
        self.git.close()  # pending commits first
        self.vectors.close()  # writes what is left behind...
        self.indexer.confirm_stored()  # ...so the catalog may say so (index/pending.py)
        self.catalog.close()
        if self._loading is not None:
            self._loading.join()
        if self._owns_embedder:
            self.embedder.close()  # a network embedder's connections


def _start_loading(embedder: Embedder) -> threading.Thread:
    """Load the model in a thread while the engine opens the rest, for a command that will embed (a
    first index, an import): the default model reads its weights largely outside the GIL, so it
    loads beside Chroma's import rather than after it (measured: 1.0 -> 0.85 s for the two)."""

    def load() -> None:
        try:
            embedder.warm_up()
        except Exception:
            log.debug("loading the embedder ahead failed", exc_info=True)

    thread = threading.Thread(target=load, name="spellbook-load", daemon=True)
    thread.start()
    return thread


def _open_vectors(settings: Settings, vault_root: Path) -> Any:
    from spellbook.index.chroma import VectorIndex

    if not settings.chroma_url:
        return VectorIndex.embedded(settings.index_path / "chroma")
    # One collection per vault on a shared server, named from the vault's absolute path.
    name = "spellbook-" + hashlib.sha1(str(vault_root).encode("utf-8")).hexdigest()[:16]
    try:
        return VectorIndex.server(settings.chroma_url, name)
    except Exception as exc:  # connection refused, bad URL, incompatible server
        raise IndexUnavailableError(
            f"Cannot reach the Chroma server at {settings.chroma_url} ({exc}). Start it with "
            "`chroma run --path DIR --host 127.0.0.1 --port PORT`, or unset SPELLBOOK_CHROMA_URL to use the "
            "embedded index."
        ) from exc


def wipe_index(settings: Settings) -> None:
    """Delete the derived index folder's data (never the vault). Used by `index --rebuild`."""
    for name in ("chroma", "catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        target = settings.index_path / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
