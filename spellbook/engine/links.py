"""Links between memories and the health of the knowledge: what ``link``, ``unlink``,
``get_links``, ``explore_related`` and ``analyze_knowledge`` do.

A mixin of the engine (it uses the engine's vault, indexer, catalog, vectors and settings). A
link lives in the source note's frontmatter, one list of ``"[[wikilinks]]"`` per relation
(``related: ["[[Other]]"]``; docs/note-format.md), so Obsidian's graph shows it and the vault
stays the source of truth; the indexer records each link with its relation in the catalog.
Writes go through the vault store with a version check; when a person saves the note between
the read and the write, the change is applied again on their version, never over it.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import re
import time
from typing import Any

from spellbook.errors import ConflictError, InvalidInputError, NoteNotFoundError, SpellbookError
from spellbook.index.catalog import NoteRow
from spellbook.indexing.indexer import file_changed
from spellbook.vault.fields import LINK_REASONS, MAX_LIST_ITEMS, RELATIONS, link_targets
from spellbook.vault.note import now_iso, parse_note, render_note

log = logging.getLogger(__name__)

WIKILINK = "wikilink"  # the relation reported for a plain [[link]] in a note's text or `links`
MAX_REASON_CHARS = 500
EDIT_ATTEMPTS = 3  # a person saving the note in between: re-read and apply the change again
STALE_DAYS = 180
LISTED_NOTES = 20  # notes named per issue; the rest are counted in `more`
ISSUES_PER_KIND = 20  # pair and group issues (near-duplicates, tag spellings, broken links) per kind
DUPLICATE_SCAN_NOTES = 2_000  # near-duplicates: the most recently updated notes, compared pairwise
# analyze_knowledge: score = 100 - sum(weight x share of the kind); docs/knowledge.md
WEIGHTS = {"untagged": 20, "isolated": 25, "stale": 15, "near_duplicate": 15, "broken_link": 15, "similar_tags": 10}
# explore_related: how much each kind of evidence counts
LINK_WEIGHT, TAG_WEIGHT, TAG_WEIGHT_MAX, CONTEXT_WEIGHT, SIMILAR_WEIGHT = 1.0, 0.25, 0.75, 0.4, 0.5

_UNLINKABLE = re.compile(r"[\[\]|#^]")  # characters a [[link]] cannot carry
_PHRASES = {
    "related": "is related to", "supersedes": "supersedes", "contradicts": "contradicts",
    "extends": "extends", "depends_on": "depends on", WIKILINK: "links to",
}


class Knowledge:
    """Link and knowledge-health methods of the engine (``Engine`` inherits them)."""

    # --- links --------------------------------------------------------------------------------
    def link(self, source: str, target: str, relation: str = "related", reason: str | None = None) -> dict[str, Any]:
        """Write ``[[target]]`` into the source note's ``relation`` list (once), and the reason."""
        relation = _check_relation(relation)
        reason = self._check_reason(reason)
        self._await_first_index()
        src = self._note_as(source, "source")
        dst = self._note_as(target, "link target")
        if src.path == dst.path:
            raise InvalidInputError(f"A memory cannot link to itself ({src.path}); pass two different ids.")
        text = self._link_text(dst)
        written: dict[str, str] = {}

        def change(meta: dict[str, Any]) -> bool:
            items = _items(meta, relation, src.path)
            key = next((t for item in items for t in link_targets(item) if self._points_to(t, dst)), None)
            changed = key is None
            if key is None:
                if len(items) >= MAX_LIST_ITEMS:
                    raise InvalidInputError(
                        f"{src.path} already has {len(items)} {relation} links; unlink some first."
                    )
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
            "source": src.note_id, "path": src.path, "target": dst.note_id, "target_path": dst.path,
            "target_title": dst.title, "relation": relation, "link": written["link"], "reason": reason,
            "changed": changed, "version": version,
        }

    def unlink(self, source: str, target: str, relation: str | None = None) -> dict[str, Any]:
        """Remove the source note's frontmatter links to ``target`` (an id, or the text of a broken
        link), of one relation or of all."""
        relations = (_check_relation(relation),) if relation is not None else RELATIONS
        if not isinstance(target, str) or not target.strip():
            raise InvalidInputError("target is empty; pass the id of the linked memory (get_links lists them).")
        self._await_first_index()
        src = self._note_as(source, "source")
        try:
            dst: NoteRow | None = self._note(target)
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
            "source": src.note_id, "path": src.path, "target": dst.note_id if dst else target,
            "removed": list(removed), "changed": changed, "version": version,
        }
        if changed:
            return out
        if dst is None:
            raise InvalidInputError(
                f"No memory with id {target!r}, and {src.path} has no relation link written [[{target}]]. "
                f"Call get_links(id={source!r}) to see its links (unlink takes the linked memory's id, or the text "
                "of a broken link); memorize or list_memories find ids."
            )
        in_text = any(self._points_to(t, dst) for t, rel in self.catalog.links_from(src.path) if rel == "")
        out["note"] = (
            f"{src.path} links to {dst.path} in its text, not in a frontmatter relation; change the text with revise."
            if in_text else f"{src.path} has no {relation or 'relation'} link to {dst.path}; nothing changed."
        )
        return out

    def get_links(self, id: str) -> dict[str, Any]:
        """Outgoing links (relation, reason, resolved target) and backlinks (with their relation)."""
        self._await_first_index()
        note = self._fresh_note(id)
        links: list[dict[str, Any]] = []
        for target, relation in self.catalog.links_from(note.path):
            found = self.catalog.resolve_link(target)
            if found is not None and not self._visible(found):
                found = None  # another scope's memory: as if it did not exist
            item: dict[str, Any] = {"relation": relation or WIKILINK, "target": target, "resolved": found is not None}
            if found is not None:
                item.update(found.ref())
            why = _reason(note.meta, relation, target)
            if why:
                item["reason"] = self._scrub(why)[0]
            links.append(item)
        return {**note.ref(), "links": links, "backlinks": self._backlinks(note)}

    def explore_related(self, id: str, limit: int = 10) -> dict[str, Any]:
        """Notes related to this one by links both ways, shared tags, the same context and meaning,
        each with the reasons, strongest first."""
        if not 1 <= limit <= 50:
            raise InvalidInputError("limit must be between 1 and 50.")
        self._await_first_index()
        note = self._fresh_note(id)
        found: dict[str, dict[str, Any]] = {}

        def add(ref: dict[str, Any], weight: float, reason: dict[str, Any]) -> None:
            if ref["path"] == note.path:
                return
            entry = found.setdefault(ref["path"], {**ref, "score": 0.0, "reasons": []})
            entry["score"] += weight
            entry["reasons"].append(reason)

        for target, relation in self.catalog.links_from(note.path):
            other = self.catalog.resolve_link(target)
            if other is not None and self._visible(other):
                add(other.ref(), LINK_WEIGHT, {"kind": "links_to", "relation": relation or WIKILINK})
        for other in self._backlinks(note):
            add({k: other[k] for k in ("id", "path", "title")}, LINK_WEIGHT,
                {"kind": "linked_from", "relation": other["relation"]})
        for other, shared in self.catalog.sharing_tags(note.path, note.tags, limit * 3):
            if not self._visible(other):
                continue
            add(other.ref(), min(TAG_WEIGHT * len(shared), TAG_WEIGHT_MAX), {"kind": "same_tags", "tags": shared})
        if note.context:
            for other in self.catalog.same_context(note.path, note.context, limit * 3):
                if not self._visible(other):
                    continue
                add(other.ref(), CONTEXT_WEIGHT, {"kind": "same_context", "context": other.context})
        for hit in self._similar(note.path, limit):
            if hit["similarity"] > 0:
                add({k: hit[k] for k in ("id", "path", "title")}, SIMILAR_WEIGHT * hit["similarity"],
                    {"kind": "similar", "similarity": hit["similarity"]})
        found.pop(note.path, None)
        ranked = sorted(found.values(), key=lambda e: (-e["score"], e["path"]))[:limit]
        for entry in ranked:
            entry["score"] = round(entry["score"], 3)
            entry["why"] = "; ".join(_why(r) for r in entry["reasons"])
        return {**note.ref(), "related": ranked}

    # --- knowledge health ---------------------------------------------------------------------
    def analyze_knowledge(self, stale_days: int = STALE_DAYS) -> dict[str, Any]:
        """A health score (0-100) and the issues behind it, each with the notes and what to do."""
        if not isinstance(stale_days, int) or not 1 <= stale_days <= 36_500:
            raise InvalidInputError("stale_days must be a whole number of days between 1 and 36500.")
        self._await_first_index()
        notes = {
            n.path: (n, mtime) for n, mtime in self.catalog.overview()
            if (n.category or "").lower() != "system" and self._visible(n)
        }
        total = len(notes)
        refs = {path: n.ref() for path, (n, _) in notes.items()}
        issues: list[dict[str, Any]] = []
        more: dict[str, int] = {}

        untagged = [p for p, (n, _) in notes.items() if not n.tags]
        if untagged:
            issues.append(_issue("untagged", [refs[p] for p in untagged],
                                 "Add tags with revise(id, tags=[...]) (or #tags in the text) so filters and "
                                 "explore_related find them."))

        graph = self.catalog.link_graph()
        linked = [(source, resolved) for source, _, _, resolved in graph if resolved and resolved != source]
        connected = {p for pair in linked for p in pair}
        isolated = [p for p in notes if p not in connected]
        if isolated:
            issues.append(_issue("isolated", [refs[p] for p in isolated],
                                 "No links in or out: call explore_related(id) for candidates, then link(source, "
                                 "target, relation)."))

        cutoff = time.time() - stale_days * 86_400
        when = {p: _timestamp(n.updated or n.created) or mtime / 1e9 for p, (n, mtime) in notes.items()}
        stale = sorted((p for p in notes if when[p] < cutoff), key=lambda p: (when[p], p))
        if stale:
            listed = [{**refs[p], "updated": _iso(when[p])} for p in stale]
            issues.append(_issue("stale", listed,
                                 f"Not updated in {stale_days} days: check each is still true; revise it, link a "
                                 "newer memory to it with relation 'supersedes', or erase it."))

        seen_tags = {t.casefold() for n, _ in notes.values() for t in n.tags}
        tag_counts = [(t, c) for t, c in self.catalog.tag_counts() if t.casefold() in seen_tags]
        groups = _tag_groups(tag_counts)
        for group in groups[:ISSUES_PER_KIND]:
            issues.append(self._tag_issue(group, refs))
        if len(groups) > ISSUES_PER_KIND:
            more["similar_tags"] = len(groups) - ISSUES_PER_KIND

        pairs, pair_count, scanned = self._near_duplicates(sorted(notes, key=lambda p: (-when[p], p)))
        for similarity, a, b in pairs[:ISSUES_PER_KIND]:
            issues.append({
                "kind": "near_duplicate", "similarity": round(similarity, 4), "notes": [refs[a], refs[b]],
                "action": "Merge them: revise one with what the other adds and erase the other, or, if one "
                          "replaces the other, link(newer, older, 'supersedes').",
            })
        if pair_count > ISSUES_PER_KIND:
            more["near_duplicate"] = pair_count - ISSUES_PER_KIND

        broken = [(s, t, r) for s, t, r, resolved in graph if resolved is None and s in notes]
        for source, target, relation in broken[:ISSUES_PER_KIND]:
            fix = (f"unlink(source={refs[source]['id']!r}, target={target!r})" if relation
                   else "revise the text that holds the link")
            issues.append({
                "kind": "broken_link", "notes": [refs[source]], "target": target, "relation": relation or WIKILINK,
                "action": f"No note is named {target!r}: fix the link text, create that note, or remove the link "
                          f"({fix}).",
            })
        if len(broken) > ISSUES_PER_KIND:
            more["broken_link"] = len(broken) - ISSUES_PER_KIND

        duplicated = {p for _, a, b in pairs for p in (a, b)}
        variant_tags = sum(len(g) for g in groups)
        shares = {
            "untagged": len(untagged) / total if total else 0.0,
            "isolated": len(isolated) / total if total else 0.0,
            "stale": len(stale) / total if total else 0.0,
            "near_duplicate": len(duplicated) / scanned if scanned else 0.0,
            "broken_link": len(broken) / len(graph) if graph else 0.0,
            "similar_tags": variant_tags / len(tag_counts) if tag_counts else 0.0,
        }
        penalty = sum(WEIGHTS[kind] * share for kind, share in shares.items())
        return {
            "score": max(0, round(100 - penalty)),
            "notes": total,
            "counts": {
                "untagged": len(untagged), "isolated": len(isolated), "stale": len(stale),
                "similar_tag_groups": len(groups), "near_duplicate_pairs": pair_count, "broken_links": len(broken),
                "links": len(graph), "tags": len(tag_counts),
            },
            "shares": {k: round(v, 3) for k, v in shares.items()},
            "stale_days": stale_days,
            "near_duplicates_checked": {
                "notes": scanned, "of": total, "threshold": self.settings.duplicate_similarity,
            },
            "issues": issues,
            "more_issues": more,
        }

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
            except ConflictError:
                log.info("%s changed on disk while linking; applying the change to the new version", note.path)
                continue
            self.indexer.sync_path(note.path)
            self._after_write(tool, note.path, meta.get("title") or note.title, note.note_id, text, before=state.text)
            return version, True
        raise SpellbookError(
            f"{note.path} kept changing on disk while Spellbook edited its links ({EDIT_ATTEMPTS} tries); nothing "
            "was written. Retry in a moment."
        )

    def _note_as(self, note_id: str, role: str) -> NoteRow:
        try:
            return self._note(note_id)
        except NoteNotFoundError:
            raise NoteNotFoundError(note_id, role) from None

    def _fresh_note(self, note_id: str) -> NoteRow:
        """The note's catalog row, re-indexed first if its file changed since."""
        note = self._note(note_id)
        if file_changed(self.vault, self.catalog.file(note.path), note.path):
            self.indexer.sync_path(note.path)
            note = self._note(note_id)
        return note

    def _points_to(self, text: str, note: NoteRow) -> bool:
        found = self.catalog.resolve_link(text)
        return found is not None and found.path == note.path

    def _link_text(self, note: NoteRow) -> str:
        """What to write inside [[...]]: the file name, as Obsidian links (for memories Spellbook
        wrote, that is the title), or the vault path when another note answers to that name."""
        stem = note.path.rsplit("/", 1)[-1].removesuffix(".md")
        if not _UNLINKABLE.search(stem):
            matches = self.catalog.link_matches(stem, 2)
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
        return self._scrub(reason)[0] or None

    def _backlinks(self, note: NoteRow) -> list[dict[str, Any]]:
        """Notes linking to this one (that resolve to it), one entry per note and relation."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for other, target, relation in self.catalog.inbound(note):
            if (other.path, relation) in out or not self._visible(other) or not self._points_to(target, note):
                continue
            item = {**other.ref(), "relation": relation or WIKILINK}
            why = _reason(other.meta, relation, target)
            if why:
                item["reason"] = self._scrub(why)[0]
            out[(other.path, relation)] = item
        return list(out.values())

    def _tag_issue(self, group: list[tuple[str, int]], refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """One tag spelled several ways: the notes to retag (those not using the suggested spelling)."""
        best = max(group, key=lambda tn: (tn[1], tn[0] == tn[0].lower(), -len(tn[0]), tn[0]))[0]
        others = [tag for tag, _ in group if tag != best]
        paths = list(dict.fromkeys(p for tag in others for p in self.catalog.paths_tagged(tag, LISTED_NOTES)))
        listed = [refs[p] for p in paths if p in refs][:LISTED_NOTES]
        count = max(len(listed), sum(n for tag, n in group if tag != best))
        return {
            "kind": "similar_tags", "tags": dict(group), "suggested": best, "count": count, "notes": listed,
            "more": count - len(listed),
            "action": f"Use one spelling: retag these notes from {', '.join(others)} to {best} (revise tags; "
                      "#tags in a note's text are changed in its text).",
        }

    def _near_duplicates(self, paths: list[str]) -> tuple[list[tuple[float, str, str]], int, int]:
        """Pairs of notes (of the first DUPLICATE_SCAN_NOTES paths) whose mean chunk vectors are at
        least ``duplicate_similarity`` alike: (pairs, best first and capped; how many; notes compared)."""
        import numpy as np

        chosen = paths[:DUPLICATE_SCAN_NOTES]
        chunk_ids = self.catalog.chunk_ids_of(chosen)
        stored = self.vectors.vectors([c for p in chosen for c in chunk_ids.get(p, [])])
        rows: list[str] = []
        means: list[Any] = []
        for path in chosen:
            vectors = [stored[c] for c in chunk_ids.get(path, []) if c in stored]
            if vectors:
                rows.append(path)
                means.append(np.mean(np.asarray(vectors, dtype=np.float32), axis=0))
        if len(rows) < 2:
            return [], 0, len(rows)
        matrix = np.asarray(means, dtype=np.float32)
        matrix /= np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
        threshold = self.settings.duplicate_similarity
        pairs: list[tuple[float, str, str]] = []
        count = 0
        for start in range(0, len(rows), 512):
            block = matrix[start : start + 512] @ matrix.T
            for i, j in zip(*np.nonzero(block >= threshold - 1e-6)):
                if start + i < j:
                    count += 1
                    if len(pairs) < 10 * ISSUES_PER_KIND:
                        pairs.append((float(min(block[i, j], 1.0)), rows[start + i], rows[j]))
        pairs.sort(key=lambda t: (-t[0], t[1], t[2]))
        return pairs, count, len(rows)


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


def _issue(kind: str, notes: list[dict[str, Any]], action: str) -> dict[str, Any]:
    return {"kind": kind, "count": len(notes), "notes": notes[:LISTED_NOTES],
            "more": max(0, len(notes) - LISTED_NOTES), "action": action}


def _tag_key(tag: str) -> str:
    """What variants of one tag share: case, punctuation and a plural -s aside (deploys = Deploy)."""
    parts = []
    for segment in tag.lower().split("/"):
        word = re.sub(r"[\W_]+", "", segment) or segment
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 4 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
            word = word[:-2]
        elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        parts.append(word)
    return "/".join(parts)


def _tag_groups(counts: list[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """Tags spelled more than one way, most used groups first."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for tag, count in counts:
        groups.setdefault(_tag_key(tag), []).append((tag, count))
    found = [sorted(g, key=lambda tn: (-tn[1], tn[0])) for g in groups.values() if len(g) > 1]
    return sorted(found, key=lambda g: (-sum(n for _, n in g), g[0][0]))


def _timestamp(value: str | None) -> float | None:
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _iso(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).replace(microsecond=0).isoformat()
