"""Maintenance: keeping the derived index equal to the vault, and saying how it is.

``start``/``reconcile`` bring the index up to date (then the lifecycle sweep and overview notes
run), ``check`` compares index and vault without changing anything, ``repair`` and
``rebuild_index`` fix them, ``fill_missing_vectors`` embeds what was indexed while the embedder
was failing, ``probe_embedder`` and ``stats`` report (for ``doctor`` and the ``stats`` tool).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict
from typing import Any

from spellbook.config import Settings
from spellbook.embedders.base import Embedder
from spellbook.engine.access import Readiness
from spellbook.engine.lifecycle import Lifecycle
from spellbook.engine.spend import DAILY_TOKENS, spent
from spellbook.engine.teamsync import TeamSync
from spellbook.errors import EmbedderError, SpellbookError
from spellbook.git.committer import Committer
from spellbook.index.catalog import Catalog
from spellbook.index.indexer import Indexer, Progress, SyncReport
from spellbook.startup.heap import trim_heap
from spellbook.text import mostly_latin
from spellbook.vault.note import quote_number_ids
from spellbook.vault.plain_yaml import YAML12_NUMBER
from spellbook.vault.store import Vault
from spellbook.version import __version__

log = logging.getLogger(__name__)


class Maintenance:
    """Index upkeep and status."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        vectors: Any,
        embedder: Embedder,
        indexer: Indexer,
        git: Committer,
        readiness: Readiness,
        lifecycle: Lifecycle,
        team: TeamSync | None = None,
    ) -> None:
        self.settings = settings
        self.vault = vault
        self.catalog = catalog
        self.vectors = vectors
        self.embedder = embedder
        self.indexer = indexer
        self.git = git
        self.readiness = readiness
        self.lifecycle = lifecycle
        self.team = team  # sync with the git remote (engine/teamsync.py)

    def prepare(self) -> None:
        """Check the index identity; wipe it if it is from another model, chunker or format.
        Remove temp files a killed writer left behind (only the index owner writes), and finish
        the files of a sync round a killed owner left half way."""
        self.vault.remove_stale_temp_files()
        if self.team is not None:
            self.team.recover()
        reason = self.indexer.needs_rebuild()
        if reason:
            log.info("building the index from the vault: %s", reason)
            self.indexer.reset()

    def start(self, progress: Progress | None = None) -> SyncReport:
        """prepare(), then reconcile the index with the vault."""
        self.prepare()
        report = self.reconcile(progress)
        trim_heap()  # what the scan of every file and vector left behind
        return report

    def reconcile(self, progress: Progress | None = None) -> SyncReport:
        def track(done: int, total: int) -> None:
            self.readiness.indexing(done, total)
            if progress:
                progress(done, total)

        self.readiness.indexing(0, 0)
        report = self.indexer.reconcile(track)
        self.lifecycle.maintain(force=True)  # archive what expired, refresh overview notes
        self.readiness.ready(report)
        return report

    def check(self) -> dict[str, Any]:
        """Does the index equal the vault? Compares the ledger with every file (content hashes, also
        of a file whose size and mtime still match) and the catalog with the vector index. Changes
        nothing. What differs is pending when the next start does it: files new, gone or changed
        since they were indexed, the vectors of chunks a killed owner wrote and never saw stored
        (index/pending.py), vectors with no chunk. It is ``drift`` otherwise: a file changed with
        its size and mtime kept, a vector lost behind the catalog's back, another index identity."""
        known = self.catalog.files()
        on_disk = set(self.vault.iter_paths())
        new, gone, changed, unseen = self._files(known, on_disk)
        catalog_ids = self.catalog.all_chunk_ids()
        vector_ids = self.vectors.ids(stored=True)
        missing = catalog_ids - vector_ids
        orphans = len(vector_ids - catalog_ids)
        lost = self._lost(missing, {*new, *gone, *changed})
        identity = self.indexer.needs_rebuild()
        number_ids = self._number_ids()
        return {
            "consistent": not (new or gone or changed or unseen or missing or orphans or identity),
            "drift": bool(unseen or lost or identity),
            "ids_read_as_numbers": number_ids[:50],
            "files_in_vault": len(on_disk),
            "files_indexed": len(known),
            "not_indexed": new[:50],
            "deleted_but_indexed": gone[:50],
            "changed_since_indexed": changed[:50],
            "changed_unseen": unseen[:50],
            "vectors_lost_in": sorted(set(lost.values()))[:50],
            "counts": {
                "not_indexed": len(new),
                "deleted_but_indexed": len(gone),
                "changed": len(changed),
                "changed_unseen": len(unseen),
                "vectors_missing": len(missing),
                "vectors_lost": len(lost),
                "orphan_vectors": orphans,
                "ids_read_as_numbers": len(number_ids),
            },
            "identity_problem": identity,
            "problems": self.catalog.problems()[:50],
        }

    def _files(self, known: dict[str, Any], on_disk: set[str]) -> tuple[list[str], ...]:
        """(not indexed, deleted but indexed, changed, changed unseen): a file unseen changed with
        the size and mtime the ledger has, so no start looks at it again."""
        new = sorted((on_disk - set(known)) | (on_disk & set(self.catalog.incomplete_files())))
        gone = sorted(set(known) - on_disk)
        changed: list[str] = []
        unseen: list[str] = []
        for path in sorted(on_disk & set(known)):
            row = known[path]
            try:
                st = self.vault.scan_stat(path)
            except OSError:
                changed.append(path)
                continue
            same = (row.mtime_ns, row.size) == (st.st_mtime_ns, st.st_size)
            if same and row.problem is not None:
                continue  # skipped or warned when indexed: read again when it changes
            try:
                if self.vault.read(path).version != row.version:
                    (unseen if same else changed).append(path)
            except (OSError, SpellbookError):
                if row.problem is None:
                    (unseen if same else changed).append(path)
        return new, gone, changed, unseen

    def _lost(self, missing: set[str], files_behind: set[str]) -> dict[str, str]:
        """Chunk id -> path of the chunks without a vector that no one is embedding: not of a file
        the next start indexes again, not waiting for the embedder here, not written by a session
        that ended before it saw their vectors stored (index/pending.py)."""
        marks, mine = self.catalog.pending.marks(), self.catalog.pending.session
        rows = self.catalog.chunks(sorted(missing - self.indexer.missing))
        return {
            cid: row.path
            for cid, row in rows.items()
            if row.path not in files_behind and marks.get(row.path, mine) == mine
        }

    def repair(self, progress: Progress | None = None) -> dict[str, Any]:
        """Make the index equal to the vault again (a reconcile, plus re-embedding lost vectors),
        then quote the ids YAML 1.2 reads as numbers."""
        if self.indexer.needs_rebuild():
            report = self.rebuild_index(progress)
            return {**report, "quoted_ids": self._quote_number_ids()}
        missing = sorted(self.catalog.all_chunk_ids() - self.vectors.ids(stored=True))
        unseen = self._files(self.catalog.files(), set(self.vault.iter_paths()))[3]
        # Vectors lost under a catalog that thinks they exist, files changed behind the ledger's
        # size and mtime: the catalog forgets those files, and the reconcile indexes them again.
        paths = sorted({c.path for c in self.catalog.chunks(missing).values()} | set(unseen))
        if paths:
            self.catalog.remove(paths)
        self.reconcile(progress)
        quoted = self._quote_number_ids()
        return {**self.check(), "quoted_ids": quoted}

    def _number_ids(self) -> list[str]:
        """Notes whose frontmatter writes an id unquoted that YAML 1.2 reads as a number (Spellbook
        wrote them so before it quoted them for YAML 1.2: ``id: 123e4567``, about one id in 1,300).
        The ids come from the catalog; only a file whose id YAML 1.2 reads as a number is read."""
        maybe, _ = self.catalog.list_notes("note_id GLOB '[-+.0-9]*'", [], 1 << 30, 0)
        found = []
        for row in maybe:
            if YAML12_NUMBER.match(row.note_id):
                try:
                    if quote_number_ids(self.vault.read(row.path).text) is not None:
                        found.append(row.path)
                except (OSError, SpellbookError):
                    continue
        return sorted(found)

    def _quote_number_ids(self) -> list[str]:
        """Quote the ids ``_number_ids`` finds, each file written only if unchanged since it was read."""
        quoted = []
        for path in self._number_ids():
            try:
                state = self.vault.read(path)
                text = quote_number_ids(state.text)
                if text is not None:
                    self.vault.write(path, text, expected_version=state.version)
                    self.indexer.sync_path(path)
                    quoted.append(path)
            except (OSError, SpellbookError) as exc:
                log.warning("could not quote the id of %s: %s", path, exc)
        return quoted

    def fill_missing_vectors(self, wait: bool = True) -> dict[str, Any]:
        """Embed the sections indexed while the embedder was failing; ``wait=False`` starts it in
        the background (only one runs at a time)."""
        if not wait:
            if self.indexer.missing:
                threading.Thread(target=self.indexer.fill_missing, name="spellbook-fill", daemon=True).start()
            return {"vectors_missing": len(self.indexer.missing)}
        report = self.indexer.fill_missing()
        return {
            "embedded": report.embedded_chunks,
            "vectors_missing": report.vectors_missing,
            "embedder_error": report.embedder_error,
        }

    def probe_embedder(self) -> dict[str, Any]:
        """Embed a short text for real and time it (for ``doctor``)."""
        embedder = self.embedder
        started = time.perf_counter()
        try:
            vector = embedder.probe("Spellbook doctor: is the embedder answering?")
        except EmbedderError as exc:
            return {
                "ok": False,
                "embedder": embedder.model_id,
                "error": str(exc),
                "seconds": round(time.perf_counter() - started, 3),
                "vectors_missing": len(self.indexer.missing),
            }
        return {
            "ok": True,
            "embedder": embedder.model_id,
            "dimensions": len(vector),
            "seconds": round(time.perf_counter() - started, 3),
            "vectors_missing": len(self.indexer.missing),
        }

    def rebuild_index(self, progress: Progress | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        self.indexer.reset()
        report = self.reconcile(progress)
        return {**_report(report), "seconds": round(time.perf_counter() - started, 2)}

    def stats(self) -> dict[str, Any]:
        counts = self.catalog.counts()
        problems = self.catalog.problems()
        return {
            "version": __version__,
            "owner_pid": os.getpid(),
            "vault": str(self.vault.root),
            "index": str(self.settings.index_path),
            "embedder": self.embedder.model_id,
            "embedder_status": self.embedder.health(),
            "state": self.readiness.progress["state"],
            "progress": {"done": self.readiness.progress["done"], "total": self.readiness.progress["total"]},
            **counts,
            "vectors": self.vectors.count(),
            "vectors_missing": len(self.indexer.missing),
            "problems": problems[:50],
            "problems_total": len(problems),
            "last_sync": _report(self.readiness.last_report) if self.readiness.last_report else None,
            "setup_warnings": self._setup_warnings(),
            "git": self.git.stats(),
            "summariser": {
                **spent(self.settings.index_path),
                "model": self.settings.summariser,
                "daily_tokens": DAILY_TOKENS,
            },
            "sync": self.team.status() if self.team else None,
        }

    def _setup_warnings(self) -> list[str]:
        """Setup problems worth a person's attention (not errors: everything still works)."""
        out: list[str] = []
        if self.embedder.english_only:
            sample = self.catalog.sample_texts(400)
            other = sum(1 for text in sample if not mostly_latin(text))
            if sample and other * 10 >= len(sample):
                out.append(
                    f"About {other * 100 // len(sample)}% of the vault is not in a Latin script, but the embedder "
                    f"({self.embedder.model_id}) only understands English: Korean and Japanese queries are ranked by "
                    "keywords alone. Set SPELLBOOK_EMBEDDER=use-m3 (multilingual) and restart."
                )
        return out


def _report(report: SyncReport) -> dict[str, Any]:
    data = asdict(report)
    data["problems"] = data["problems"][:20]
    return data
