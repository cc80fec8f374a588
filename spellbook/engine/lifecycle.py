"""Lifecycle: memories that expire, the sweep that archives them, and erasing a whole topic.

A service of the engine, given the vault, catalog, indexer, git committer and settings; it asks
the structure service for folder descriptions and overview notes.

* ``expires`` (frontmatter, ISO date or date-time) hides a memory from search, lists and the
  index the moment it passes: the filter runs at query time (``search.filters.LIVE_SQL``).
* The sweep then moves the file to ``_archive/<its path>``, bytes unchanged: still markdown,
  still indexed, found again with ``filter={"folder": "_archive"}``; never deleted. It runs on
  every reconcile (start, ``spellbook index``, a folder event) and every
  ``SWEEP_SECONDS`` in the index owner (``maintain``, called by the hub).
* ``erase_topic`` reports what it would remove, and only with ``confirm=True`` moves the files
  to ``.trash/`` like ``erase``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from typing import Any

from spellbook.config import Settings
from spellbook.engine.access import Access
from spellbook.engine.history import Recorder
from spellbook.engine.structure import Structure, folder_key
from spellbook.errors import InvalidInputError, SpellbookError
from spellbook.git.committer import Change, Committer
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.indexer import Indexer
from spellbook.startup.heap import trim_heap
from spellbook.vault.fields import expires_in, expires_key, parse_expires
from spellbook.vault.note import parse_note
from spellbook.vault.paths import ABOUT_NAME, OVERVIEW_NAME, is_archived, sanitize_segment
from spellbook.vault.store import TRASH_DIR, Vault

log = logging.getLogger(__name__)
_MAINTAIN_LOCK = threading.Lock()  # the owner's loop and a reconcile never maintain at once
TRIM_SECONDS = 30.0  # the owner gives freed heap memory back this often (engine/maintain)
SWEEP_SECONDS = 3600.0  # the owner moves expired memories to _archive/ this often (they are hidden at once)
TEMPORARY_TTL_DAYS = 3.0  # a memory of type 'temporary' scribed without an expiry expires this many days later
DEFAULT_TTL_DAYS: float | None = None  # if set, every other new memory without an expiry expires this many days later


class Lifecycle:
    """The sweep of expired memories into the archive, periodic upkeep, and erasing a topic."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        indexer: Indexer,
        access: Access,
        git: Committer,
        recorder: Recorder,
        structure: Structure,
    ) -> None:
        self.settings = settings
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.access = access
        self.git = git
        self.recorder = recorder
        self.structure = structure
        self._last_trim = 0.0
        self._last_sweep = -math.inf

    # --- the sweep ----------------------------------------------------------------------------
    def sweep_expired(self) -> dict[str, Any]:
        """Move every memory whose ``expires`` has passed to ``_archive/`` (same relative path)."""
        archived: list[dict[str, Any]] = []
        for note in self.catalog.expired():
            if not self._still_expired(note):
                self.indexer.sync_path(note.path)  # edited since it was indexed: index what is there
                continue
            try:
                target = self.vault.archive(note.path)
            except (OSError, SpellbookError) as exc:
                log.warning("could not archive %s: %s", note.path, exc)
                continue
            self.indexer.sync_paths([note.path, target])
            log.info("archived expired memory %s -> %s", note.path, target)
            if self.git.enabled:  # one commit for the move (gitlayer)
                data = (self.vault.root / target).read_bytes()
                self.git.submit(
                    Change("archive", {note.path: None, target: data}, note.title, note.note_id, data, f"to {target}")
                )
            archived.append({**note.ref(), "archive_path": target, "expires": note.meta.get("expires")})
        self._last_sweep = time.monotonic()
        return {"archived": archived, "count": len(archived)}

    def _still_expired(self, note: NoteRow) -> bool:
        """Does the file on disk still say it expired? (A person may have just extended it.)"""
        try:
            meta = parse_note(self.vault.read(note.path).text).meta
        except (OSError, SpellbookError):
            return False
        when = parse_expires(meta.get("expires"))
        return when is not None and when <= dt.datetime.now(dt.UTC)

    def maintain(self, force: bool = False) -> None:
        """The owner's periodic work: the sweep when due, then overview notes if they are on."""
        with _MAINTAIN_LOCK:
            if force or time.monotonic() - self._last_sweep >= SWEEP_SECONDS:
                self.sweep_expired()
            if self.settings.overview_notes:
                self.structure.write_overviews(force=force)
            rested = self.indexer.vectors.rest()  # an idle embedded Chroma lets go of its graph
            if rested or time.monotonic() - self._last_trim >= TRIM_SECONDS:
                self._last_trim = time.monotonic()
                trim_heap()  # what writes and searches freed since goes back to the system

    # --- erasing a topic ----------------------------------------------------------------------
    def erase_topic(self, topic: str, category: str | None = None, confirm: bool = False) -> dict[str, Any]:
        """Every memory of a topic (and its ``_about.md``): listed, or with ``confirm`` moved to .trash/."""
        if not isinstance(topic, str) or not topic.strip():
            raise InvalidInputError("topic is empty: pass a topic name from get_index.")
        topic = topic.strip()
        where, params = "notes.archived = 0 AND notes.topic = ? COLLATE NOCASE", [topic]
        if category:
            where += " AND notes.category = ? COLLATE NOCASE"
            params.append(category.strip())
        everyone = where, list(params)
        scope = self.access.scope()
        if scope:  # a scoped call erases what it sees: its scope's and shared memories (spellbook/scope.py)
            condition, values = scope.sql()
            where, params = f"{where} AND {condition}", [*params, *values]
        rows, total = self.catalog.list_notes(where, params, 100_000, 0, oldest_first=True)
        if not rows:
            where_text = f" in category {category!r}" if category else ""
            raise InvalidInputError(f"No memories in topic {topic!r}{where_text}. Call get_index to see the topics.")
        categories = sorted({r.category or "" for r in rows})
        if confirm and len(categories) > 1 and not category:
            raise InvalidInputError(
                f"Topic {topic!r} is in several categories ({', '.join(categories)}); nothing was removed. "
                "Call erase_topic again with category=... to choose one."
            )
        described = self.structure.abouts()  # the topic folders' _about.md, matched as get_index matches them
        abouts = sorted(
            {described[k].path for k in {folder_key(r.category, r.topic) for r in rows if r.category} if k in described}
        )
        if scope and abouts and self.catalog.list_notes(*everyone, 1, 0)[1] > total:
            abouts = []  # other scopes still have memories in this topic: its description stays
        folders = sorted({r.folder for r in rows} | {p.rsplit("/", 1)[0] for p in abouts})
        out: dict[str, Any] = {"topic": topic, "category": category, "categories": categories, "count": total}
        if not confirm:
            return {
                **out,
                "confirmed": False,
                "would_remove": [r.ref() for r in rows],
                "description_files": abouts,
                "note": "Nothing was removed. Call again with confirm=true to move these files to .trash/.",
            }
        for path in [r.path for r in rows] + abouts:  # a .trash that is a link: refused before anything moves
            self.vault.check_move(TRASH_DIR, path)
        removed: list[dict[str, Any]] = []
        for row in rows:
            try:
                removed.append({**row.ref(), "trash_path": self.vault.trash(row.path)})
            except (OSError, SpellbookError) as exc:
                log.warning("erase_topic: could not trash %s: %s", row.path, exc)
        trashed = {about: self.vault.trash(about) for about in abouts}
        self.indexer.sync_paths([r["path"] for r in removed] + abouts)
        for r in removed:  # committed as erase commits (gitlayer), so history/restore find them by id
            self.recorder.after_write(
                "erase", r["path"], r["title"], r["id"], None, before=self.vault.root / r["trash_path"]
            )
        for about, where in trashed.items():
            self.recorder.after_write(
                "erase", about, about.rsplit("/", 1)[0], about, None, before=self.vault.root / where
            )
        for folder in folders:
            self.vault.remove_empty_folders(folder)
        return {**out, "confirmed": True, "count": len(removed), "removed": removed, "description_files": abouts}


def default_expiry(meta: dict[str, Any], creating: bool) -> None:
    """Give a memory without ``expires`` its TTL: ``TEMPORARY_TTL_DAYS`` for type 'temporary',
    ``DEFAULT_TTL_DAYS`` (new memories only) for the rest. A new memory cannot
    start out expired, archived, or named like a folder note."""
    if creating:
        _check_reserved(meta)
    if "expires" not in meta:
        if meta.get("type") == "temporary":
            days = TEMPORARY_TTL_DAYS
        else:
            days = DEFAULT_TTL_DAYS if creating else None
        if days:
            meta["expires"] = expires_in(days)
    if creating and "expires" in meta and expires_key(meta["expires"]) <= _now_key():
        raise InvalidInputError(
            f"expires {meta['expires']!r} is in the past, so the memory would be archived at once. "
            "Pass a future date or ttl_days (to retire an existing memory, revise its expires instead)."
        )


def _check_reserved(meta: dict[str, Any]) -> None:
    category = meta.get("category") or ""
    if is_archived(sanitize_segment(category, "general")):
        raise InvalidInputError(
            f"Category {category!r} is where expired memories are archived; choose another category."
        )
    if sanitize_segment(meta.get("title") or "") + ".md" in (ABOUT_NAME, OVERVIEW_NAME):
        raise InvalidInputError(
            f"Title {meta['title']!r} is reserved for folder notes; to describe a folder, call describe. "
            "Choose another title."
        )


def _now_key() -> str:
    return expires_key(dt.datetime.now(dt.UTC))
