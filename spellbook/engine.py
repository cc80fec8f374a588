"""The memory engine: what every MCP tool and CLI command does, as plain methods.

It writes through the vault store, then asks the indexer to sync the path it wrote (reading the
file back from disk), so a tool's answer always reflects the file, and the next search reflects
the tool (read-your-writes). Every method returns JSON-ready dicts and raises ``SpellbookError``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import asdict
from typing import Any

from spellbook import __version__
from spellbook.config import Settings
from spellbook.errors import InvalidInputError, NoteNotFoundError, SpellbookError, VaultPathError
from spellbook.exchange import Exchange
from spellbook.gitlayer import Committer
from spellbook.history import History
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.indexing.indexer import Indexer, Progress, SyncReport
from spellbook.knowledge import Knowledge
from spellbook.lifecycle import Lifecycle
from spellbook.privacy import KINDS, Redaction, describe, redact, redact_data
from spellbook.scope import current as current_scope
from spellbook.search.filters import Filter, parse_filter, to_sql
from spellbook.search.searcher import Searcher, mostly_latin
from spellbook.structure import Structure
from spellbook.vault.fields import (
    expires_in,
    new_id,
    normalize_expires,
    normalize_importance,
    normalize_tags,
    string_list,
    title_from_text,
)
from spellbook.vault.note import NOTE_TYPES, content_version, now_iso, parse_note, render_note
from spellbook.vault.paths import note_path
from spellbook.vault.store import Vault

log = logging.getLogger(__name__)

MAX_TITLE_CHARS = 200
TOPIC_PAGE_CHARS = 30_000  # get_topic returns at most about this much text per call
LIST_FIELDS = ("keywords", "questions", "entities", "links")
TEXT_FIELDS = ("category", "topic", "context", "user", "source", "session", "started", "ended")


class Engine(Structure, Lifecycle, Searcher, Exchange, History, Knowledge):
    def __init__(self, settings: Settings, embedder: Any | None = None, vectors: Any | None = None) -> None:
        from spellbook.embedders.base import load_embedder

        self.settings = settings
        self.vault = Vault(settings.vault_dir)
        if not self.vault.root.is_dir():
            raise VaultPathError(f"Vault {self.vault.root} does not exist; run `spellbook init {self.vault.root}`.")
        index_dir = settings.index_path
        index_dir.mkdir(parents=True, exist_ok=True)
        self._owns_embedder = embedder is None
        self.embedder = embedder or load_embedder(settings)
        if vectors is None:
            vectors = _open_vectors(settings, self.vault.root)
        self._privacy = {"extra_patterns": tuple(settings.redact_patterns), "disabled": tuple(settings.redact_disabled)}
        try:
            redact("", **self._privacy)  # a typo in a disabled kind or a bad regex fails now
        except ValueError as exc:
            raise InvalidInputError(f"Privacy settings: {exc}. Known kinds: {', '.join(KINDS)}.") from None
        self.catalog = Catalog(index_dir / "catalog.sqlite3")
        self.indexer = Indexer(self.vault, self.catalog, vectors, self.embedder, settings.max_chunk_chars)
        self.vectors = vectors
        self.progress: dict[str, Any] = {"state": "opening", "done": 0, "total": 0}
        self._last_report: SyncReport | None = None
        self._reconciled = threading.Event()
        self._baseline: tuple[float, float, int] | None = None
        self.git = Committer(self.vault.root, settings.git_commit)

    def close(self) -> None:
        self.git.close()  # pending commits first
        self.catalog.close()
        self.vectors.close()
        close = getattr(self.embedder, "close", None)
        if self._owns_embedder and close:
            close()  # a network embedder's connections

    # --- lifecycle ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check the index identity; wipe it if it is from another model, chunker or format.
        Remove temp files a killed writer left behind (only the index owner writes)."""
        self.vault.remove_stale_temp_files()
        reason = self.indexer.needs_rebuild()
        if reason:
            log.info("building the index from the vault: %s", reason)
            self.indexer.reset()

    def start(self, progress: Progress | None = None) -> SyncReport:
        """prepare(), then reconcile the index with the vault."""
        self.prepare()
        return self.reconcile(progress)

    def reconcile(self, progress: Progress | None = None) -> SyncReport:
        def track(done: int, total: int) -> None:
            self.progress.update(state="indexing", done=done, total=total)
            if progress:
                progress(done, total)

        self.progress.update(state="indexing", done=0, total=0)
        report = self.indexer.reconcile(track)
        self.maintain(force=True)  # archive what expired, refresh overview notes (lifecycle.py)
        self.progress.update(state="ready")
        self._last_report = report
        self._reconciled.set()
        return report

    # --- write tools --------------------------------------------------------------------------
    def scribe(self, text: str, title: str | None = None, **fields: Any) -> dict[str, Any]:
        body, found = self._scrub(self._check_text(text))
        (title, fields), more = self._scrub_data((_check_title(title) or title_from_text(body), fields))
        meta = {"id": new_id(), "title": title, **self._fields({**fields, **_stamp(current_scope(), fields)})}
        self._default_expiry(meta, creating=True)
        now = now_iso()
        meta["created"] = now
        meta["updated"] = now
        path = note_path(meta.get("category") or "inbox", meta.get("topic"), title)
        rendered = render_note(meta, body)
        path = self.vault.create(path, rendered)
        report = self.indexer.sync_path(path)
        self._after_write("scribe", path, title, meta["id"], rendered)
        similar = self._similar(path, 3)
        for hit in similar:
            hit["near_duplicate"] = hit["similarity"] >= self.settings.duplicate_similarity
        out = {
            "id": meta["id"], "path": path, "version": content_version(rendered), "title": title,
            "category": meta.get("category"), "topic": meta.get("topic"), "created": now, "similar": similar,
        }
        _note_missing_vectors(out, report)
        return _with_redactions(out, [r.kind for r in found] + more)

    def revise(self, id: str, text: str | None = None, version: str | None = None, **fields: Any) -> dict[str, Any]:
        note = self._note(id)
        state = self.vault.read(note.path)
        if version is not None and version != state.version:
            from spellbook.errors import ConflictError

            raise ConflictError(note.path, version, state.version, self._scrub(state.text)[0], note_id=id)
        if text is not None:
            text, found = self._scrub(text)
        else:
            found = []
        fields, more = self._scrub_data(fields)
        parsed = parse_note(state.text)
        if parsed.problem:
            raise InvalidInputError(
                f"{note.path} has {parsed.problem}. Fix its frontmatter by hand (or ask the person to), "
                "then revise again."
            )
        body = parsed.body if text is None else self._check_text(text)
        updates = self._fields(fields)
        if "title" in fields and fields["title"] is not None:
            updates["title"] = _check_title(fields["title"]) or parsed.meta.get("title")
        removed = tuple(k for k, v in fields.items() if v is not None and v in ("", []))
        meta = {k: v for k, v in parsed.meta.items() if k not in removed}
        meta.update(updates)
        if "id" not in meta:
            meta["id"] = note.note_id  # a hand-written note keeps the id it was found under
        if updates.get("type") == "temporary":
            self._default_expiry(meta, creating=False)
        if text is None and not updates and not removed:
            raise InvalidInputError("Nothing to change: pass text and/or metadata fields to revise.")
        meta["updated"] = now_iso()
        out = render_note(meta, body, original=parsed, remove=removed)
        new_version = self.vault.write(note.path, out, expected_version=state.version)
        report = self.indexer.sync_path(note.path)
        self._after_write("revise", note.path, meta.get("title") or note.title, id, out, before=state.text)
        out = {"id": id, "path": note.path, "version": new_version, "updated": meta["updated"]}
        _note_missing_vectors(out, report)
        return _with_redactions(out, [r.kind for r in found] + more)

    def erase(self, id: str, version: str | None = None) -> dict[str, Any]:
        note = self._note(id)
        if version is not None:
            state = self.vault.read(note.path)
            if version != state.version:
                from spellbook.errors import ConflictError

                raise ConflictError(note.path, version, state.version, state.text, note_id=id)
        trashed = self.vault.trash(note.path)
        self.indexer.sync_path(note.path)
        self._after_write("erase", note.path, note.title, id, None, before=self.vault.root / trashed)
        return {"id": id, "path": note.path, "erased": True, "trash_path": trashed}

    def check(self) -> dict[str, Any]:
        """Does the index equal the vault? Compares the ledger with every file (size and mtime,
        then content hash when they differ) and the catalog with the vector index. Changes nothing."""
        known = self.catalog.files()
        on_disk = set(self.vault.iter_paths())
        new = sorted(on_disk - set(known))
        gone = sorted(set(known) - on_disk)
        changed: list[str] = []
        for path in sorted(on_disk & set(known)):
            row = known[path]
            try:
                st = self.vault.scan_stat(path)
            except OSError:
                changed.append(path)
                continue
            if (row.mtime_ns, row.size) != (st.st_mtime_ns, st.st_size):
                try:
                    if self.vault.read(path).version != row.version:
                        changed.append(path)
                except (OSError, SpellbookError):
                    if row.problem is None:
                        changed.append(path)
        catalog_ids = self.catalog.all_chunk_ids()
        vector_ids = self.vectors.ids()
        missing = len(catalog_ids - vector_ids)
        orphans = len(vector_ids - catalog_ids)
        identity = self.indexer.needs_rebuild()
        return {
            "consistent": not (new or gone or changed or missing or orphans or identity),
            "files_in_vault": len(on_disk), "files_indexed": len(known),
            "not_indexed": new[:50], "deleted_but_indexed": gone[:50], "changed_since_indexed": changed[:50],
            "counts": {"not_indexed": len(new), "deleted_but_indexed": len(gone), "changed": len(changed),
                       "vectors_missing": missing, "orphan_vectors": orphans},
            "identity_problem": identity,
            "problems": self.catalog.problems()[:50],
        }

    def repair(self, progress: Progress | None = None) -> dict[str, Any]:
        """Make the index equal to the vault again (a reconcile, plus re-embedding lost vectors)."""
        if self.indexer.needs_rebuild():
            return self.rebuild_index(progress)
        missing = sorted(self.catalog.all_chunk_ids() - self.vectors.ids())
        if missing:  # vectors lost under a catalog that thinks they exist: re-index those files
            paths = sorted({c.path for c in self.catalog.chunks(missing).values()})
            self.catalog.remove(paths)
        self.reconcile(progress)
        return self.check()

    def fill_missing_vectors(self, wait: bool = True) -> dict[str, Any]:
        """Embed the sections indexed while the embedder was failing; ``wait=False`` starts it in
        the background (only one runs at a time)."""
        if not wait:
            if self.indexer.missing:
                threading.Thread(target=self.indexer.fill_missing, name="spellbook-fill", daemon=True).start()
            return {"vectors_missing": len(self.indexer.missing)}
        report = self.indexer.fill_missing()
        return {"embedded": report.embedded_chunks, "vectors_missing": report.vectors_missing,
                "embedder_error": report.embedder_error}

    def probe_embedder(self) -> dict[str, Any]:
        """Embed a short text for real and time it (for ``doctor``)."""
        from spellbook.errors import EmbedderError

        embedder = self.embedder
        probe = getattr(embedder, "probe", embedder.embed_query)  # network embedders: ignore the breaker
        started = time.perf_counter()
        try:
            vector = probe("Spellbook doctor: is the embedder answering?")
        except EmbedderError as exc:
            return {"ok": False, "embedder": embedder.model_id, "error": str(exc),
                    "seconds": round(time.perf_counter() - started, 3), "vectors_missing": len(self.indexer.missing)}
        return {"ok": True, "embedder": embedder.model_id, "dimensions": len(vector),
                "seconds": round(time.perf_counter() - started, 3), "vectors_missing": len(self.indexer.missing)}

    def rebuild_index(self, progress: Progress | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        self.indexer.reset()
        report = self.reconcile(progress)
        return {**_report(report), "seconds": round(time.perf_counter() - started, 2)}

    # --- read tools ---------------------------------------------------------------------------
    def timeline(self, id: str, window: int = 3) -> dict[str, Any]:
        """The memories written just before and just after this one, and this note's sections."""
        if not 1 <= window <= 20:
            raise InvalidInputError("window must be between 1 and 20.")
        note = self._note(id)
        when = note.created or note.updated or ""
        before, after = self.catalog.around(note.path, when, window)
        before, after = [n for n in before if self._visible(n)], [n for n in after if self._visible(n)]
        return {
            "id": id, "path": note.path, "title": note.title, "created": note.created,
            "before": [r.compact() for r in before], "after": [r.compact() for r in after],
            "sections": [{"index": c.idx, "heading": c.heading} for c in self.catalog.chunks_of(note.path)],
        }

    def get_memories(self, ids: list[str]) -> dict[str, Any]:
        if not ids:
            raise InvalidInputError("Pass at least one id (from memorize or list_memories).")
        if len(ids) > 20:
            raise InvalidInputError("At most 20 ids per call; page through them.")
        memories: list[dict[str, Any]] = []
        missing: list[str] = []
        for note_id in dict.fromkeys(ids):
            try:
                note = self._note(note_id)
                state = self.vault.read(note.path)
            except (NoteNotFoundError, FileNotFoundError):
                missing.append(note_id)
                continue
            parsed = parse_note(state.text)
            memories.append({
                "id": note_id, "path": note.path, "version": state.version, "title": note.title,
                "metadata": self._scrub_data(parsed.meta)[0], "text": self._scrub(parsed.body)[0],
                "chunks": [{"index": c.idx, "heading": c.heading} for c in self.catalog.chunks_of(note.path)],
                "links": [self._link(target) for target in self.catalog.links_of(note.path)],
                "backlinks": [n.ref() for n in self.catalog.backlinks(note) if self._visible(n)],
            })
        if not memories:
            raise NoteNotFoundError(missing[0] if len(missing) == 1 else ", ".join(missing))
        return {"memories": memories, "not_found": missing}

    def list_memories(self, filter: Filter | dict | None = None, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        if not 1 <= limit <= 200:
            raise InvalidInputError("limit must be between 1 and 200.")
        if offset < 0:
            raise InvalidInputError("offset must be 0 or more.")
        where, params = to_sql(parse_filter(filter))
        self._await_first_index()
        rows, total = self.catalog.list_notes(where, params, limit, offset)
        items = [r.compact() for r in rows]
        next_offset = offset + len(items) if offset + len(items) < total else None
        return {"memories": items, "total": total, "offset": offset, "next_offset": next_offset}

    def get_topic(self, topic: str, category: str | None = None, offset: int = 0) -> dict[str, Any]:
        """Every memory of a topic, oldest first, with full text; paged by size."""
        if not isinstance(topic, str) or not topic.strip():
            raise InvalidInputError("topic is empty: pass a topic name from get_index.")
        spec = parse_filter({"topic": topic.strip(), **({"category": category} if category else {})})
        where, params = to_sql(spec)
        rows, total = self.catalog.list_notes(where, params, 10_000, 0, oldest_first=True)
        if not rows:
            raise InvalidInputError(f"No memories in topic {topic!r}. Call get_index to see the topics.")
        memories: list[dict[str, Any]] = []
        size = 0
        for row in rows[offset:]:
            try:
                body = parse_note(self.vault.read(row.path).text).body
            except (OSError, SpellbookError):
                continue
            if memories and size + len(body) > TOPIC_PAGE_CHARS:
                break
            size += len(body)
            memories.append({**row.compact(), "text": self._scrub(body)[0]})
        end = offset + len(memories)
        out = {"topic": topic, "total": total, "memories": memories, "next_offset": end if end < total else None}
        about = self._topic_about(topic.strip(), category, rows)
        return {"about": about, **out} if about else out

    def stats(self) -> dict[str, Any]:
        counts = self.catalog.counts()
        problems = self.catalog.problems()
        return {
            "version": __version__,
            "owner_pid": os.getpid(),
            "vault": str(self.vault.root),
            "index": str(self.settings.index_path),
            "embedder": self.embedder.model_id,
            "embedder_status": _embedder_status(self.embedder),
            "state": self.progress["state"],
            "progress": {"done": self.progress["done"], "total": self.progress["total"]},
            **counts,
            "vectors": self.vectors.count(),
            "vectors_missing": len(self.indexer.missing),
            "problems": problems[:50],
            "problems_total": len(problems),
            "last_sync": _report(self._last_report) if self._last_report else None,
            "setup_warnings": self._setup_warnings(),
            "git": self.git.stats(),
        }

    def _setup_warnings(self) -> list[str]:
        """Setup problems worth a person's attention (not errors: everything still works)."""
        out: list[str] = []
        if getattr(self.embedder, "english_only", False):
            sample = self.catalog.sample_texts(400)
            other = sum(1 for text in sample if not mostly_latin(text))
            if sample and other * 10 >= len(sample):
                out.append(
                    f"About {other * 100 // len(sample)}% of the vault is not in a Latin script, but the embedder "
                    f"({self.embedder.model_id}) only understands English: Korean and Japanese queries are ranked by "
                    "keywords alone. Set SPELLBOOK_EMBEDDER=use-m3 (multilingual) and restart."
                )
        return out

    # --- helpers ------------------------------------------------------------------------------
    def _await_first_index(self, timeout: float = 10.0) -> str | None:
        """Give the first reconcile after start a moment to finish, so early reads see the vault.
        Returns a note for the caller when it is still running."""
        if self._reconciled.wait(timeout):
            return None
        done, total = self.progress["done"], self.progress["total"]
        return f"The index is still being built ({done}/{total} files); results may be incomplete. Retry shortly."

    def _visible(self, note: NoteRow) -> bool:
        """Does the running call's scope see this note (spellbook/scope.py)?"""
        return current_scope().sees(note.context, note.user)

    def _note(self, note_id: str) -> NoteRow:
        if not isinstance(note_id, str) or not note_id.strip():
            raise InvalidInputError("id is empty; pass the id of a memory (from memorize or list_memories).")
        rows = [r for r in self.catalog.notes_by_id(note_id.strip()) if self._visible(r)]
        if not rows:  # another scope's memory is not found either: its existence is not leaked
            raise NoteNotFoundError(note_id)
        if len(rows) > 1:
            raise SpellbookError(
                f"Id {note_id!r} is used by {len(rows)} files ({', '.join(r.path for r in rows)}); "
                "give one of them a new id by hand, then retry."
            )
        return rows[0]

    def _scrub(self, text: str) -> tuple[str, list[Redaction]]:
        """Secrets out of text going into the vault or out in an answer (unless disabled)."""
        return redact(text, **self._privacy) if self.settings.redact else (text, [])

    def _scrub_data(self, value: Any) -> tuple[Any, list[str]]:
        return redact_data(value, **self._privacy) if self.settings.redact else (value, [])

    def _link(self, target: str) -> dict[str, Any]:
        found = self.catalog.resolve_link(target)
        visible = found is not None and self._visible(found)
        return {"target": target, **(found.ref() if visible else {"resolved": False})}

    def _check_text(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("text is empty: pass the memory's content as markdown.")
        if len(text) > self.settings.max_text_chars:
            raise InvalidInputError(
                f"text is {len(text):,} characters; the limit is {self.settings.max_text_chars:,}. "
                "Split it into several memories (one idea each) and scribe them separately."
            )
        if "\x00" in text:
            raise InvalidInputError("text contains NUL characters; pass plain text.")
        return text

    def _fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Validate and normalise metadata fields; absent (None) and empty values are left out."""
        out: dict[str, Any] = {}
        if fields.get("ttl_days") is not None and fields.get("expires") not in (None, ""):
            raise InvalidInputError("Pass expires or ttl_days, not both.")
        for name, value in fields.items():
            if value is None or value == "" or value == []:
                continue
            if name in TEXT_FIELDS:
                if not isinstance(value, str) or len(value) > 200:
                    raise InvalidInputError(f"{name} must be a string of at most 200 characters.")
                out[name] = value.strip()
            elif name == "tags":
                if not isinstance(value, list | str):
                    raise InvalidInputError("tags must be a list of strings, e.g. ['python', 'deploy'].")
                out[name] = normalize_tags(value)
            elif name in LIST_FIELDS:
                out[name] = string_list(name, value)
            elif name == "importance":
                out[name] = normalize_importance(value, strict=True)
            elif name == "expires":
                out[name] = normalize_expires(value)
            elif name == "ttl_days":
                out["expires"] = expires_in(value)
            elif name == "type":
                if value not in NOTE_TYPES:
                    raise InvalidInputError(f"type must be one of {', '.join(NOTE_TYPES)}; got {value!r}.")
                out[name] = value
            elif name != "title":
                raise InvalidInputError(f"Unknown field {name!r}.")
        return {k: v for k, v in out.items() if v not in (None, "", [])}


def _stamp(scope: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """What a write in a scope records: its context and user (spellbook/scope.py)."""
    out: dict[str, Any] = {}
    for name in ("context", "user"):
        mine, given = getattr(scope, name), fields.get(name)
        if mine and given and str(given).casefold() != mine.casefold():
            raise InvalidInputError(f"This call is scoped to {name} {mine!r}; it cannot write a memory of {name} {given!r}.")
        if mine:
            out[name] = mine
    return out


def _check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str):
        raise InvalidInputError("title must be a string.")
    title = " ".join(title.split())
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidInputError(f"title is {len(title)} characters; keep it under {MAX_TITLE_CHARS}.")
    return title or None




def _with_redactions(out: dict[str, Any], kinds: list[str]) -> dict[str, Any]:
    if kinds:
        out["redacted"] = describe(kinds)
    return out




def _note_missing_vectors(out: dict[str, Any], report: SyncReport) -> None:
    if report.vectors_missing:
        out["note"] = (
            "Saved in the vault and findable by keyword search, but not embedded yet: "
            f"{report.embedder_error} Its vectors are added automatically once the embedder answers."
        )


def _embedder_status(embedder: Any) -> dict[str, Any]:
    health = getattr(embedder, "health", None)
    return health() if health else {"endpoint": "in process", "reachable": True}


def _report(report: SyncReport) -> dict[str, Any]:
    data = asdict(report)
    data["problems"] = data["problems"][:20]
    return data


def _open_vectors(settings: Settings, vault_root: Any) -> Any:
    from spellbook.index.chroma import VectorIndex

    if not settings.chroma_url:
        return VectorIndex.embedded(settings.index_path / "chroma")
    # One collection per vault on a shared server, named from the vault's absolute path.
    import hashlib

    name = "spellbook-" + hashlib.sha1(str(vault_root).encode("utf-8")).hexdigest()[:16]
    try:
        return VectorIndex.server(settings.chroma_url, name)
    except Exception as exc:  # connection refused, bad URL, incompatible server
        from spellbook.errors import IndexUnavailableError

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
