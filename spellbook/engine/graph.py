"""The memory graph for the web view: memories as nodes, their links (wikilinks and typed
relations) as edges, filtered by category, topic, tag and the running call's scope.

Above ``limit`` nodes the graph is sampled, not cut at random: the memories with the most links
(in and out, within the filter) are kept, ties going to the most recently updated, and only the
edges between kept nodes are returned. The answer says how many there were (``total``) and how
many are shown, so the page can say so. Everything comes from the catalog in two queries (the
notes and the resolved link graph), read once per change of the index for every filter and scope;
nothing reads a file.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from spellbook.engine.access import Access, Readiness
from spellbook.engine.memo import Memo
from spellbook.errors import InvalidInputError
from spellbook.index.catalog import Catalog

DEFAULT_LIMIT = 1500
MAX_LIMIT = 5000
TOP_TAGS = 60


class Graph:
    def __init__(self, catalog: Catalog, access: Access, readiness: Readiness, memo: Memo | None = None) -> None:
        self.catalog = catalog
        self.access = access
        self.readiness = readiness
        self.memo = memo
        self._read: tuple[int, list[Any], list[tuple[str, str, str, str | None]]] | None = None

    def _vault(self) -> tuple[list[Any], list[tuple[str, str, str, str | None]]]:
        """Every note row and the resolved link graph, read once per change of the index (~0.35 s at
        10k notes) and shared by every filter and scope: a new filter only filters."""
        mark = self.catalog.changes()
        kept = self._read
        if kept is None or kept[0] != mark:
            kept = (mark, [n for n, _ in self.catalog.browse.overview()], self.catalog.links.link_graph())
            self._read = kept
        return kept[1], kept[2]

    def graph(
        self, category: str | None = None, topic: str | None = None, tag: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> dict[str, Any]:
        """Nodes, edges and the filter's choices (kept by the memo until the index changes)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_LIMIT} nodes.")
        self.readiness.await_first_index()
        if self.memo is None:
            return self._graph(category, topic, tag, limit)
        return self.memo.get(
            "graph", (category, topic, tag, limit), lambda: self._graph(category, topic, tag, limit), self._without_gone
        )  # a page's: seconds old at worst after a write (memo.py)

    def _without_gone(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A kept graph without the notes erased, merged or moved since, nor their edges."""
        there = self.catalog.notes_at(n["path"] for n in answer["nodes"]).keys()
        nodes = [n for n in answer["nodes"] if n["path"] in there]
        ids = {n["id"] for n in nodes}
        edges = [e for e in answer["edges"] if e["source"] in ids and e["target"] in ids]
        return {**answer, "nodes": nodes, "edges": edges, "shown": len(nodes)}

    def _graph(self, category: str | None, topic: str | None, tag: str | None, limit: int) -> dict[str, Any]:
        every, link_graph = self._vault()
        visible = [n for n in every if self.access.visible(n)]
        facets = _facets(visible)
        fold = str.casefold
        notes = {
            n.path: n
            for n in visible
            if (not category or fold(n.category or "") == fold(category))
            and (not topic or fold(n.topic or "") == fold(topic))
            and (not tag or any(fold(t) == fold(tag) for t in n.tags))
        }
        edges: dict[tuple[str, str], set[str]] = {}
        for source, _, relation, resolved in link_graph:
            if resolved and resolved != source and source in notes and resolved in notes:
                edges.setdefault((source, resolved), set()).add(relation or "wikilink")
        degree: Counter[str] = Counter()
        for source, target in edges:
            degree[source] += 1
            degree[target] += 1
        total = len(notes)
        if total > limit:
            ranked = sorted(notes.values(), key=lambda n: n.updated or n.created or "", reverse=True)
            ranked.sort(key=lambda n: degree[n.path], reverse=True)  # stable: newest first among equals
            notes = {n.path: n for n in ranked[:limit]}
        nodes = [
            {
                "id": n.note_id,
                "path": n.path,
                "title": n.title,
                "category": n.category,
                "topic": n.topic,
                "tags": n.tags[:8],
                "degree": degree[n.path],
            }
            for n in notes.values()
        ]
        ids = {path: n.note_id for path, n in notes.items()}
        links = [
            {"source": ids[s], "target": ids[t], "relations": sorted(rel)}
            for (s, t), rel in edges.items()
            if s in ids and t in ids
        ]
        return {
            "nodes": nodes,
            "edges": links,
            "total": total,
            "shown": len(nodes),
            "sampled": total > len(nodes),
            "filter": {"category": category, "topic": topic, "tag": tag},
            **facets,
        }


def _facets(notes: list[Any]) -> dict[str, Any]:
    """The categories, topics and most used tags the filter can choose from (in the caller's scope)."""
    categories = sorted({n.category for n in notes if n.category})
    topics = sorted({n.topic for n in notes if n.topic})
    tags = Counter(t for n in notes for t in n.tags)
    return {
        "categories": categories,
        "topics": topics,
        "tags": [t for t, _ in tags.most_common(TOP_TAGS)],
        "contexts": sorted({n.context for n in notes if n.context}),
        "users": sorted({n.user for n in notes if n.user}),
    }
