"""Fusing semantic and keyword results, and how much of a query a keyword hit covers. Pure.

``blend`` is what hybrid search uses (chosen on the eval sets over reciprocal rank fusion, see
docs/search.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spellbook.index.keyword import STOPWORDS, normalize, tokenize


def blend(
    semantic: Mapping[str, float], keyword: Mapping[str, float], covered: Mapping[str, float], semantic_weight: float
) -> list[tuple[str, float]]:
    """score = w * semantic' + (1 - w) * keyword' * coverage, best first.

    semantic' is the cosine similarity min-max scaled over the semantic candidates (1.0 for the
    best); keyword' is BM25 divided by the best BM25. Coverage (0-1) keeps a keyword hit that
    shares one common token with a long query from outranking what the vector search found.
    """
    scores, keyword_parts = blend_parts(semantic, keyword, semantic_weight)
    for cid, part in keyword_parts.items():
        scores[cid] = scores.get(cid, 0.0) + part * covered.get(cid, 0.0)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def blend_parts(
    semantic: Mapping[str, float], keyword: Mapping[str, float], semantic_weight: float
) -> tuple[dict[str, float], dict[str, float]]:
    """``blend``'s two parts before coverage: w * semantic' of each semantic candidate, and
    (1 - w) * keyword' of each keyword one (a hit's score is the first + the second x coverage)."""
    semantic_parts: dict[str, float] = {}
    if semantic:
        lo, hi = min(semantic.values()), max(semantic.values())
        for cid, sim in semantic.items():
            semantic_parts[cid] = semantic_weight * ((sim - lo) / (hi - lo) if hi > lo else 1.0)
    keyword_parts: dict[str, float] = {}
    if keyword:
        top = max(keyword.values()) or 1.0
        for cid, score in keyword.items():
            keyword_parts[cid] = (1 - semantic_weight) * max(score, 0.0) / top
    return semantic_parts, keyword_parts


def query_terms(query: str) -> set[str]:
    """The terms coverage counts: words and CJK bigrams (single CJK characters match too easily
    to say a hit covers a query), without stopwords."""
    tokens = tokenize(query)
    terms = {t for t in tokens if t not in STOPWORDS and (len(t) > 1 or t.isascii())}
    return terms or set(tokens)


def coverage(terms: set[str], texts: Iterable[str]) -> float:
    """Share of the query's distinct terms found in these texts: a keyword hit that matched only
    one common bigram of a long query covers little of it, and should count for little.
    Terms are matched as substrings of the normalised text (cheap, and lenient on word endings)."""
    if not terms:
        return 0.0
    haystack = normalize(" ".join(texts))
    return sum(1 for t in terms if t in haystack) / len(terms)
