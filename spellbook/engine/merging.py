"""Merging: what ``merge`` does. Several memories become one; the survivor keeps its id and file.

The survivor's file receives the others' text (each under a ``## <title>`` heading, in the order
given, unless the caller passes the text) and the union of their tags, keywords, questions,
entities, ``links`` and relation links; the others move to ``.trash/`` (as ``erase`` moves them)
with ``merged_into: <survivor id>`` in their frontmatter; every note the call's scope sees whose
links named one of them now names the survivor (``vault/relink.py``: only the link target
changes). A note of a scope the call cannot see is not written: its link keeps its target, which
is now in ``.trash/``, and ``get_links`` says which memory it was merged into when that scope sees
it. One git commit records it all, and the index is brought up to date in one pass.

Nothing is lost on the way, whoever else writes meanwhile:

1. Every check (ids, scope, the survivor's ``version`` as ``revise`` checks it, readable
   frontmatter, the size of the result, no symbolic link on the way into ``.trash/``) runs before
   a file moves.
2. The others move to ``.trash/`` first: a rename, so each file's last bytes, a person's edit
   made a moment before included, are what the survivor receives (read back from the trash).
3. The survivor is written only if it is still the version read in 1; if not, the others move
   back to where they were and the caller gets the ``ConflictError`` with the current text.
4. A note that links to them is rewritten with a version check; a person saving it in between
   gets the change applied on their version (``EDIT_ATTEMPTS`` times), never overwritten.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from spellbook.config import Settings
from spellbook.engine.access import Access, Readiness
from spellbook.engine.history import Recorder
from spellbook.engine.links import Links
from spellbook.engine.memories import MAX_TEXT_CHARS, check_text
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, SpellbookError
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.indexer import Indexer
from spellbook.index.links import aliases_of
from spellbook.vault.fields import LINK_REASONS, MAX_LIST_ITEMS, normalize_tags, title_of
from spellbook.vault.note import ParsedNote, now_iso, parse_note, render_note
from spellbook.vault.paths import MAX_FILE_BYTES
from spellbook.vault.privacy import describe
from spellbook.vault.relink import LINK_KEYS, link_key, relink_meta, relink_note, relink_text, targets_of
from spellbook.vault.store import TRASH_DIR, FileState, Vault

log = logging.getLogger(__name__)

MAX_MERGE = 50  # ids per call
EDIT_ATTEMPTS = 3  # a person saving a linking note in between: read it again and relink their version
TEXT_LISTS = ("keywords", "questions", "entities")  # unioned as written; tags are unioned case-insensitively


class Merging:
    """Merging memories into one (``merge``)."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        indexer: Indexer,
        access: Access,
        readiness: Readiness,
        recorder: Recorder,
        links: Links,
    ) -> None:
        self.settings = settings
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.access = access
        self.readiness = readiness
        self.recorder = recorder
        self.links = links

    def merge(
        self, ids: list[str], into: str | None = None, version: str | None = None, text: str | None = None
    ) -> dict[str, Any]:
        wanted = _check_ids(ids)
        found: list[Any] = []
        if text is not None:
            text, found = self.access.scrub(check_text(text, MAX_TEXT_CHARS))
        self.readiness.await_first_index()
        survivor = self.access.note_as(wanted[0] if into is None else into, "survivor")
        others = [
            row for row in (self.access.note_as(i, "memory to merge") for i in wanted) if row.path != survivor.path
        ]
        state = self._read(survivor)
        if version is not None and version != state.version:
            raise FileChangedError(
                survivor.path, version, state.version, state.text, note_id=survivor.note_id, retry="merge"
            )
        parsed = _parsed(survivor.path, state.text)
        target = self.links.link_text(survivor)
        names = self._names(others)
        sources = self._linking(others, {survivor.path, *(o.path for o in others)})
        first = [(o, _parsed(o.path, self._read(o).text)) for o in others]
        self._compose(survivor, parsed, first, text, names, target)  # every check, before a file moves
        for other in others:
            self.vault.check_move(TRASH_DIR, other.path)

        trashed: dict[str, str] = {}
        try:
            for other in others:
                trashed[other.path] = self.vault.trash(other.path)
            finals = [self.vault.read(trashed[o.path]) for o in others]  # their last bytes: nobody edits the trash
            parts = [(o, _parsed(o.path, s.text)) for o, s in zip(others, finals, strict=True)]
            merged = self._compose(survivor, parsed, parts, text, names, target)
            try:
                new_version = self.vault.write(survivor.path, merged, expected_version=state.version)
            except FileChangedError as exc:
                raise exc.naming(survivor.note_id, "merge") from None
        except BaseException:
            self._put_back(trashed)
            raise
        for (other, part), final in zip(parts, finals, strict=True):
            self._mark(trashed[other.path], final, part, survivor.note_id)
        relinked, failed = self._relink(sources, names, target)
        report = self.indexer.sync_paths([survivor.path, *trashed, *(row.path for row, _, _ in relinked)])
        files: dict[str, str | None] = {survivor.path: merged, **dict.fromkeys(trashed)}
        files.update((row.path, written) for row, written, _ in relinked)
        self.recorder.after_writes(
            "merge",
            files,
            survivor.title,
            survivor.note_id,
            state.text,
            detail=f"with {len(others)} {'memory' if len(others) == 1 else 'memories'}",
            removed={o.path: f.text for o, f in zip(others, finals, strict=True)},
        )
        out: dict[str, Any] = {
            "id": survivor.note_id,
            "path": survivor.path,
            "title": survivor.title,
            "version": new_version,
            "updated": parse_note(merged).meta.get("updated"),
            "merged": [{**o.ref(), "trash_path": trashed[o.path]} for o in others],
            "relinked": [{**row.ref(), "links": n} for row, _, n in relinked],
            "committing": self.recorder.git.enabled,
        }
        return self._remarks(out, failed, target, report.embedder_error if report.vectors_missing else None, found)

    def _remarks(
        self,
        out: dict[str, Any],
        failed: list[tuple[NoteRow, str]],
        target: str,
        embedder_error: str | None,
        found: list[Any],
    ) -> dict[str, Any]:
        """The optional keys of the result: notes not relinked, vectors missing, and what the
        privacy filter replaced in the text passed."""
        notes = [
            f"{row.path} still links to a merged memory ({why}); point it at [[{target}]] by hand."
            for row, why in failed
        ]
        if embedder_error is not None:
            notes.append(f"Saved, and findable by keyword search, but not embedded yet: {embedder_error}")
        if failed:
            out["not_relinked"] = [{**row.ref(), "reason": why} for row, why in failed]
        if notes:
            out["note"] = " ".join(notes)
        if found:
            out["redacted"] = describe([r.kind for r in found])
        return out

    # --- the survivor -------------------------------------------------------------------------
    def _compose(
        self,
        survivor: NoteRow,
        parsed: ParsedNote,
        parts: list[tuple[NoteRow, ParsedNote]],
        text: str | None,
        names: set[str],
        target: str,
    ) -> str:
        """The survivor's new file: its frontmatter with the others' fields added, and the text."""
        metas = [parsed.meta, *(p.meta for _, p in parts)]
        meta = copy.deepcopy(parsed.meta)
        meta.setdefault("id", survivor.note_id)  # a hand-written note keeps the id it was found under
        tags = _union([normalize_tags(m.get("tags")) + normalize_tags(m.get("tag")) for m in metas], str.casefold)
        if len(tags) > len(_union([normalize_tags(parsed.meta.get("tags"))], str.casefold)):
            meta["tags"] = tags
        for key in TEXT_LISTS:
            union = _union([[str(v).strip() for v in _items(m.get(key)) if str(v).strip()] for m in metas], str)
            if len(union) > len(_items(parsed.meta.get(key))):
                meta[key] = union
        reasons = _reasons(metas)
        if reasons:
            meta[LINK_REASONS] = reasons
        for key in LINK_KEYS:
            meta[key] = [item for m in metas for item in _items(m.get(key))]
        meta, _ = relink_meta(meta, names, target)
        removed = self._keep_links(meta, survivor, target, parsed.meta)
        nl = parsed.newline
        if text is None:
            sections = [parsed.body.rstrip("\r\n")] if parsed.body.strip() else []
            for other, part in parts:
                heading = title_of(part.meta, other.path)
                sections.append(f"## {heading}{nl}{nl}{part.body.strip(chr(13) + chr(10))}")
            text = (nl + nl).join(sections) + nl
        body, _ = relink_text(text, names, target)
        meta["updated"] = now_iso()
        merged = render_note(meta, body, original=parsed, remove=removed)
        if len(merged.encode("utf-8")) > MAX_FILE_BYTES:
            raise InvalidInputError(
                f"The merged memory would be {len(merged.encode('utf-8')) // 2**20} MB, over the "
                f"{MAX_FILE_BYTES // 2**20} MB Spellbook indexes; merge fewer memories, or pass a shorter text."
            )
        return merged

    def _keep_links(
        self, meta: dict[str, Any], survivor: NoteRow, target: str, before: dict[str, Any]
    ) -> tuple[str, ...]:
        """Each link key once per target, without links to the survivor itself (it now holds the
        merged notes); keys left as they were are put back untouched. Returns the keys to remove."""
        removed: list[str] = []
        for key in LINK_KEYS:
            kept: list[Any] = []
            seen: set[Any] = set()
            for item in meta[key]:
                found = targets_of(item)
                if found and all(self._is_self(t, survivor, target) for t in found):
                    continue
                mark = tuple(link_key(t) for t in found) or repr(item)
                if mark not in seen:
                    seen.add(mark)
                    kept.append(item)
            if kept == _items(before.get(key)) or (not kept and key not in before):
                meta.pop(key)
                if key in before:
                    meta[key] = before[key]  # unchanged: the person's bytes stay
            elif kept:
                meta[key] = kept
            else:
                meta.pop(key)
                removed.append(key)
        reasons = meta.get(LINK_REASONS)
        if isinstance(reasons, dict):
            for relation in list(reasons):
                listed = {link_key(t) for item in _items(meta.get(relation)) for t in targets_of(item)}
                per = reasons[relation]
                if isinstance(per, dict):
                    reasons[relation] = {k: v for k, v in per.items() if link_key(str(k)) in listed}
                    if not reasons[relation]:
                        del reasons[relation]
            if not reasons:
                meta.pop(LINK_REASONS)
                if LINK_REASONS in before:
                    removed.append(LINK_REASONS)
        return tuple(removed)

    def _is_self(self, link: str, survivor: NoteRow, target: str) -> bool:
        if link_key(link) == link_key(target):
            return True
        found = self.catalog.links.resolve_link(link)
        return found is not None and found.path == survivor.path

    # --- the others ---------------------------------------------------------------------------
    def _names(self, others: list[NoteRow]) -> set[str]:
        """Every link text (``link_key`` form) that resolves to one of the merged notes: those
        written in the vault, and the note's own names (file name, path, title, aliases)."""
        names: set[str] = set()
        for other in others:
            path = other.path.removesuffix(".md")
            written = [t for _, t, _ in self.catalog.links.inbound(other)]
            for name in {*written, path, path.rsplit("/", 1)[-1], other.title, *map(str, aliases_of(other.meta))}:
                found = self.catalog.links.resolve_link(name) if name.strip() else None
                if found is not None and found.path == other.path:
                    names.add(link_key(name))
        return names

    def _linking(self, others: list[NoteRow], merged: set[str]) -> list[NoteRow]:
        """The notes the call's scope sees that link to one of the merged notes, besides those
        being merged (another scope's notes are not the call's to write)."""
        found = {row.path: row for other in others for row, _, _ in self.catalog.links.inbound(other)}
        return [row for path, row in sorted(found.items()) if path not in merged and self.access.visible(row)]

    def _mark(self, trash_path: str, state: FileState, parsed: ParsedNote, survivor_id: str) -> None:
        """``merged_into`` in a merged note's frontmatter, in the trash."""
        text = render_note({**parsed.meta, "merged_into": survivor_id}, parsed.body, original=parsed)
        try:
            self.vault.write(trash_path, text, expected_version=state.version)
        except (OSError, SpellbookError) as exc:  # the merge is done; the copy in the trash keeps its text
            log.warning("merge: could not record merged_into in %s: %s", trash_path, exc)

    def _put_back(self, trashed: dict[str, str]) -> None:
        for path, trash_path in trashed.items():
            try:
                if not self.vault.untrash(trash_path, path):
                    log.warning("merge: %s was taken meanwhile; the note stays at %s", path, trash_path)
            except OSError as exc:
                log.warning("merge: could not move %s back to %s: %s", trash_path, path, exc)

    def _relink(
        self, sources: list[NoteRow], names: set[str], target: str
    ) -> tuple[list[tuple[NoteRow, str, int]], list[tuple[NoteRow, str]]]:
        """Point every link of ``sources`` to a merged note at the survivor. Returns (note, text
        written, links changed) for each note rewritten, and (note, why) for each that was not."""
        done: list[tuple[NoteRow, str, int]] = []
        failed: list[tuple[NoteRow, str]] = []
        for row in sources:
            for _ in range(EDIT_ATTEMPTS):
                try:
                    state = self.vault.read(row.path)
                except FileNotFoundError:
                    break  # deleted meanwhile: nothing links any more
                except (OSError, SpellbookError) as exc:
                    failed.append((row, str(exc)))
                    break
                written, changed = relink_note(state.text, names, target)
                if not changed:
                    break
                try:
                    self.vault.write(row.path, written, expected_version=state.version)
                except FileChangedError:
                    continue  # a person saved it in between: relink their version
                except (OSError, SpellbookError) as exc:
                    failed.append((row, str(exc)))
                    break
                done.append((row, written, changed))
                break
            else:
                failed.append((row, f"it kept changing on disk ({EDIT_ATTEMPTS} tries)"))
        return done, failed

    def _read(self, row: NoteRow) -> FileState:
        try:
            return self.vault.read(row.path)
        except FileNotFoundError:
            self.indexer.sync_path(row.path)
            raise NoteNotFoundError(row.note_id) from None


def _check_ids(ids: Any) -> list[str]:
    if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
        raise InvalidInputError("ids must be a list of memory ids (from memorize or list_memories).")
    wanted = [i.strip() for i in ids]
    if any(not i for i in wanted):
        raise InvalidInputError("An id in ids is empty; pass the ids of the memories to merge.")
    if len(wanted) < 2:
        raise InvalidInputError(
            "merge needs at least 2 ids: the memories to merge, the one that keeps its id first (or named in into). "
            "To change one memory, call revise."
        )
    if len(wanted) > MAX_MERGE:
        raise InvalidInputError(f"merge takes at most {MAX_MERGE} ids a call; merge in several steps.")
    twice = sorted({i for i in wanted if wanted.count(i) > 1})
    if twice:
        raise InvalidInputError(f"ids lists {', '.join(map(repr, twice))} more than once; pass each memory once.")
    return wanted


def _parsed(path: str, text: str) -> ParsedNote:
    parsed = parse_note(text)
    if parsed.problem:
        raise InvalidInputError(
            f"{path} has {parsed.problem}. Fix its frontmatter by hand (or ask the person to), then merge again."
        )
    return parsed


def _items(value: Any) -> list[Any]:
    """A frontmatter list as a list (a person may have written one string)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _union(lists: list[list[Any]], key: Any) -> list[Any]:
    """The items of ``lists`` in order, each once (by ``key``), at most ``MAX_LIST_ITEMS``."""
    seen: dict[Any, Any] = {}
    for items in lists:
        for item in items:
            seen.setdefault(key(item), item)
    return list(seen.values())[:MAX_LIST_ITEMS]


def _reasons(metas: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``link_reasons`` of every note, the survivor's first when two give one for the same link."""
    out: dict[str, dict[str, Any]] = {}
    for meta in metas:
        reasons = meta.get(LINK_REASONS)
        for relation, per in reasons.items() if isinstance(reasons, dict) else ():
            if isinstance(per, dict):
                for link, why in per.items():
                    out.setdefault(str(relation), {}).setdefault(str(link), why)
    return out
