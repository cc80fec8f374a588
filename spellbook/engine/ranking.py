"""Ranking a search's candidates: scores, boosts, and reading only the rows that can matter.

``rank`` is given the two sides' scores (chunk id -> cosine similarity, and -> BM25) and reads the
candidates' rows through ``Candidates`` a batch at a time, best ceiling first: a candidate's
ceiling is its score with coverage 1 and the largest boost, known before its rows are read. It
stops once ``limit`` notes have a best score no candidate left can reach, so the hits are those
of scoring every candidate (docs/search.md, "Fusion"; tests/engine/test_search_ranking.py).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any, Literal

from spellbook.engine.access import Access
from spellbook.engine.hybrid import blend_parts, coverage, query_terms
from spellbook.engine.periods import period_of, within
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.filters import event_type_of
from spellbook.index.rows import ChunkRow
from spellbook.vault.fields import expires_key

if TYPE_CHECKING:
    from spellbook.index.filter_model import Filter

Mode = Literal["hybrid", "semantic", "keyword"]
SUPERSEDED_FACTOR = 0.5
IMPORTANCE_BOOST = 0.05  # score x (1 + boost x (importance - 3)): importance 5 ranks 10% up, 1 ranks 10% down
RECENCY_HALF_LIFE_DAYS: float | None = None  # if set, older notes rank lower: x (0.5 + 0.5 x 0.5^(age/half-life))
PERIOD_FACTOR = 4.0  # a note of the time the query names ("in July 2022"): engine/periods.py
SEMANTIC_WEIGHT = 0.3  # hybrid = 0.3 * semantic + 0.7 * keyword x coverage; tuned on shared/eval (docs/search.md)


class Candidates:
    """The catalog rows of a search's candidates, read as its ranking needs them: chunks (of the
    filter's event type), the notes a call may see (live ones, when no filter chose them in SQL),
    and each candidate's coverage of the query."""

    def __init__(self, catalog: Catalog, access: Access, spec: Filter | None, query: str) -> None:
        self._catalog = catalog
        self._access = access
        self._spec = spec
        self._now = expires_key(dt.datetime.now(dt.UTC))
        self._terms = query_terms(query)
        self.period = period_of(query)
        self.chunks: dict[str, ChunkRow] = {}
        self.notes: dict[str, NoteRow] = {}
        self._asked: set[str] = set()
        self._paths: set[str] = set()
        self._unchecked: list[NoteRow] = []  # notes read since the last superseded() check
        self._covered: dict[str, float] = {}

    def read(self, chunk_ids: list[str]) -> None:
        wanted = [cid for cid in chunk_ids if cid not in self._asked]
        if not wanted:
            return
        self._asked.update(wanted)
        chunks = self._catalog.chunks(wanted)
        spec = self._spec
        if spec is not None and spec.event_type:  # a session's events of one type: only those sections
            chunks = {cid: c for cid, c in chunks.items() if event_type_of(c.heading) == spec.event_type}
        self.chunks.update(chunks)
        paths = list(dict.fromkeys(c.path for c in chunks.values() if c.path not in self._paths))
        self._paths.update(paths)
        notes = self._catalog.notes_at(paths)
        if spec is None:  # the vectors may not be filtered: leave archived and expired notes out here
            notes = {path: n for path, n in notes.items() if n.live(self._now) and self._access.visible(n)}
        self.notes.update(notes)
        self._unchecked.extend(notes.values())

    def superseded(self) -> set[str]:
        """Paths of the notes read since the last call that another note's ``supersedes`` names."""
        unchecked, self._unchecked = self._unchecked, []
        return self._catalog.links.superseded(unchecked) if unchecked else set()

    def coverage(self, cid: str) -> float:
        if cid not in self._covered:
            chunk = self.chunks[cid]
            note = self.notes[chunk.path]
            self._covered[cid] = coverage(self._terms, (chunk.text, chunk.heading, note.title, meta_text(note.meta)))
        return self._covered[cid]


def rank(
    rows: Candidates,
    similarity: dict[str, float],
    keyword_scores: dict[str, float],
    mode: Mode,
    limit: int,
) -> list[tuple[str, float]]:
    """(chunk id, score) best first, of the candidates that can reach the hits (module docstring)."""
    if mode == "hybrid":
        semantic_parts, keyword_parts = blend_parts(similarity, keyword_scores, SEMANTIC_WEIGHT)
        reach = dict(semantic_parts)
        for cid, part in keyword_parts.items():
            reach[cid] = reach.get(cid, 0.0) + part
    else:
        reach = dict(similarity or keyword_scores)
    most, least = boost_range() if mode != "keyword" else (1.0, 1.0)
    if rows.period:
        most *= PERIOD_FACTOR

    def ceiling(cid: str) -> float:
        score = reach[cid]
        return score * (most if score >= 0 else least)

    order = sorted(reach, key=lambda cid: (-ceiling(cid), cid))
    batch = batch_size(limit)
    scores: dict[str, float] = {}
    best: dict[str, float] = {}  # note path -> its best score so far
    superseded: set[str] = set()
    for start in range(0, len(order), batch):
        part = order[start : start + batch]
        rows.read(part)
        superseded |= rows.superseded()
        now = time.time()
        for cid in part:
            chunk = rows.chunks.get(cid)
            note = rows.notes.get(chunk.path) if chunk else None
            if mode == "hybrid":
                score = semantic_parts.get(cid, 0.0)
                if cid in keyword_parts:
                    score += keyword_parts[cid] * (rows.coverage(cid) if note is not None else 0.0)
            else:
                score = reach[cid]
            if note is not None:
                if mode != "keyword":
                    score *= boost_factor(note, IMPORTANCE_BOOST, RECENCY_HALF_LIFE_DAYS, now, note.path in superseded)
                if rows.period and within(rows.period, happened(note)):
                    score *= PERIOD_FACTOR
                best[note.path] = max(best.get(note.path, score), score)
            scores[cid] = score
        if start + batch < len(order) and len(best) >= limit:
            bar = sorted(best.values(), reverse=True)[limit - 1]
            if ceiling(order[start + batch]) < bar:
                break
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def batch_size(limit: int) -> int:
    """Candidates read and scored at a time."""
    return max(2 * limit, 10)


def boost_range() -> tuple[float, float]:
    """The largest and the smallest factor ``boost_factor`` can give a note."""
    spread = 2 * IMPORTANCE_BOOST  # importance 1-5 around 3
    least = max(0.0, 1.0 - spread) * SUPERSEDED_FACTOR * (0.5 if RECENCY_HALF_LIFE_DAYS else 1.0)
    return 1.0 + spread, least


def boost_factor(
    note: NoteRow, importance_boost: float, half_life_days: float | None, now: float, superseded: bool = False
) -> float:
    """How much a note's metadata scales its search score (see docs/search.md). ``superseded``:
    another note's ``supersedes`` relation points at this one."""
    factor = 1.0
    if note.importance is not None:
        factor *= 1.0 + importance_boost * (note.importance - 3)
    meta = note.meta
    if superseded or meta.get("superseded_by") or str(meta.get("status", "")).lower() == "superseded":
        factor *= SUPERSEDED_FACTOR
    if half_life_days:
        when = note.updated or note.created
        try:
            age_days = max(0.0, (now - dt.datetime.fromisoformat(when).timestamp()) / 86_400) if when else 0.0
        except (TypeError, ValueError):
            age_days = 0.0
        factor *= 0.5 + 0.5 * 0.5 ** (age_days / half_life_days)
    return factor


def happened(note: NoteRow) -> Any:
    """When what a note tells happened: a captured session's start, else when the note was written."""
    return note.meta.get("started") or note.created or note.updated


def meta_text(meta: dict[str, Any]) -> str:
    parts = [meta.get(k) for k in ("keywords", "questions", "entities", "aliases", "tags")]
    return " ".join(" ".join(map(str, p)) if isinstance(p, list) else str(p) for p in parts if p)
