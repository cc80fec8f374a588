"""The health of the knowledge: what ``analyze_knowledge`` reports.

A service of the engine, given the catalog (notes, tags, the link graph), the vectors (near
duplicates) and the settings. A score from 0 to 100 and the issues behind it, each with the
notes concerned and what to do about them (docs/knowledge.md).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from typing import Any

from spellbook.config import Settings
from spellbook.engine.access import Access, Readiness
from spellbook.engine.differences import differences
from spellbook.engine.links import WIKILINK
from spellbook.engine.memo import Memo
from spellbook.engine.memories import DUPLICATE_SIMILARITY
from spellbook.errors import InvalidInputError
from spellbook.index.catalog import Catalog

STALE_DAYS = 180
LISTED_NOTES = 20  # notes named per issue; the rest are counted in `more`
ISSUES_PER_KIND = 20  # pair and group issues (near-duplicates, tag spellings, broken links) per kind
DUPLICATE_SCAN_NOTES = 2_000  # near-duplicates: the most recently updated notes, compared pairwise
# analyze_knowledge: score = 100 - sum(weight x share of the kind); docs/knowledge.md
WEIGHTS = {
    "untagged": 20,
    "isolated": 25,
    "stale": 15,
    "near_duplicate": 15,
    "broken_link": 15,
    "similar_tags": 10,
    "contradiction": 15,
}
LIST_KINDS = ("untagged", "isolated", "stale", "similar_tags")  # issues that list notes (the rest are pairs)
# A contradiction: two notes linked `contradicts` (neither superseding the other), or two near-duplicates
# that state different numbers (amounts, dates, times, versions) or where only one says "not" (differences.py).


class Health:
    """A health score of the vault's memories, and the issues behind it."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        vectors: Any,
        access: Access,
        readiness: Readiness,
        memo: Memo | None = None,
    ) -> None:
        self.memo = memo  # keeps the answer until the index changes (engine/memo.py)
        self.settings = settings
        self.catalog = catalog
        self.vectors = vectors
        self.access = access
        self.readiness = readiness

    def analyze_knowledge(self, stale_days: int = STALE_DAYS, stale_ok: bool = False) -> dict[str, Any]:
        """A health score (0-100) and the issues behind it, each with the notes and what to do.
        ``stale_ok`` (the web pages): the last answer at once while a newer one is made (memo.py)."""
        if not isinstance(stale_days, int) or not 1 <= stale_days <= 36_500:
            raise InvalidInputError("stale_days must be a whole number of days between 1 and 36500.")
        self.readiness.await_first_index()
        if self.memo is not None:
            return self.memo.get(
                "analyze_knowledge",
                (stale_days,),
                lambda: self._analyze(stale_days),
                self._without_gone if stale_ok else None,
            )
        return self._analyze(stale_days)

    def _without_gone(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A kept answer without the notes erased, merged or moved since (an issue about a pair
        goes when one of the two does)."""
        named = {n["path"] for issue in answer["issues"] for n in issue["notes"]}
        there = self.catalog.notes_at(named).keys()
        issues = []
        for issue in answer["issues"]:
            notes = [n for n in issue["notes"] if n["path"] in there]
            if notes and (len(notes) == len(issue["notes"]) or issue["kind"] in LIST_KINDS):
                issues.append({**issue, "notes": notes})
        return {**answer, "issues": issues}

    def _analyze(self, stale_days: int) -> dict[str, Any]:
        notes = {
            n.path: (n, mtime)
            for n, mtime in self.catalog.browse.overview()
            if (n.category or "").lower() != "system" and self.access.visible(n)
        }
        total = len(notes)
        refs = {path: n.ref() for path, (n, _) in notes.items()}
        issues: list[dict[str, Any]] = []
        more: dict[str, int] = {}

        untagged = [p for p, (n, _) in notes.items() if not n.tags]
        if untagged:
            issues.append(
                _issue(
                    "untagged",
                    [refs[p] for p in untagged],
                    "Add tags with revise(id, tags=[...]) (or #tags in the text) so filters and "
                    "explore_related find them.",
                )
            )

        graph = self.catalog.links.link_graph()
        linked = [(source, resolved) for source, _, _, resolved in graph if resolved and resolved != source]
        connected = {p for pair in linked for p in pair}
        isolated = [p for p in notes if p not in connected]
        if isolated:
            issues.append(
                _issue(
                    "isolated",
                    [refs[p] for p in isolated],
                    "No links in or out: call explore_related(id) for candidates, then link(source, target, relation).",
                )
            )

        cutoff = time.time() - stale_days * 86_400
        when = {p: _timestamp(n.updated or n.created) or mtime / 1e9 for p, (n, mtime) in notes.items()}
        stale = sorted((p for p in notes if when[p] < cutoff), key=lambda p: (when[p], p))
        if stale:
            listed = [{**refs[p], "updated": _iso(when[p])} for p in stale]
            issues.append(
                _issue(
                    "stale",
                    listed,
                    f"Not updated in {stale_days} days: check each is still true; revise it, link a "
                    "newer memory to it with relation 'supersedes', or erase it.",
                )
            )

        seen_tags = {t.casefold() for n, _ in notes.values() for t in n.tags}
        tag_counts = [(t, c) for t, c in self.catalog.browse.tag_counts() if t.casefold() in seen_tags]
        groups = _tag_groups(tag_counts)
        for group in groups[:ISSUES_PER_KIND]:
            issues.append(self._tag_issue(group, refs))
        if len(groups) > ISSUES_PER_KIND:
            more["similar_tags"] = len(groups) - ISSUES_PER_KIND

        pairs, pair_count, scanned = self._near_duplicates(sorted(notes, key=lambda p: (-when[p], p)))
        for similarity, a, b in pairs[:ISSUES_PER_KIND]:
            issues.append(
                {
                    "kind": "near_duplicate",
                    "similarity": round(similarity, 4),
                    "notes": [refs[a], refs[b]],
                    "action": f"Merge them: merge(ids=[{refs[a]['id']!r}, {refs[b]['id']!r}]) keeps the first "
                    "(pass into= to keep the other), or, if one replaces the other, link(newer, older, "
                    "'supersedes').",
                }
            )
        if pair_count > ISSUES_PER_KIND:
            more["near_duplicate"] = pair_count - ISSUES_PER_KIND

        broken = [(s, t, r) for s, t, r, resolved in graph if resolved is None and s in notes]
        for source, target, relation in broken[:ISSUES_PER_KIND]:
            fix = (
                f"unlink(source={refs[source]['id']!r}, target={target!r})"
                if relation
                else "revise the text that holds the link"
            )
            issues.append(
                {
                    "kind": "broken_link",
                    "notes": [refs[source]],
                    "target": target,
                    "relation": relation or WIKILINK,
                    "action": f"No note is named {target!r}: fix the link text, create that note, or remove the link "
                    f"({fix}).",
                }
            )
        if len(broken) > ISSUES_PER_KIND:
            more["broken_link"] = len(broken) - ISSUES_PER_KIND

        contradictions = self._contradictions(graph, pairs, set(notes))
        for evidence, a, b in contradictions[:ISSUES_PER_KIND]:
            issues.append(
                {
                    "kind": "contradiction",
                    "notes": [refs[a], refs[b]],
                    "evidence": evidence,
                    "action": "These say different things. Decide which holds: revise the wrong one, erase it, or "
                    f"link(newer, older, 'supersedes') (e.g. link({refs[a]['id']!r}, {refs[b]['id']!r}, "
                    "'supersedes')).",
                }
            )
        if len(contradictions) > ISSUES_PER_KIND:
            more["contradiction"] = len(contradictions) - ISSUES_PER_KIND

        duplicated = {p for _, a, b in pairs for p in (a, b)}
        contradicted = {p for _, a, b in contradictions for p in (a, b)}
        variant_tags = sum(len(g) for g in groups)
        shares = {
            "untagged": len(untagged) / total if total else 0.0,
            "isolated": len(isolated) / total if total else 0.0,
            "stale": len(stale) / total if total else 0.0,
            "near_duplicate": len(duplicated) / scanned if scanned else 0.0,
            "broken_link": len(broken) / len(graph) if graph else 0.0,
            "similar_tags": variant_tags / len(tag_counts) if tag_counts else 0.0,
            "contradiction": len(contradicted) / total if total else 0.0,
        }
        penalty = sum(WEIGHTS[kind] * share for kind, share in shares.items())
        return {
            "score": max(0, round(100 - penalty)),
            "notes": total,
            "counts": {
                "untagged": len(untagged),
                "isolated": len(isolated),
                "stale": len(stale),
                "similar_tag_groups": len(groups),
                "near_duplicate_pairs": pair_count,
                "broken_links": len(broken),
                "contradictions": len(contradictions),
                "links": len(graph),
                "tags": len(tag_counts),
            },
            "shares": {k: round(v, 3) for k, v in shares.items()},
            "stale_days": stale_days,
            "near_duplicates_checked": {
                "notes": scanned,
                "of": total,
                "threshold": DUPLICATE_SIMILARITY,
            },
            "issues": issues,
            "more_issues": more,
        }

    def _tag_issue(self, group: list[tuple[str, int]], refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """One tag spelled several ways: the notes to retag (those not using the suggested spelling)."""
        best = max(group, key=lambda tn: (tn[1], tn[0] == tn[0].lower(), -len(tn[0]), tn[0]))[0]
        others = [tag for tag, _ in group if tag != best]
        paths = list(dict.fromkeys(p for tag in others for p in self.catalog.browse.paths_tagged(tag, LISTED_NOTES)))
        listed = [refs[p] for p in paths if p in refs][:LISTED_NOTES]
        count = max(len(listed), sum(n for tag, n in group if tag != best))
        return {
            "kind": "similar_tags",
            "tags": dict(group),
            "suggested": best,
            "count": count,
            "notes": listed,
            "more": count - len(listed),
            "action": f"Use one spelling: retag these notes from {', '.join(others)} to {best} (revise tags; "
            "#tags in a note's text are changed in its text).",
        }

    def _contradictions(
        self, graph: list[tuple[str, str, str | None, str | None]], pairs: list[tuple[float, str, str]], live: set[str]
    ) -> list[tuple[str, str, str]]:
        """(evidence, a, b): pairs linked ``contradicts`` that no ``supersedes`` link settles, then
        near-duplicate pairs whose texts differ in a number or a negation (``differences``)."""
        settled = {frozenset((s, r)) for s, _, rel, r in graph if rel == "supersedes" and r}
        found: dict[frozenset[str], tuple[str, str, str]] = {}
        for source, _, relation, resolved in graph:
            pair = frozenset((source, resolved or ""))
            if (
                relation == "contradicts"
                and resolved
                and resolved != source
                and source in live
                and resolved in live
                and pair not in settled
                and pair not in found
            ):
                found[pair] = ("linked 'contradicts'", source, resolved)
        texts: dict[str, str] = {}
        for _, a, b in pairs:
            pair = frozenset((a, b))
            if pair in found or pair in settled:
                continue
            for path in (a, b):
                if path not in texts:
                    texts[path] = "\n".join(c.text for c in self.catalog.chunks_of(path))
            stated = differences(texts[a], texts[b])
            if stated:
                found[pair] = ("; ".join(stated), a, b)
        return list(found.values())

    def _near_duplicates(self, paths: list[str]) -> tuple[list[tuple[float, str, str]], int, int]:
        """Pairs of notes (of the first DUPLICATE_SCAN_NOTES paths) whose mean chunk vectors are at
        least ``DUPLICATE_SIMILARITY`` alike: (pairs, best first and capped; how many; notes compared)."""
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
        threshold = DUPLICATE_SIMILARITY
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


def _issue(kind: str, notes: list[dict[str, Any]], action: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "count": len(notes),
        "notes": notes[:LISTED_NOTES],
        "more": max(0, len(notes) - LISTED_NOTES),
        "action": action,
    }


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
