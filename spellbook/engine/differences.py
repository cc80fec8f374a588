"""What two texts about the same thing state differently: the numbers and negations behind the
contradiction issues of ``analyze_knowledge`` (health.py), and the values a SessionStart briefing
shows as changed (sessions/briefing.py). Pure, standard library only: the hooks import it.
"""

from __future__ import annotations

import re

NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
NEGATION = re.compile(
    r"\b(?:not|never|no longer|cannot|can't|don't|doesn't|didn't|isn't|aren't|wasn't|weren't|won't)\b"
    r"|않[는다았]|없[다어었]|못 |ない|ません|ではない|じゃない",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_COMMON = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "into",
        "now",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "then",
        "than",
        "after",
        "before",
        "about",
        "still",
        "also",
        "only",
        "each",
        "per",
        "stays",
        "set",
        "raised",
        "lowered",
        "changed",
        "instead",
        "went",
        "moved",
        "we",
        "our",
        "i",
        "you",
        "they",
        "them",
        "has",
        "have",
        "had",
        "not",
        "no",
        "yes",
    ]
)
Numbers = dict[str, tuple[set[str], str, bool]]  # a number -> (the words near it, its unit, given as former)
_FORMER_BEFORE = re.compile(r"(?:\bfrom|\binstead of|\bwas|\bwere|\breplacing|\bpreviously|\bformerly|\brather than)$")
_FORMER_AFTER = re.compile(r"\w*(?:에서|から)$")
BEFORE, AFTER = 6, 2  # the words around a number that say what it counts


def differences(a: str, b: str) -> list[str]:
    """What two near-identical texts state differently: numbers only one of them has (and the other
    has others), and a negation only one of them has."""
    out = []
    numbers_a, numbers_b = set(NUMBER.findall(a)), set(NUMBER.findall(b))
    only_a, only_b = sorted(numbers_a - numbers_b), sorted(numbers_b - numbers_a)
    if only_a and only_b:
        out.append(f"{', '.join(only_a[:3])} vs {', '.join(only_b[:3])}")
    if bool(NEGATION.search(a)) != bool(NEGATION.search(b)):
        out.append("only one of them says not")
    return out


def changed_value(old: str | Numbers, new: str | Numbers) -> str | None:
    """``"8000 -> 8080"`` when ``new`` gives another number for something ``old`` numbers: a word near
    each number is the same ("port 8000", "listens on port 8080"), and either ``new`` names the old
    number as the former one ("8080 instead of 8000", "from 30 s to 45 s", "(it was 14)", "50개에서
    20개로", "30秒から") or both numbers have the same unit and two words near them in common. Else
    None. Either text may be given as its ``numbers_of``."""
    old_numbers = numbers_of(old) if isinstance(old, str) else old
    new_numbers = numbers_of(new) if isinstance(new, str) else new
    for other, (other_subject, other_unit, _) in new_numbers.items():
        if other in old_numbers:
            continue
        for number, (subject, unit, _) in old_numbers.items():
            shared = subject & other_subject
            former = number in new_numbers and new_numbers[number][2]
            if shared and (former or (unit and unit == other_unit and len(shared) >= 2)):
                return f"{number} -> {other}"
    return None


def numbers_of(text: str) -> Numbers:
    """Each number of ``text`` -> (the words near it, lower case, a plural's -s/-es dropped, a CJK
    run as its pairs of characters; the word right after it, its unit; whether the text gives it as
    a former value: "from 30", "instead of 8000", "was 14", "50개에서", "30秒から")."""
    tokens = _TOKEN.findall(text)
    out: Numbers = {}
    for n, token in enumerate(tokens):
        if not token[0].isdigit():
            continue
        near: set[str] = set()
        for word in tokens[max(0, n - BEFORE) : n] + tokens[n + 1 : n + 1 + AFTER]:
            near |= _keys(word)
        after = tokens[n + 1].lower() if n + 1 < len(tokens) and not tokens[n + 1][0].isdigit() else ""
        before = " ".join(tokens[max(0, n - 2) : n]).lower()
        former = bool(_FORMER_BEFORE.search(before) or _FORMER_AFTER.match(after))
        subject, unit, was = out.setdefault(token, (set(), after, False))
        subject |= near
        if former and not was:
            out[token] = (subject, unit, True)
    return out


def _keys(word: str) -> set[str]:
    if word[0].isdigit():
        return set()
    if _CJK.search(word):
        return {word[i : i + 2] for i in range(max(1, len(word) - 1))}
    word = word.lower()
    if len(word) < 3 or word in _COMMON:
        return set()
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return {word[:-2]}
    return {word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word}
