"""The words of a hit that answer a query: the best window of one to three sentences of its chunk.

Pure. A chunk short enough is its own passage; a longer one is cut into sentences (``.!?`` before a
space, ``。！？`` with or without one, as Japanese and Chinese write them, and line breaks) and the
window of one to three consecutive sentences holding the most of the query's terms (words, CJK
bigrams: ``hybrid.query_terms``) wins, the shorter on a tie; a chunk holding none of them (a hit
found by meaning alone) gives its opening. A window past ``limit`` characters is cut there (a third
of them in CJK text, whose characters are a token each). A session's passage that ends in a
question comes with the opening of the reply (``opening``): "What's your favorite dish from the
show?" is found by a prompt's words, and the answer is what was said next.
"""

from __future__ import annotations

import re

from spellbook.engine.hybrid import query_terms
from spellbook.index.keyword import normalize

PASSAGE_CHARS = 360
REPLY_CHARS = 200
WINDOW = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|(?<=[。！？])[」』”’)）]*\s*|\s*\n\s*")
_HEADING = re.compile(r"\A\s{0,3}#{1,6}[ \t][^\n]*\n?")
_SPEAKER = re.compile(r"\A([^\s:：][^:：\n]{0,39})[:：]\s")


def wording(text: str) -> str:
    """A chunk's words as compared for sameness: without its heading (a session event's carries
    its time), in lower case, single spaces."""
    return " ".join(_HEADING.sub("", text, count=1).lower().split())


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (stripped, none empty)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def asks(passage_text: str) -> bool:
    """Whether a passage ends in a question (its reply may hold the answer)."""
    return passage_text.rstrip("\"'”’)]」』）").endswith(("?", "？"))


def opening(text: str, limit: int = REPLY_CHARS) -> str:
    """The first sentences of a chunk's ``text`` within ``limit`` characters (fewer in CJK text), as
    one line: the first sentence cut at a word when it alone is longer."""
    body, limit = _flat(text, limit)
    if len(body) <= limit:
        return body
    out = ""
    for sentence in sentences(body):
        if len(out) + len(sentence) + 1 > limit:
            break
        out = f"{out} {sentence}".strip()
    if not out:
        out = body[: limit - 1].rsplit(" ", 1)[0] if " " in body[: limit - 1] else body[: limit - 1]
    return out.rstrip() + " …"


def _flat(text: str, limit: int) -> tuple[str, int]:
    """A chunk's text without its heading, as one line, and ``limit`` for it: a CJK character is a
    token where about 4 ASCII characters are, so fewer of them fit."""
    flat = " ".join(_HEADING.sub("", text, count=1).replace("\\#", "#").split())
    if flat:
        wide = sum(1 for ch in flat if ord(ch) > 0x2E7F) / len(flat)
        limit = int(limit * (1 - wide * 2 / 3))
    return flat, limit


def passage(text: str, query: str, limit: int = PASSAGE_CHARS) -> str:
    """The part of a chunk's ``text`` (its markdown) that best matches ``query``, as one line."""
    body = _HEADING.sub("", text, count=1).replace("\\#", "#")
    flat, limit = _flat(text, limit)
    if len(flat) <= limit:
        return flat
    parts = sentences(body)
    terms = query_terms(query)
    found = [{t for t in terms if t in normalize(s)} for s in parts]
    best, best_key = (0, 1), (0, 0)
    for start in range(len(parts)):
        covered: set[str] = set()
        for end in range(start + 1, min(start + WINDOW, len(parts)) + 1):
            covered |= found[end - 1]
            size = sum(len(s) + 1 for s in parts[start:end])
            if end > start + 1 and size > limit:
                break
            key = (len(covered), -size)
            if covered and key > best_key:
                best, best_key = (start, end), key
    if not best_key[0]:  # found by meaning alone: the opening
        return flat[: limit - 1].rstrip() + " …"
    start, end = best
    window = " ".join(" ".join(parts[start:end]).split())
    if len(window) > limit:
        window, end = window[: limit - 1].rstrip(), len(parts) + 1  # cut: it goes on
    lead = "… " if start else ""
    if start and (speaker := _SPEAKER.match(flat)):  # who said it, when the window starts later in a turn
        lead = f"{speaker.group(1)}: … "
    return lead + window + (" …" if end != len(parts) else "")
