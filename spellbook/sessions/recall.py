"""What a prompt is given (UserPromptSubmit), when enabled: plain text, which the agent adds to the
model's context (the SessionStart briefing is briefing.py).

At a prompt (``prompt_context``): the passages most likely to answer it (``recall``: the best one to
three sentences of each chunk, with its date, event and note id; in a captured session, relative dates
followed by the day they mean: sessions/dates.py), best first, deduplicated, within
``session_prompt_tokens``; nothing when the best of them is not clearly related (``answers``).
Everything comes from the index owner through ``Hub.call``; nothing here opens the index.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

from spellbook.errors import SpellbookError
from spellbook.sessions.dates import day_text, named_dates, resolve_dates
from spellbook.sessions.quoting import estimate_tokens, one_line, quoted_block

PROMPT_BUDGET = 600  # tokens of the passages added to a prompt
MIN_RELEVANCE = 0.1  # least relevance (0-1) of a passage added to a prompt
PASSAGES = 24
# What a captured session's passage may be: what was said. Its head (the digest: a summary of every
# exchange) and its tool sections (lists of files) are close to any coding prompt and answer none.
SAID = ("prompt", "response", "insight")
WORDS_SHARE = 0.75
SUBSTANCE = 16  # tokens: about 60 English characters, 16 Korean or Japanese ones
# The bar (``answers``), measured with the default embedder (use-m3) on a vault of coding sessions
# (105 coding prompts that none of them answers) and on LoCoMo's conversations (docs/sessions.md).
CLEAR = 0.5  # meaning + relevance of the best passage: clearly about the prompt
LIKELY = 0.25  # ... about it when that passage stands out from the rest by
STANDOUT = 0.037  # cosine similarity, best minus median of the passages found
_WORD = re.compile(r"\w+")


def prompt_context(
    hub: Any,
    project: str,
    prompt: str,
    min_relevance: float,
    budget: int = PROMPT_BUDGET,
    session_id: str | None = None,
    semantic: bool = True,
) -> str:
    """The passages most likely to answer one prompt, of relevance ``min_relevance`` or more, within
    ``budget`` tokens: best first (the newer first among equals), each once, none of the running
    session's own nor of the starter notes, and of a captured session only what was said (``SAID``);
    empty unless ``answers`` finds them worth it."""
    named = named_dates(prompt)  # "what did Tim say on 16 November 2023": that day's passages first
    limit = min(50, PASSAGES * (2 if named else 1))
    found = hub.call(
        "recall",
        {
            "query": prompt[:2_000],
            "limit": limit,
            "min_score": min_relevance,
            "mode": "hybrid" if semantic else "keyword",
            "context": project,
        },
    )
    starter = starter_notes()
    hits = [
        h
        for h in found["results"]
        if h["path"] not in starter
        and (not session_id or h.get("session") != session_id)
        and (h.get("type") != "session" or h.get("event") in SAID)
    ]
    if not answers(hits, prompt):
        return ""
    hits.sort(key=lambda h: str(h.get("date") or ""), reverse=True)
    hits.sort(key=lambda h: -round(h["score"], 2))  # stable: among equal scores, the newer first
    if named:
        hits.sort(key=lambda h: not any(day in _said_on(h) for day in named))
    seen: list[str] = []
    lines = ["Passages from Spellbook memory that may answer this prompt (get_memories with the id for the rest):"]
    for h in hits:
        text = one_line(h.get("passage") or h.get("snippet") or "", 480)
        if h.get("reply"):  # a question, and what was said next
            text += " → " + one_line(h["reply"], 220)
        key = " ".join(text.lower().split())
        if not text or any(key.removesuffix(" …") in given for given in seen):
            continue  # given already, or within a passage given (a question's reply, a longer window)
        seen.append(key)
        day = _date(h.get("date"))
        if day and h.get("type") == "session":  # "yesterday" in a session: the day it means
            text = resolve_dates(text, day)
        said = h.get("event") if h.get("type") == "session" else one_line(h.get("title"), 80)
        where = ", ".join(str(part) for part in (day_text(day) if day else h.get("date"), said) if part)
        lines.append(f"- [{one_line(where, 120)}; id {h['id']}] {text}")
    return quoted_block(lines, budget) if len(lines) > 1 else ""


def _said_on(hit: dict[str, Any]) -> str:
    """A hit's day and, for a session's passage, the days its relative dates mean, as lines write them."""
    day = _date(hit.get("date"))
    if not day:
        return ""
    return (
        f"{day_text(day)} {resolve_dates(str(hit.get('passage') or ''), day) if hit.get('type') == 'session' else ''}"
    )


def _date(date: Any) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(date)[:10])
    except ValueError:
        return None


def answers(hits: list[dict[str, Any]], prompt: str) -> bool:
    """Whether the passages are worth a prompt's context. Either one of some length (``SUBSTANCE``
    tokens: "Run the unit tests" is close to any coding prompt and answers none) is closer in meaning
    to the prompt than the vault's notes are to each other on average (``meaning`` > 0, calibrated
    per embedder: docs/search.md) and its meaning plus its share of the prompt's terms (``relevance``)
    is ``CLEAR``, or ``LIKELY`` with the best passage standing out from the rest (``STANDOUT``: a
    prompt that matches nothing finds all its passages about as close as each other); or one holds,
    as whole words, most of the prompt's terms (two at least; its day, as the line shows it, and the
    reply it carries count). The length and meaning are the passage's own: a short question is close
    to any coding prompt, whatever its reply says. Measured with bench/eval_sessions.py and
    bench/bench_hooks.py (docs/sessions.md)."""
    said = [h for h in hits if h.get("meaning", 0) > 0 and estimate_tokens(str(h.get("passage") or "")) >= SUBSTANCE]
    strength = max((h["meaning"] + h.get("relevance", 0) for h in said), default=0.0)
    if strength >= CLEAR or (strength >= LIKELY and standout(hits) >= STANDOUT):
        return True
    from spellbook.engine.hybrid import query_terms
    from spellbook.index.keyword import normalize

    terms = [t for t in query_terms(prompt) if len(t) > 2 or not t.isascii()]
    if len(terms) < 2:
        return False
    for h in hits:  # the passage's day counts: "what did Tim say on 16 November 2023"
        day = _date(h.get("date"))
        text = normalize(f"{day_text(day) if day else ''} {h.get('passage') or ''} {h.get('reply') or ''}")
        words = set(_WORD.findall(text))
        if sum(1 for t in terms if (t in words if t.isascii() else t in text)) >= WORDS_SHARE * len(terms):
            return True
    return False


def standout(hits: list[dict[str, Any]]) -> float:
    """How much closer in meaning the best passage is than the median one (cosine similarity)."""
    close = sorted((h["similarity"] for h in hits if h.get("similarity") is not None), reverse=True)
    return close[0] - close[len(close) // 2] if len(close) >= 3 else 0.0


@functools.cache
def starter_notes() -> frozenset[str]:
    """The notes ``spellbook init`` copies into a vault (its guide to itself): never an answer to a prompt."""
    from spellbook.vault.template import template_dir

    try:
        root = template_dir()
    except SpellbookError:
        return frozenset()
    return frozenset(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
