"""The time a query names ("in July 2022", "on 9 November, 2022", "2023-05-01", "2023년 5월"), as a
span of days a note should fall in to be what it asks about. Pure.

A day counts a week either side (what happened "on the 9th" is often told a few days later, and
"last Friday" asked about by date); a month, from a week before its first day to a week after its
last; a year, the year. A month without a year ("in October") matches that month of any year; a
year alone only after "in", "during", "of", "since", "by" or a season ("summer 2022"), so that a
number like "Cyberpunk 2077" or "port 2024" is not read as a time. Used by ``ranking`` to favour
the notes of that time (a session's start, else when the note was written): docs/search.md.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from typing import Any

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
SLACK = dt.timedelta(days=7)
_MONTH = "(" + "|".join(m[:3] + r"(?:" + m[3:] + r")?" for m in MONTHS) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_PATTERNS = (
    ("ymd", re.compile(r"\b" + _YEAR + r"-(\d\d)-(\d\d)\b")),
    ("ymd", re.compile(_YEAR + r"\s*[년年/.]\s*(\d{1,2})\s*[월月/.]\s*(\d{1,2})\s*[일日]?")),
    ("dmy", re.compile(r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b", re.IGNORECASE)),
    ("mdy", re.compile(r"\b" + _MONTH + r"\s+" + _DAY + r",?\s*" + _YEAR + r"\b", re.IGNORECASE)),
    ("my", re.compile(r"\b" + _MONTH + r",?\s+(?:of\s+)?" + _YEAR + r"\b", re.IGNORECASE)),
    ("ym", re.compile(r"\b" + _YEAR + r"-(\d\d)\b(?!-)|" + _YEAR + r"\s*[년年]\s*(\d{1,2})\s*[월月]")),
    (
        "m",
        re.compile(
            r"\b(?:in|during|of|since|until|by|early|mid|late|end of|beginning of)[\s-]+(?:the\s+)?"
            + _MONTH
            + r"(?![\w-])(?!\s*\d)",
            re.IGNORECASE,
        ),
    ),
    (
        "y",
        re.compile(
            r"\b(?:in|during|of|since|by|summer|winter|spring|autumn|fall)\s+"
            + _YEAR
            + r"\b|"
            + _YEAR
            + r"\s*[년年](?!\s*\d)",
            re.IGNORECASE,
        ),
    ),
)

Period = tuple[dt.date, dt.date, bool]  # first day, last day, whether the year matters


def period_of(query: str) -> Period | None:
    """The span of days ``query`` names, slack included (module docstring), or None."""
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            found = _span(kind, [g for g in match.groups() if g])
            if found:
                return found
    return None


def _span(kind: str, parts: list[str]) -> Period | None:
    try:
        if kind in ("ymd", "dmy", "mdy"):
            year, month, day = {"ymd": (0, 1, 2), "dmy": (2, 1, 0), "mdy": (2, 0, 1)}[kind]
            when = dt.date(int(parts[year]), _month(parts[month]), int(parts[day]))
            return when - SLACK, when + SLACK, True
        if kind in ("my", "ym"):
            year, month = (int(parts[1]), _month(parts[0])) if kind == "my" else (int(parts[0]), int(parts[1]))
            last = calendar.monthrange(year, month)[1]
            return dt.date(year, month, 1) - SLACK, dt.date(year, month, last) + SLACK, True
        if kind == "m":
            month = _month(parts[0])
            return (
                dt.date(2000, month, 1) - SLACK,
                dt.date(2000, month, calendar.monthrange(2000, month)[1]) + SLACK,
                False,
            )
        year = int(parts[0])
        return dt.date(year, 1, 1), dt.date(year, 12, 31), True
    except ValueError:  # 31 February, month 13: not a date
        return None


def _month(text: str) -> int:
    if text.isdigit():
        return int(text)
    return next(n for n, name in enumerate(MONTHS, start=1) if name.startswith(text.lower().rstrip(".")[:3]))


def within(period: Period, when: Any) -> bool:
    """Whether a note's date (ISO text, a date or datetime) falls in ``period``."""
    try:
        day = dt.date.fromisoformat(str(when)[:10])
    except ValueError:
        return False
    first, last, with_year = period
    if with_year:
        return first <= day <= last
    # a month of any year: the span is in the year 2000; try the note's date in 1999, 2000 and 2001 terms
    for shift in (-1, 0, 1):
        try:
            moved = day.replace(year=2000 + shift)
        except ValueError:  # 29 February
            moved = day.replace(year=2000 + shift, day=28)
        if first <= moved <= last:
            return True
    return False
