"""Search: what ``memorize``, ``related`` and the near-duplicate check on ``scribe`` do.

A service of the engine, given the catalog, vectors, embedder and settings it ranks with. Hybrid
ranking blends vector similarity with BM25 from the catalog's FTS5 table (docs/search.md):
both sides run at once, then ``ranking.rank`` reads the rows of the candidates that can reach the
hits and scores them (coverage, boosts).
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from spellbook.config import Settings
from spellbook.embedders.base import Embedder
from spellbook.engine import ranking
from spellbook.engine.access import Access, Readiness
from spellbook.engine.passages import asks, opening, passage, wording
from spellbook.engine.ranking import Candidates, Mode
from spellbook.errors import EmbedderError, InvalidInputError
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.filters import event_type_of, parse_filter
from spellbook.index.indexer import Indexer, file_changed
from spellbook.text import mostly_latin
from spellbook.vault.fields import expires_key
from spellbook.vault.store import Vault

if TYPE_CHECKING:
    from spellbook.engine.maintenance import Maintenance
    from spellbook.index.filter_model import Filter

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="spellbook-search")

MAX_QUERY_CHARS = 2_000
RELEVANCE_SIGMAS = 5.0  # relevance 1.0 = 5 standard deviations above two unrelated notes' similarity
REPLIED = ("prompt", "response")  # a session's events that a question in the other answers
MAX_SKIPPED = 1_000  # more hidden (archived, expired) chunks than this: filter the vector query instead


class Search:
    """Ranking memories for a query, and notes for a note (``memorize``, ``related``, ``similar``)."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        vectors: Any,
        embedder: Embedder,
        indexer: Indexer,
        access: Access,
        readiness: Readiness,
        maintenance: Maintenance,
    ) -> None:
        self.settings = settings
        self.vault = vault
        self.catalog = catalog
        self.vectors = vectors
        self.embedder = embedder
        self.indexer = indexer
        self.access = access
        self.readiness = readiness
        self.maintenance = maintenance
        self._baseline: tuple[float, float, int] | None = None

    def memorize(
        self,
        query: str,
        limit: int = 5,
        filter: Filter | dict | None = None,
        mode: Mode = "hybrid",
        min_score: float | None = None,
    ) -> dict[str, Any]:
        return self._find(query, limit, filter, mode, min_score, per_chunk=False)

    def recall(
        self,
        query: str,
        limit: int = 12,
        filter: Filter | dict | None = None,
        mode: Mode = "hybrid",
        min_score: float | None = None,
    ) -> dict[str, Any]:
        """``memorize`` by passage: the ``limit`` best chunks (several may be of one note), each with
        its ``passage``, ``event`` (a session's event type, else its heading), ``date`` (a session's
        start, else the note's last change), ``session``, and for a session's passage that ends in a
        question the opening of what was said next (``reply``): what a prompt is given (sessions/recall.py)."""
        return self._find(query, limit, filter, mode, min_score, per_chunk=True)

    def _find(
        self,
        query: str,
        limit: int,
        filter: Filter | dict | None,
        mode: Mode,
        min_score: float | None,
        per_chunk: bool,
    ) -> dict[str, Any]:
        query = (query or "").strip()
        if not query:
            raise InvalidInputError("query is empty: describe what you want to remember, e.g. 'how we deploy'.")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInputError(f"query is {len(query)} characters; keep it under {MAX_QUERY_CHARS}.")
        if not 1 <= limit <= 50:
            raise InvalidInputError("limit must be between 1 and 50.")
        if mode not in ("hybrid", "semantic", "keyword"):
            raise InvalidInputError("mode must be hybrid, semantic or keyword.")
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise InvalidInputError(
                "min_score is a relevance between 0 and 1 (0.5 = clearly related); see docs/search.md."
            )
        spec = parse_filter(filter)
        notes = [self.readiness.await_first_index()]
        ranking = mode
        if mode == "hybrid" and self.embedder.english_only and not mostly_latin(query):
            # Measured on dev_ko with MiniLM: hybrid 0.955 hit@5, keyword alone 0.985 (docs/search.md).
            ranking = "keyword"
            notes.append(
                f"The embedder ({self.embedder.model_id}) only understands English, so this query was ranked by "
                "keywords alone. For Korean or Japanese meaning search, set SPELLBOOK_EMBEDDER=use-m3."
            )
        hits, fallback = self._search_or_keywords(query, limit, spec, ranking, per_chunk)
        paths = dict.fromkeys(h["path"] for h in hits)
        stale = [p for p in paths if file_changed(self.vault, self.catalog.file(p), p)]
        if stale:  # never answer from an index older than the files: catch up, then search again
            self.indexer.sync_paths(stale)
            hits, fallback = self._search_or_keywords(query, limit, spec, ranking, per_chunk)
        if min_score is not None:
            hits = [h for h in hits if h["relevance"] >= min_score]
        result: dict[str, Any] = {"query": query, "mode": mode, "results": hits}
        notes.append(fallback)
        if any(notes):
            result["note"] = " ".join(n for n in notes if n)
        return result

    def _search_or_keywords(
        self, query: str, limit: int, spec: Filter | None, mode: Mode, per_chunk: bool = False
    ) -> tuple[list[dict[str, Any]], str | None]:
        """``_search``; when the embedder fails, keyword ranking instead, with a note saying why
        and what to do: (hits, note)."""
        if mode == "keyword":
            return self._search(query, limit, spec, mode, per_chunk), None
        try:
            hits = self._search(query, limit, spec, mode, per_chunk)
        except EmbedderError as exc:
            note = (
                f"The embedder failed, so these results are ranked by keywords alone (meaning is not searched): {exc}"
            )
            return self._search(query, limit, spec, "keyword", per_chunk), note
        missing = len(self.indexer.missing - self.indexer.refused) if self.indexer.missing else 0
        if not missing:
            return hits, None
        self.maintenance.fill_missing_vectors(wait=False)  # the embedder answers: catch up in the background
        note = (
            f"{missing} sections were indexed while the embedder was failing and have no vectors yet; "
            "they are being embedded now; hybrid and keyword search find them meanwhile."
        )
        return hits, note

    def _search(
        self, query: str, limit: int, spec: Filter | None, mode: Mode, per_chunk: bool = False
    ) -> list[dict[str, Any]]:
        where, params = self.access.chunk_where(spec)  # every query below joins chunks as c
        rows = Candidates(self.catalog, self.access, spec, query)
        # A query naming a time looks twice as deep: the notes of that time may rank low before their boost.
        depth = max(limit * 6, 50) * (2 if rows.period else 1)
        similarity: dict[str, float] = {}
        keyword_scores: dict[str, float] = {}
        keyword_job = None
        scope = self.access.scope()
        filtered = bool(spec or scope)  # a scope filters like a filter (spellbook/scope.py)
        rowids = self.catalog.filtered_rowids(where, params) if filtered and mode != "semantic" else None
        if mode == "hybrid":  # SQLite and the embedder release the GIL: run both sides at once
            keyword_job = _POOL.submit(self.catalog.keywords.search, query, where, params, depth, True, rowids)
        if mode in ("hybrid", "semantic"):
            vector = self.embedder.embed_query(query)
            # Without a filter, archived and expired chunks are fetched and skipped below: that many more.
            hidden = 0 if filtered else self.catalog.hidden_chunks()
            allowed = self.catalog.filtered_chunk_ids(where, params) if filtered or hidden > MAX_SKIPPED else None
            found = self.vectors.query(vector, depth + (hidden if allowed is None else 0), ids=allowed)
            similarity = dict(found)
        # The best semantic candidates' rows are read while the keyword side still runs.
        rows.read(sorted(similarity, key=lambda cid: (-similarity[cid], cid))[: ranking.batch_size(limit)])
        if mode in ("hybrid", "keyword"):
            found = (
                keyword_job.result()
                if keyword_job
                else self.catalog.keywords.search(query, where, params, depth, allowed=rowids)
            )
            keyword_scores = dict(found)
        ranked = ranking.rank(rows, similarity, keyword_scores, mode, limit)
        baseline = self._similarity_baseline() if similarity else None
        hits: list[dict[str, Any]] = []
        picked = (_best_chunks if per_chunk else _best_per_note)(ranked, rows.chunks, rows.notes, limit)
        notes_chunks: dict[str, list] = {}  # a note's chunks, read once for the replies to its questions
        for cid, score, chunk, note in picked:
            text = passage(self.access.scrubbed(chunk.text), query)
            hit = {
                "id": note.note_id,
                "path": note.path,
                "title": note.title,
                "score": round(score, 4),
                "snippet": text,
                "category": note.category,
                "topic": note.topic,
                "tags": note.tags,
                "type": note.type,
                "updated": note.updated or note.created,
            }
            if chunk.heading:
                hit["heading"] = chunk.heading
            if per_chunk:
                started = note.meta.get("started")
                event = event_type_of(chunk.heading)
                if event in REPLIED and asks(text) and (reply := self._reply(chunk, notes_chunks)):
                    hit["reply"] = reply
                hit.update(
                    passage=text,
                    event=event or chunk.heading or None,
                    date=str(started or hit["updated"] or "")[:10],
                    session=note.meta.get("session"),
                )
            meaning = 0.0
            if cid in similarity:
                hit["similarity"] = round(similarity[cid], 4)
                mu, sigma = baseline
                meaning = min(1.0, max(0.0, (similarity[cid] - mu) / sigma / RELEVANCE_SIGMAS))
            hit["relevance"] = round(max(meaning, rows.coverage(cid)), 3)
            if per_chunk:
                hit["meaning"] = round(meaning, 3)
            hit["found_by"] = [
                side for side, found in (("keywords", keyword_scores), ("meaning", similarity)) if cid in found
            ]
            hits.append(hit)
        return hits

    def _reply(self, chunk: Any, notes_chunks: dict[str, list]) -> str:
        """The opening of what was said after a session's event that ends in a question: the next
        prompt or response of its note (tool sections and insights in between are passed over)."""
        if chunk.path not in notes_chunks:
            notes_chunks[chunk.path] = self.catalog.chunks_of(chunk.path)
        for row in notes_chunks[chunk.path]:
            if row.idx <= chunk.idx:
                continue
            if row.heading == chunk.heading:
                return ""  # the same event goes on: its question is not the last word
            if event_type_of(row.heading) in REPLIED:
                return opening(self.access.scrubbed(row.text))
        return ""

    def _similarity_baseline(self) -> tuple[float, float]:
        """(mean, standard deviation) of the cosine similarity between stored chunks, i.e. what
        two unrelated notes score with this embedder; recomputed when the index grows or shrinks
        by a quarter. Makes ``relevance`` (and ``min_score``) mean the same for every embedder."""
        count = self.vectors.size()
        cached = self._baseline
        if cached and abs(count - cached[2]) <= max(cached[2], 40) // 4:
            return cached[0], cached[1]
        import numpy as np

        sample = self.vectors.sample(400)
        if len(sample) < 5:
            mu, sigma = 0.0, 0.15  # too few notes to measure: a typical spread for unrelated text
        else:
            m = np.asarray(sample, dtype=np.float32)
            m /= np.clip(np.linalg.norm(m, axis=1, keepdims=True), 1e-12, None)
            sims = (m @ m.T)[np.triu_indices(len(m), 1)]
            mu, sigma = float(sims.mean()), max(float(sims.std()), 1e-3)
        self._baseline = (mu, sigma, count)
        return mu, sigma

    def related(self, id: str, limit: int = 5) -> dict[str, Any]:
        """Notes semantically closest to a memory (by the mean of its chunk vectors), itself excluded."""
        if not 1 <= limit <= 50:
            raise InvalidInputError("limit must be between 1 and 50.")
        note = self.access.note(id)
        out = {"id": id, "path": note.path, "related": self.similar(note.path, limit)}
        if not out["related"] and self.indexer.missing & set(self.catalog.chunk_ids(note.path)):
            out["note"] = (
                "This memory has no vectors yet (the embedder was failing when it was indexed); they are "
                "added once the embedder answers. memorize with its title finds related ones by keyword."
            )
        return out

    def similar(self, path: str, limit: int) -> list[dict[str, Any]]:
        """The live notes the call sees closest in meaning to the note at ``path`` (itself excluded)."""
        chunk_ids = self.catalog.chunk_ids(path)
        vectors = list(self.vectors.vectors(chunk_ids).values()) if chunk_ids else []
        if not vectors:
            return []
        import numpy as np

        mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        allowed = self.catalog.filtered_chunk_ids(*self.access.where(None)) if self.access.scope() else None
        found = self.vectors.query(mean.tolist(), limit * 4 + len(chunk_ids), ids=allowed)
        now = expires_key(dt.datetime.now(dt.UTC))
        chunks: dict[str, Any] = {}
        notes: dict[str, NoteRow] = {}
        best: list[tuple[str, float, Any, NoteRow]] = []
        for start in range(0, len(found), limit + 1):  # rows read a few at a time, best first, until enough
            part = self.catalog.chunks([cid for cid, _ in found[start : start + limit + 1]])
            new_paths = {c.path for c in part.values()} - {c.path for c in chunks.values()}
            chunks.update(part)
            notes.update(
                (p, n) for p, n in self.catalog.notes_at(new_paths).items() if n.live(now) and self.access.visible(n)
            )
            best = _best_per_note(found[: start + limit + 1], chunks, notes, limit, exclude=path)
            if len(best) == limit:
                break
        return [{**note.ref(), "similarity": round(similarity, 4)} for _, similarity, _, note in best]


def _best_chunks(
    ranked: list[tuple[str, float]], chunks: dict, notes: dict, limit: int
) -> list[tuple[str, float, Any, NoteRow]]:
    """The best ``limit`` chunks the catalog knows, best first, several of a note if they rank, and
    words said again in other notes once (their best copy): thirty sessions that each start with the
    same prompt would otherwise fill the list with it, and leave out what was answered."""
    out: list[tuple[str, float, Any, NoteRow]] = []
    seen: set[str] = set()
    for cid, score in ranked:
        chunk = chunks.get(cid)
        if chunk is None or chunk.path not in notes or (words := wording(chunk.text)) in seen:
            continue
        seen.add(words)
        out.append((cid, score, chunk, notes[chunk.path]))
        if len(out) == limit:
            break
    return out


def _best_per_note(
    ranked: list[tuple[str, float]], chunks: dict, notes: dict, limit: int, exclude: str | None = None
) -> list[tuple[str, float, Any, NoteRow]]:
    """The best chunk of each note, best first, skipping vectors the catalog does not know
    (orphans) and the ``exclude`` path: (chunk id, score, chunk, note)."""
    out: list[tuple[str, float, Any, NoteRow]] = []
    seen = {exclude}
    for cid, score in ranked:
        chunk = chunks.get(cid)
        if chunk is None or chunk.path in seen or chunk.path not in notes:
            continue
        seen.add(chunk.path)
        out.append((cid, score, chunk, notes[chunk.path]))
        if len(out) == limit:
            break
    return out
