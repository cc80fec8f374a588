"""Links between memories: what ``link``, ``unlink``, ``get_links`` and ``explore_related`` do.

A service of the engine, given the vault, catalog and indexer; it asks the search service for notes
similar in meaning. A link lives in the source note's frontmatter, one list of ``"[[wikilinks]]"``
per relation (``related: ["[[Other]]"]``; docs/note-format.md), so Obsidian's graph shows it and
the vault stays the source of truth; the indexer records each link with its relation in the
catalog. Writes go through the vault store with a version check; when a person saves the note
between the read and the write, the change is applied again on their version, never over it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import re
from typing import Any

from spellbook.engine.access import Access, Readiness
from spellbook.engine.history import Recorder
from spellbook.engine.search import Search
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, SpellbookError
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.indexer import Indexer, file_changed
from spellbook.vault.fields import LINK_REASONS, MAX_LIST_ITEMS, RELATIONS, link_targets
from spellbook.vault.note import now_iso, parse_note, render_note
from spellbook.vault.relink import link_key
from spellbook.vault.store import Vault

log = logging.getLogger(__name__)

WIKILINK = "wikilink"  # the relation reported for a plain [[link]] in a note's text or `links`
MAX_REASON_CHARS = 500
EDIT_ATTEMPTS = 3  # a person saving the note in between: re-read and apply the change again
# explore_related: how much each kind of evidence counts
LINK_WEIGHT, TAG_WEIGHT, TAG_WEIGHT_MAX, CONTEXT_WEIGHT, SIMILAR_WEIGHT = 1.0, 0.25, 0.75, 0.4, 0.5

_UNLINKABLE = re.compile(r"[\[\]|#^]")  # characters a [[link]] cannot carry
_PHRASES = {
    "related": "is related to",
    "supersedes": "supersedes",
    "contradicts": "contradicts",
    "extends": "extends",
    "depends_on": "depends on",
    WIKILINK: "links to",
}


class Links:
    """Writing, removing and reading the links between memories, and what a memory relates to."""

    def __init__(
        self,
        vault: Vault,
        catalog: Catalog,
        indexer: Indexer,
        access: Access,
        readiness: Readiness,
        recorder: Recorder,
        search: Search,
    ) -> None:
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.access = access
        self.readiness = readiness
        self.recorder = recorder
        self.search = search

    # --- links --------------------------------------------------------------------------------
    def link(self, source: str, target: str, relation: str = "related", reason: str | None = None) -> dict[str, Any]:
        """Write ``[[target]]`` into the source note's ``relation`` list (once), and the reason."""
        relation = _check_relation(relation)
        reason = self._check_reason(reason)
        self.readiness.await_first_index()
        src = self.access.note_as(source, "source")
        dst = self.access.note_as(target, "link target")
        if src.path == dst.path:
            raise InvalidInputError(f"A memory cannot link to itself ({src.path}); pass two different ids.")
        text = self.link_text(dst)
        written: dict[str, str] = {}

        def change(meta: dict[str, Any]) -> bool:
            items = _items(meta, relation, src.path)
            key = next((t for item in items for t in link_targets(item) if self._points_to(t, dst)), None)
            changed = key is None
            if key is None:
                if len(items) >= MAX_LIST_ITEMS:
                    raise InvalidInputError(f"{src.path} already has {len(items)} {relation} links; unlink some first.")
                key = text
                meta[relation] = [*items, f"[[{text}]]"]
            if reason is not None:
                reasons = _reasons(meta, src.path)
                per = reasons.setdefault(relation, {})
                if not isinstance(per, dict):
                    raise InvalidInputError(
                        f"{src.path}: {LINK_REASONS}.{relation} in the frontmatter is not a mapping; fix it by hand."
                    )
                if per.get(key) != reason:
                    per[key] = reason
                    meta[LINK_REASONS] = reasons
                    changed = True
            written["link"] = f"[[{key}]]"
            return changed

        version, changed = self._edit_frontmatter(src, change, "link")
        return {
            "source": src.note_id,
            "path": src.path,
            "target": dst.note_id,
            "target_path": dst.path,
            "target_title": dst.title,
            "relation": relation,
            "link": written["link"],
            "reason": reason,
            "changed": changed,
            "version": version,
        }

    def unlink(self, source: str, target: str, relation: str | None = None) -> dict[str, Any]:
        """Remove the source note's frontmatter links to ``target`` (an id, or the text of a broken
        link), of one relation or of all."""
        relations = (_check_relation(relation),) if relation is not None else RELATIONS
        if not isinstance(target, str) or not target.strip():
            raise InvalidInputError("target is empty; pass the id of the linked memory (get_links lists them).")
        self.readiness.await_first_index()
        src = self.access.note_as(source, "source")
        try:
            dst: NoteRow | None = self.access.note(target)
        except NoteNotFoundError:
            dst = None  # maybe the text of a broken link
        wanted = target.strip().lower()
        removed: list[dict[str, str]] = []

        def matches(text: str) -> bool:
            return self._points_to(text, dst) if dst is not None else text.lower() == wanted

        def change(meta: dict[str, Any]) -> bool:
            removed.clear()
            for rel in relations:
                if meta.get(rel) is None or (relation is None and not isinstance(meta[rel], str | list)):
                    continue  # asked for every relation: a key a person uses for something else is left be
                items = _items(meta, rel, src.path)
                keep = [item for item in items if not any(matches(t) for t in link_targets(item))]
                if len(keep) == len(items):
                    continue
                gone = [t for item in items for t in link_targets(item) if matches(t)]
                removed.extend({"relation": rel, "link": f"[[{t}]]"} for t in gone)
                if keep:
                    meta[rel] = keep
                else:
                    del meta[rel]
                _drop_reasons(meta, rel, gone)
            return bool(removed)

        version, changed = self._edit_frontmatter(src, change, "unlink")
        out: dict[str, Any] = {
            "source": src.note_id,
            "path": src.path,
            "target": dst.note_id if dst else target,
            "removed": list(removed),
            "changed": changed,
            "version": version,
        }
        if changed:
            return out
        if dst is None:
            raise InvalidInputError(
                f"No memory with id {target!r}, and {src.path} has no relation link written [[{target}]]. "
                f"Call get_links(id={source!r}) to see its links (unlink takes the linked memory's id, or the text "
                "of a broken link); memorize or list_memories find ids."
            )
        in_text = any(self._points_to(t, dst) for t, rel in self.catalog.links.links_from(src.path) if rel == "")
        out["note"] = (
            f"{src.path} links to {dst.path} in its text, not in a frontmatter relation; change the text with revise."
            if in_text
            else f"{src.path} has no {relation or 'relation'} link to {dst.path}; nothing changed."
        )
        return out

    def get_links(self, id: str) -> dict[str, Any]:
        """Outgoing links (relation, reason, resolved target) and backlinks (with their relation)."""
        self.readiness.await_first_index()
        note = self._fresh_note(id)
        links: list[dict[str, Any]] = []
        for target, relation in self.catalog.links.links_from(note.path):
            found = self.catalog.links.resolve_link(target)
            if found is not None and not self.access.visible(found):
                found = None  # another scope's memory: as if it did not exist
            item: dict[str, Any] = {"relation": relation or WIKILINK, "target": target, "resolved": found is not None}
            if found is not None:
                item.update(found.ref())
            why = _reason(note.meta, relation, target)
            if why:
                item["reason"] = self.access.scrub(why)[0]
            links.append(item)
        self._merged_into([item for item in links if not item["resolved"]])
        return {**note.ref(), "links": links, "backlinks": self._backlinks(note)}

    def explore_related(self, id: str, limit: int = 10) -> dict[str, Any]:
        """Notes related to this one by links both ways, shared tags, the same context and meaning,
        each with the reasons, strongest first."""
        if not 1 <= limit <= 50:
            raise InvalidInputError("limit must be between 1 and 50.")
        self.readiness.await_first_index()
        note = self._fresh_note(id)
        found: dict[str, dict[str, Any]] = {}

        def add(ref: dict[str, Any], weight: float, reason: dict[str, Any]) -> None:
            if ref["path"] == note.path:
                return
            entry = found.setdefault(ref["path"], {**ref, "score": 0.0, "reasons": []})
            entry["score"] += weight
            entry["reasons"].append(reason)

        for target, relation in self.catalog.links.links_from(note.path):
            other = self.catalog.links.resolve_link(target)
            if other is not None and self.access.visible(other):
                add(other.ref(), LINK_WEIGHT, {"kind": "links_to", "relation": relation or WIKILINK})
        for other in self._backlinks(note):
            add(
                {k: other[k] for k in ("id", "path", "title")},
                LINK_WEIGHT,
                {"kind": "linked_from", "relation": other["relation"]},
            )
        for other, shared in self.catalog.browse.sharing_tags(note.path, note.tags, limit * 3):
            if not self.access.visible(other):
                continue
            add(other.ref(), min(TAG_WEIGHT * len(shared), TAG_WEIGHT_MAX), {"kind": "same_tags", "tags": shared})
        if note.context:
            for other in self.catalog.browse.same_context(note.path, note.context, limit * 3):
                if not self.access.visible(other):
                    continue
                add(other.ref(), CONTEXT_WEIGHT, {"kind": "same_context", "context": other.context})
        for hit in self.search.similar(note.path, limit):
            if hit["similarity"] > 0:
                add(
                    {k: hit[k] for k in ("id", "path", "title")},
                    SIMILAR_WEIGHT * hit["similarity"],
                    {"kind": "similar", "similarity": hit["similarity"]},
                )
        found.pop(note.path, None)
        ranked = sorted(found.values(), key=lambda e: (-e["score"], e["path"]))[:limit]
        for entry in ranked:
            entry["score"] = round(entry["score"], 3)
            entry["why"] = "; ".join(_why(r) for r in entry["reasons"])
        return {**note.ref(), "related": ranked}

    # --- helpers ------------------------------------------------------------------------------
    def _edit_frontmatter(self, note: NoteRow, change: Any, tool: str) -> tuple[str, bool]:
        """Read the note, let ``change(meta)`` edit its frontmatter (True if it did), write it back
        only if the file is still what was read, and index it. Returns (version, changed)."""
        for _ in range(EDIT_ATTEMPTS):
            try:
                state = self.vault.read(note.path)
            except FileNotFoundError:
                self.indexer.sync_path(note.path)
                raise NoteNotFoundError(note.note_id) from None
            parsed = parse_note(state.text)
            if parsed.problem:
                raise InvalidInputError(
                    f"{note.path} has {parsed.problem}. Fix its frontmatter by hand (or ask the person to), then retry."
                )
            meta = copy.deepcopy(parsed.meta)
            if not change(meta):
                return state.version, False
            meta.setdefault("id", note.note_id)  # a hand-written note keeps the id it was found under
            meta["updated"] = now_iso()
            removed = tuple(k for k in parsed.meta if k not in meta)
            text = render_note(meta, parsed.body, original=parsed, remove=removed)
            try:
                version = self.vault.write(note.path, text, expected_version=state.version)
            except FileChangedError:
                log.info("%s changed on disk while linking; applying the change to the new version", note.path)
                continue
            self.indexer.sync_path(note.path)
            self.recorder.after_write(
                tool, note.path, meta.get("title") or note.title, note.note_id, text, before=state.text
            )
            return version, True
        raise SpellbookError(
            f"{note.path} kept changing on disk while Spellbook edited its links ({EDIT_ATTEMPTS} tries); nothing "
            "was written. Retry in a moment."
        )

    def _fresh_note(self, note_id: str) -> NoteRow:
        """The note's catalog row, re-indexed first if its file changed since."""
        note = self.access.note(note_id)
        if file_changed(self.vault, self.catalog.file(note.path), note.path):
            self.indexer.sync_path(note.path)
            note = self.access.note(note_id)
        return note

    def _points_to(self, text: str, note: NoteRow) -> bool:
        found = self.catalog.links.resolve_link(text)
        return found is not None and found.path == note.path

    def link_text(self, note: NoteRow) -> str:
        """What to write inside [[...]]: the file name, as Obsidian links (for memories Spellbook
        wrote, that is the title), or the vault path when another note answers to that name."""
        stem = note.path.rsplit("/", 1)[-1].removesuffix(".md")
        if not _UNLINKABLE.search(stem):
            matches = self.catalog.links.link_matches(stem, 2)
            if len(matches) == 1 and matches[0].path == note.path:
                return stem
        path = note.path.removesuffix(".md")
        if _UNLINKABLE.search(path):
            raise InvalidInputError(
                f"{note.path}: its name holds a character a [[link]] cannot carry ([ ] | # ^); rename the file first."
            )
        return path

    def _check_reason(self, reason: str | None) -> str | None:
        if reason is None:
            return None
        if not isinstance(reason, str):
            raise InvalidInputError("reason must be a string.")
        reason = " ".join(reason.split())
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidInputError(f"reason is {len(reason)} characters; keep it under {MAX_REASON_CHARS}.")
        return self.access.scrub(reason)[0] or None

    def _merged_into(self, unresolved: list[dict[str, Any]]) -> None:
        """``merged_into`` (the survivor, when the call sees it) on each link to a note a merge moved
        to ``.trash/`` (a merge does not relink a note of a scope it cannot see)."""
        wanted = {link_key(item["target"]) for item in unresolved}
        survivors: dict[str, str] = {}
        for path in self.vault.trashed() if wanted else ():
            inside = path.split("/", 1)[1].removesuffix(".md")
            for key in {link_key(inside), link_key(inside.rsplit("/", 1)[-1])} & wanted:
                with contextlib.suppress(OSError, SpellbookError):
                    if into := str(parse_note(self.vault.read(path).text).meta.get("merged_into") or "").strip():
                        survivors[key] = into
        for item in unresolved:
            with contextlib.suppress(KeyError, NoteNotFoundError):
                item["merged_into"] = self.access.note(survivors[link_key(item["target"])]).ref()

    def _backlinks(self, note: NoteRow) -> list[dict[str, Any]]:
        """Notes linking to this one (that resolve to it), one entry per note and relation."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for other, target, relation in self.catalog.links.inbound(note):
            if (other.path, relation) in out or not self.access.visible(other) or not self._points_to(target, note):
                continue
            item = {**other.ref(), "relation": relation or WIKILINK}
            why = _reason(other.meta, relation, target)
            if why:
                item["reason"] = self.access.scrub(why)[0]
            out[(other.path, relation)] = item
        return list(out.values())


def _check_relation(relation: Any) -> str:
    if relation not in RELATIONS:
        raise InvalidInputError(f"relation must be one of {', '.join(RELATIONS)}; got {relation!r}.")
    return relation


def _items(meta: dict[str, Any], relation: str, path: str) -> list[Any]:
    """The items of a relation key, as a list (a person may have written one string)."""
    value = meta.get(relation)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return list(value)
    raise InvalidInputError(
        f"{path}: the frontmatter key {relation!r} holds a {type(value).__name__}, not a list of [[links]]; "
        "rename or fix it by hand, then retry."
    )


def _reasons(meta: dict[str, Any], path: str) -> dict[str, Any]:
    value = meta.get(LINK_REASONS)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"{path}: the frontmatter key {LINK_REASONS!r} is a {type(value).__name__}, not a mapping; fix it by hand."
        )
    return value


def _reason(meta: dict[str, Any], relation: str, target: str) -> str | None:
    reasons = meta.get(LINK_REASONS)
    per = reasons.get(relation) if isinstance(reasons, dict) and relation else None
    if not isinstance(per, dict):
        return None
    if target in per:
        return str(per[target])
    return next((str(v) for k, v in per.items() if str(k).lower() == target.lower()), None)


def _drop_reasons(meta: dict[str, Any], relation: str, texts: list[str]) -> None:
    reasons = meta.get(LINK_REASONS)
    if not isinstance(reasons, dict) or not isinstance(reasons.get(relation), dict):
        return
    lowered = {t.lower() for t in texts}
    per = {k: v for k, v in reasons[relation].items() if str(k).lower() not in lowered}
    if per:
        reasons[relation] = per
    else:
        del reasons[relation]
    if not reasons:
        del meta[LINK_REASONS]


def _why(reason: dict[str, Any]) -> str:
    kind = reason["kind"]
    if kind == "links_to":
        return f"this note {_PHRASES[reason['relation']]} it"
    if kind == "linked_from":
        return f"it {_PHRASES[reason['relation']]} this note"
    if kind == "same_tags":
        return "shares tags " + ", ".join(reason["tags"])
    if kind == "same_context":
        return f"same context {reason['context']}"
    return f"similar in meaning ({reason['similarity']:.2f})"
