"""Memories: what ``scribe``, ``revise``, ``erase``, ``get_memories``, ``list_memories``,
``get_topic`` and ``timeline`` do.

It writes through the vault store, then asks the indexer to sync the path it wrote (reading the
file back from disk), so a tool's answer always reflects the file, and the next search reflects
the tool (read-your-writes). Every method returns JSON-ready dicts and raises ``SpellbookError``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from spellbook.config import Settings
from spellbook.engine.access import Access, Readiness
from spellbook.engine.history import Recorder
from spellbook.engine.lifecycle import default_expiry
from spellbook.engine.search import Search
from spellbook.engine.structure import Structure
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, SpellbookError
from spellbook.index.catalog import Catalog
from spellbook.index.filters import parse_filter
from spellbook.index.indexer import Indexer, SyncReport
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
from spellbook.vault.paths import note_path, with_suffix_number
from spellbook.vault.privacy import describe
from spellbook.vault.store import Vault

if TYPE_CHECKING:
    from spellbook.index.filter_model import Filter

MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 50_000  # the largest memory scribe, revise and merge accept
DUPLICATE_SIMILARITY = 0.8  # scribe flags an existing memory this similar as a near-duplicate (and health pairs them)
TOPIC_PAGE_CHARS = 30_000  # get_topic returns at most about this much text per call
LIST_FIELDS = ("keywords", "questions", "entities", "links")
TEXT_FIELDS = ("category", "topic", "context", "user", "source", "session", "started", "ended")


class Memories:
    """Writing, reading and listing single memories."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        indexer: Indexer,
        access: Access,
        readiness: Readiness,
        recorder: Recorder,
        search: Search,
        structure: Structure,
    ) -> None:
        self.settings = settings
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.access = access
        self.readiness = readiness
        self.recorder = recorder
        self.search = search
        self.structure = structure

    # --- write tools --------------------------------------------------------------------------
    def scribe(self, text: str, title: str | None = None, _id: str | None = None, **fields: Any) -> dict[str, Any]:
        """Store a new memory. ``_id`` (set by the hub, never by a tool) makes a retried call
        idempotent: when the owner wrote the note and died before answering, the follower sends
        the same call, with the same id, to the next owner, which finds the note instead of writing
        a second one."""
        body, found = self.access.scrub(self._check_text(text))
        (title, fields), more = self.access.scrub_data((_check_title(title) or title_from_text(body), fields))
        meta = {
            "id": _id or new_id(),
            "title": title,
            **self._fields({**fields, **_stamp(self.access.scope(), fields)}),
        }
        default_expiry(meta, creating=True)
        path = note_path(meta.get("category") or "inbox", meta.get("topic"), title)
        written = self._already_written(_id, path) if _id else None
        if written is not None:
            path, rendered = written
            meta = parse_note(rendered).meta
            now = str(meta.get("created", ""))
            report = self.indexer.sync_path(path)
        else:
            now = now_iso()
            meta["created"] = now
            meta["updated"] = now
            rendered = render_note(meta, body)
            self.indexer.expect(path, rendered)  # the model starts while the file is written
            path = self.vault.create(path, rendered)
            report = self.indexer.sync_path(path)
            self.recorder.after_write("scribe", path, title, meta["id"], rendered)
        similar = self.search.similar(path, 3)
        for hit in similar:
            hit["near_duplicate"] = hit["similarity"] >= DUPLICATE_SIMILARITY
        out = {
            "id": meta["id"],
            "path": path,
            "version": content_version(rendered),
            "title": title,
            "category": meta.get("category"),
            "topic": meta.get("topic"),
            "created": now,
            "similar": similar,
        }
        _note_missing_vectors(out, report)
        return _with_redactions(out, [r.kind for r in found] + more)

    def _already_written(self, note_id: str, path: str) -> tuple[str, str] | None:
        """The path and text of the note a first attempt of this scribe wrote, if any: indexed
        (any path), or on disk at the path it would take (``path``, ``path 2``...), not yet indexed."""
        for row in self.catalog.notes_by_id(note_id):
            with contextlib.suppress(FileNotFoundError):
                return row.path, self.vault.read(row.path).text
        n = 1
        while True:
            candidate = path if n == 1 else with_suffix_number(path, n)
            n += 1
            try:
                text = self.vault.read(candidate).text
            except FileNotFoundError:
                return None
            except (OSError, SpellbookError):
                continue
            if str(parse_note(text).meta.get("id", "")) == note_id:
                return candidate, text

    def revise(self, id: str, text: str | None = None, version: str | None = None, **fields: Any) -> dict[str, Any]:
        note = self.access.note(id)
        state = self.vault.read(note.path)
        if version is not None and version != state.version:
            raise FileChangedError(note.path, version, state.version, state.text, note_id=id)
        if text is not None:
            text, found = self.access.scrub(text)
        else:
            found = []
        fields, more = self.access.scrub_data(fields)
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
            default_expiry(meta, creating=False)
        if text is None and not updates and not removed:
            raise InvalidInputError("Nothing to change: pass text and/or metadata fields to revise.")
        meta["updated"] = now_iso()
        out = render_note(meta, body, original=parsed, remove=removed)
        self.indexer.expect(note.path, out)
        try:
            new_version = self.vault.write(note.path, out, expected_version=state.version)
        except FileChangedError as exc:  # a person saved it since it was read above
            raise exc.naming(id, "revise") from None
        report = self.indexer.sync_path(note.path)
        self.recorder.after_write("revise", note.path, meta.get("title") or note.title, id, out, before=state.text)
        out = {"id": id, "path": note.path, "version": new_version, "updated": meta["updated"]}
        _note_missing_vectors(out, report)
        return _with_redactions(out, [r.kind for r in found] + more)

    def erase(self, id: str, version: str | None = None) -> dict[str, Any]:
        note = self.access.note(id)
        if version is not None:
            state = self.vault.read(note.path)
            if version != state.version:
                raise FileChangedError(note.path, version, state.version, state.text, note_id=id, retry="erase")
        trashed = self.vault.trash(note.path)
        self.indexer.sync_path(note.path)
        self.recorder.after_write("erase", note.path, note.title, id, None, before=self.vault.root / trashed)
        return {"id": id, "path": note.path, "erased": True, "trash_path": trashed}

    # --- read tools ---------------------------------------------------------------------------
    def timeline(self, id: str, window: int = 3) -> dict[str, Any]:
        """The memories written just before and just after this one, and this note's sections."""
        if not 1 <= window <= 20:
            raise InvalidInputError("window must be between 1 and 20.")
        note = self.access.note(id)
        when = note.created or note.updated or ""
        before, after = self.catalog.browse.around(note.path, when, window)
        before, after = [n for n in before if self.access.visible(n)], [n for n in after if self.access.visible(n)]
        return {
            "id": id,
            "path": note.path,
            "title": note.title,
            "created": note.created,
            "before": [r.compact() for r in before],
            "after": [r.compact() for r in after],
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
                note = self.access.note(note_id)
                state = self.vault.read(note.path)
            except (NoteNotFoundError, FileNotFoundError):
                missing.append(note_id)
                continue
            parsed = parse_note(state.text)
            memories.append(
                {
                    "id": note_id,
                    "path": note.path,
                    "version": state.version,
                    "title": note.title,
                    "metadata": self.access.scrub_data(parsed.meta)[0],
                    "text": self.access.scrub(parsed.body)[0],
                    "chunks": [{"index": c.idx, "heading": c.heading} for c in self.catalog.chunks_of(note.path)],
                    "links": [self.access.link(target) for target in self.catalog.links.links_of(note.path)],
                    "backlinks": [n.ref() for n in self.catalog.links.backlinks(note) if self.access.visible(n)],
                }
            )
        if not memories:
            raise NoteNotFoundError(missing[0] if len(missing) == 1 else ", ".join(missing))
        return {"memories": memories, "not_found": missing}

    def memory_file(self, id: str) -> dict[str, Any]:
        """A memory's markdown file as it is on disk (frontmatter and body), scrubbed: the
        ``memory://notes/{id}`` resource (server/resources.py)."""
        note = self.access.note(id)
        try:
            state = self.vault.read(note.path)
        except FileNotFoundError:
            raise NoteNotFoundError(id) from None
        return {"id": id, "path": note.path, "version": state.version, "text": self.access.scrub(state.text)[0]}

    def list_memories(self, filter: Filter | dict | None = None, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        if not 1 <= limit <= 200:
            raise InvalidInputError("limit must be between 1 and 200.")
        if offset < 0:
            raise InvalidInputError("offset must be 0 or more.")
        where, params = self.access.where(parse_filter(filter))
        self.readiness.await_first_index()
        rows, total = self.catalog.list_notes(where, params, limit, offset)
        items = [r.compact() for r in rows]
        next_offset = offset + len(items) if offset + len(items) < total else None
        return {"memories": items, "total": total, "offset": offset, "next_offset": next_offset}

    def get_topic(self, topic: str, category: str | None = None, offset: int = 0) -> dict[str, Any]:
        """Every memory of a topic, oldest first, with full text; paged by size."""
        if not isinstance(topic, str) or not topic.strip():
            raise InvalidInputError("topic is empty: pass a topic name from get_index.")
        spec = parse_filter({"topic": topic.strip(), **({"category": category} if category else {})})
        where, params = self.access.where(spec)
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
            memories.append({**row.compact(), "text": self.access.scrub(body)[0]})
        end = offset + len(memories)
        out = {"topic": topic, "total": total, "memories": memories, "next_offset": end if end < total else None}
        about = self.structure.topic_about(topic.strip(), category, rows)
        return {"about": about, **out} if about else out

    # --- helpers ------------------------------------------------------------------------------
    def _check_text(self, text: str) -> str:
        return check_text(text, MAX_TEXT_CHARS)

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


def check_text(text: str, limit: int) -> str:
    """A memory's text as a tool passes it: a non-empty string of at most ``limit`` characters."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("text is empty: pass the memory's content as markdown.")
    if len(text) > limit:
        raise InvalidInputError(
            f"text is {len(text):,} characters; the limit is {limit:,}. "
            "Split it into several memories (one idea each) and scribe them separately."
        )
    if "\x00" in text:
        raise InvalidInputError("text contains NUL characters; pass plain text.")
    return text


def _stamp(scope: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """What a write in a scope records: its context and user (spellbook/scope.py)."""
    out: dict[str, Any] = {}
    for name in ("context", "user"):
        mine, given = getattr(scope, name), fields.get(name)
        if mine and given and str(given).casefold() != mine.casefold():
            raise InvalidInputError(
                f"This call is scoped to {name} {mine!r}; it cannot write a memory of {name} {given!r}."
            )
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
