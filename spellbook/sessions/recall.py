"""What a prompt is given (UserPromptSubmit), when enabled: plain text, which the agent adds to the
model's context (the SessionStart briefing is briefing.py).

At a prompt (``prompt_context``): the passages most likely to answer it (``recall``: the best one to
three sentences of each chunk, with its event; in a captured session, relative dates followed by the
day they mean: sessions/dates.py), best first, each once, under a header per note (its date and id),
a question and its reply as one line (``Block``), within ``PROMPT_BUDGET`` tokens; nothing when the
best of them is not clearly related (``answers``).
Everything comes from the index owner through ``Hub.call``; nothing here opens the index.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

from spellbook.engine.differences import changed_value, numbers_of
from spellbook.errors import SpellbookError
from spellbook.sessions.dates import MONTHS, day_text, named_dates, resolve_dates
from spellbook.sessions.quoting import estimate_tokens, one_line, quoted_block, room

PROMPT_BUDGET = 600  # tokens of the passages added to a prompt
MIN_RELEVANCE = 0.1  # least relevance (0-1) of a passage added to a prompt
PASSAGES = 24
NOTE_SUPPORT = 0.1  # x the two best scores of the other passages of a hit's note, added to its own
SAME_TURN = 40  # characters: a turn's opening this long, and the passage it opens, are one turn
INTRO = "Passages from Spellbook memory that may answer this prompt (get_memories with the id for the rest):"
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
NAMED_STANDOUT = 0.02  # ... or when a question names someone the passages quote, by this much
_ASKING = re.compile(
    r"\A\W*(?:what|when|where|who|whom|whose|which|why|how|did|does|do|is|are|was|were|has|have|had|can|could"
    r"|would|will|should)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b[A-Z][a-z][\w-]*")
_SENTENCE_START = re.compile(r"(?:\A|[.!?…:;]\s+|[\"“‘(\[]\s*)\Z")
_SPEAKER = re.compile(r"\A([A-Z][\w-]*)[:：]\s")
_WORD = re.compile(r"\w+")
# Dates and times in a passage ("yesterday (1 November 2026)") are when, not values that change.
_NOT_VALUES = re.compile(
    rf"\d{{4}}-\d\d-\d\d(?:[T ][\d:]+Z?)?|\b\d{{1,2}}:\d\d(?::\d\d)?\b|(?:\b\d{{1,2}} )?\b(?:{MONTHS}) \d{{4}}\b"
)


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
    ``budget`` tokens: best first (a passage whose note matches elsewhere too a little ahead:
    ``NOTE_SUPPORT``; the newer first among equals), each once, grouped under their note (``Block``),
    none of the running session's own nor of the starter notes, and of a captured session only what
    was said (``SAID``); empty unless ``answers`` finds them worth it."""
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
    supported = _supported(hits)
    hits.sort(key=lambda h: str(h.get("date") or ""), reverse=True)
    hits.sort(key=lambda h: -round(supported[id(h)], 2))  # stable: among equal scores, the newer first
    if named:
        hits.sort(key=lambda h: not any(day in _said_on(h) for day in named))
    block = Block(budget, hits)
    for h in hits:
        block.add(h)
    return block.text()


def _supported(hits: list[dict[str, Any]]) -> dict[int, float]:
    """Each hit's score plus ``NOTE_SUPPORT`` times the two best scores of the other passages found
    in its note: of two passages alike, the one whose session matches the prompt in more places is
    likelier the one asked about."""
    scores: dict[str, list[float]] = {}
    for h in hits:
        scores.setdefault(h["id"], []).append(h["score"])
    out = {}
    for h in hits:
        others = sorted(scores[h["id"]], reverse=True)
        others.remove(h["score"])
        out[id(h)] = h["score"] + NOTE_SUPPORT * sum(others[:2])
    return out


class Block:
    """The lines of a prompt's passages, under one header line per note (its day or date, its title
    when it is not a session, its id), filled in the order given while they fit ``budget`` tokens
    (``quoting.room``): a passage held within one given already is left out, and a passage that
    goes on from one given (its reply, or the question it answers) extends that line with ``→``
    rather than repeating it. A passage giving another value than a newer one of ``found`` for the
    same thing ("port 8000", then "port 8080": ``differences.changed_value``) says that it changed,
    when and to what, and the newer note goes first when both are given: an old value never reads
    as current, even when the newer passage does not fit."""

    def __init__(self, budget: int, found: list[dict[str, Any]]) -> None:
        self._budget = budget
        self._room = room(budget) - estimate_tokens(INTRO) - 1
        self._notes: dict[str, tuple[str, list[tuple[str, list[str]]]]] = {}  # id -> header, [(label, turns)]
        self._first: dict[str, str] = {}  # a note -> a newer note that changed one of its values
        newest_first = sorted(found, key=lambda h: str(h.get("date") or ""), reverse=True)
        self._found = [(h, _values(h)) for h in newest_first]

    def add(self, hit: dict[str, Any]) -> None:
        turns = [one_line(hit.get("passage") or hit.get("snippet") or "", 480)]
        if not turns[0]:
            return
        if hit.get("reply"):  # a question, and what was said next
            turns.append(one_line(hit["reply"], 220))
        day = _date(hit.get("date"))
        session = hit.get("type") == "session"
        if day and session:  # "yesterday" in a session: the day it means
            turns = [resolve_dates(turn, day) for turn in turns]
        if all(self._given(turn) for turn in turns):
            return
        if change := self._changed(hit):
            turns[-1] += change
        note = self._notes.get(hit["id"])
        if note is None:
            where = ", ".join(
                str(part)
                for part in (day_text(day) if day else hit.get("date"), None if session else hit.get("title"))
                if part
            )
            note = (f"- [{one_line(where, 120) + '; ' if where else ''}id {hit['id']}]", [])
        lines = note[1]
        before = list(lines)
        label = str(hit.get("event") or "") if session else ""
        after = next((n for n, (_, said) in enumerate(lines) if _goes_on(said[-1], turns[0])), None)
        ahead = next((n for n, (_, said) in enumerate(lines) if len(turns) > 1 and _goes_on(turns[-1], said[0])), None)
        if after is not None:  # it goes on from a line given: that line, then what is new
            was, said = lines[after]
            lines[after] = (was, [*said[:-1], _longer(said[-1], turns[0]), *turns[1:]])
        elif ahead is not None:  # the question of a reply given: before it
            _, said = lines[ahead]
            lines[ahead] = (label, [*turns[:-1], _longer(turns[-1], said[0]), *said[1:]])
        else:
            lines.append((label, turns))
        self._notes[hit["id"]] = note
        if self._cost() > self._room:
            lines[:] = before  # does not fit: left out (a shorter one further down may)
            if not lines:
                del self._notes[hit["id"]]

    def _changed(self, hit: dict[str, Any]) -> str:
        """`` (changed <day>: 8000 -> 8080, id <note>)`` when a newer note's passage found gives another
        value for something this one numbers (the newest such note), else ""."""
        when = str(hit.get("date") or "")
        values = _values(hit)
        if not values:
            return ""
        for other, numbers in self._found:
            if str(other.get("date") or "") <= when:
                return ""
            if other["id"] != hit["id"] and (what := changed_value(values, numbers)):
                self._first.setdefault(hit["id"], other["id"])
                return f" (changed {str(other['date'])[:10]}: {what}, id {other['id']})"
        return ""

    def _given(self, turn: str) -> bool:
        key = _key(turn)
        return any(key in _key(said) for _, lines in self._notes.values() for _, turns in lines for said in turns)

    def lines(self) -> list[str]:
        out = []
        for note in self._order():
            header, lines = self._notes[note]
            out.append(header)
            out.extend(f"  - {label + ': ' if label else ''}{' → '.join(turns)}" for label, turns in lines)
        return out

    def _order(self) -> list[str]:
        """The notes in the order given, but a note that changed another's value just before it."""
        order = list(self._notes)
        for old, new in self._first.items():
            if old in order and new in order and order.index(new) > order.index(old):
                order.remove(new)
                order.insert(order.index(old), new)
        return order

    def _cost(self) -> int:
        return sum(estimate_tokens(line) + 1 for line in self.lines())

    def text(self) -> str:
        if not self._notes:
            return ""
        return quoted_block([INTRO, *self.lines()], self._budget)


def _values(hit: dict[str, Any]) -> Any:
    """The numbers a passage (and its reply) states, without its dates and times."""
    return numbers_of(_NOT_VALUES.sub(" ", f"{hit.get('passage') or ''} {hit.get('reply') or ''}"))


def _key(text: str) -> str:
    """A turn as compared: lower case, single spaces, without the ellipses of a cut."""
    return " ".join(text.lower().split()).removeprefix("… ").removesuffix(" …").removesuffix("…")


def _goes_on(given: str, turn: str) -> bool:
    """Whether ``turn`` is the turn ``given`` is: the same, or one a cut of the other, the shorter of
    ``SAME_TURN`` characters at least ("Thanks!" opens many turns)."""
    a, b = _key(given), _key(turn)
    if not a or not b or a == b:
        return a == b and bool(a)
    return min(len(a), len(b)) >= SAME_TURN and (a.startswith(b) or b.startswith(a))


def _longer(a: str, b: str) -> str:
    """Of two cuts of one turn, the one that holds more of it."""
    return a if len(_key(a)) >= len(_key(b)) else b


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
    reply it carries count); or the prompt is a question naming someone the passages quote
    (``_named``), with the best of them standing out by ``NAMED_STANDOUT``: a vault of one long
    conversation is close to itself everywhere, and the speaker asked about is the sign there. The
    length and meaning are the passage's own: a short question is close to any coding prompt,
    whatever its reply says. Measured with bench/eval_sessions.py and bench/bench_hooks.py
    (docs/sessions.md)."""
    from spellbook.engine.hybrid import coverage, query_terms
    from spellbook.index.keyword import normalize

    said = [h for h in hits if h.get("meaning", 0) > 0 and estimate_tokens(str(h.get("passage") or "")) >= SUBSTANCE]
    asked = query_terms(prompt)
    strength = max((h["meaning"] + _own_relevance(h, asked, coverage) for h in said), default=0.0)
    if strength >= CLEAR or (strength >= LIKELY and standout(hits) >= STANDOUT):
        return True
    if _asking(prompt) and standout(hits) >= NAMED_STANDOUT and _named(hits[:10], prompt):
        return True
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


def _own_relevance(hit: dict[str, Any], terms: set[str], coverage: Any) -> float:
    """A passage's relevance as the bar weighs it: its meaning, or the share of the prompt's terms in
    its own words and heading (a session's answer is headed by the prompt it answers), not in its
    note's title and metadata, which every passage of the note shares."""
    return max(hit.get("meaning", 0.0), coverage(terms, (str(hit.get("passage") or ""), str(hit.get("heading") or ""))))


def _asking(prompt: str) -> bool:
    """Whether a prompt is a question ("Which club does John support?", "did we pin Node?")."""
    return prompt.rstrip().endswith(("?", "？")) or bool(_ASKING.match(prompt))


def _names(text: str) -> set[str]:
    """The capitalised words of ``text`` that are not a sentence's first: the names in a prompt, as
    English writes them ("Which club does John support?": John)."""
    return {m.group() for m in _NAME.finditer(text) if not _SENTENCE_START.search(text[: m.start()])}


def _named(hits: list[dict[str, Any]], prompt: str) -> bool:
    """Whether the prompt names someone a passage quotes: the speaker a passage or its reply starts
    with ("John: Manchester City all the way"), as chats, meeting notes and imported conversations
    write them. A name merely mentioned is not enough: a coding vault names its tools everywhere
    ("How do I write a custom hook in React?" next to the React 19 upgrade)."""
    asked = _names(prompt)
    return bool(asked) and any(
        asked & {*_SPEAKER.findall(str(h.get("passage") or "")), *_SPEAKER.findall(str(h.get("reply") or ""))}
        for h in hits
    )


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
