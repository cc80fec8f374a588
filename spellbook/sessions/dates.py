"""Relative dates in what a session said, read against the session's date. Pure, stdlib only.

"I fixed it yesterday" in a session of 8 May 2023 is given as "I fixed it yesterday (7 May 2023)":
a prompt asks "when did ..." weeks later, and "yesterday" alone answers nothing. English, Korean and
Japanese words for the day before or after, a weekday last or next, days, weeks, months or years
ago, last or next week, month, year and season (spring, summer, autumn as the northern hemisphere has
them; winter spans two years and is left alone). Dates are written as the recall lines write a day
(``7 May 2023``); a phrase already followed by a parenthesis is left as it is.
"""

from __future__ import annotations

import datetime as dt
import re

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "couple of": 2,
}
_SEASON_ENDS = {"spring": 5, "summer": 8, "autumn": 11, "fall": 11}  # the month each ends (northern)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNT = r"(\d{1,2}|an?|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|couple of|a few|few)"
_EN = (
    r"\b(?:the day before yesterday|yesterday|last night|tomorrow"
    rf"|{_COUNT} (day|week|month|year)s? ago"
    r"|(last|this past|past|next) (week(?:end)?|month|year|spring|summer|autumn|fall)"
    rf"|(last|next) ({'|'.join(_WEEKDAYS)}))\b"
)
# Korean and Japanese words, longest first (一昨日 before 昨日); no word boundaries in either script.
_CJK = {
    "그저께": -2,
    "그제": -2,
    "어제": -1,
    "내일": 1,
    "一昨日": -2,
    "おととい": -2,
    "昨日": -1,
    "明日": 1,
    "지난주": "week",
    "先週": "week",
    "지난달": "month",
    "先月": "month",
    "작년": "year",
    "지난해": "year",
    "去年": "year",
    "昨年": "year",
}
_PHRASE = re.compile(rf"{_EN}|{'|'.join(_CJK)}", re.IGNORECASE)
_FOLLOWED = re.compile(r"\s*\(")
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_NAMED = re.compile(
    rf"\b(?:{_ORDINAL}\s*(?:of\s+)?({MONTHS}),?\s*(\d{{4}})|({MONTHS})\s+{_ORDINAL},?\s*(\d{{4}})"
    rf"|({MONTHS}),?\s+(\d{{4}}))\b",
    re.IGNORECASE,
)


def day_text(day: dt.date) -> str:
    """``2022-01-21`` as ``21 January 2022``: the way people ask about a day and answer."""
    return f"{day.day} {day:%B %Y}"


def named_dates(text: str) -> list[str]:
    """The days and months ``text`` names, as recall lines write them: "on November 16th, 2023" ->
    ``16 November 2023``, "in May 2022" -> ``May 2022``."""
    out = []
    for match in _NAMED.finditer(text):
        day, month, year = (
            match.group(1, 2, 3)
            if match.group(1)
            else match.group(5, 4, 6)
            if match.group(5)
            else (None, *match.group(7, 8))
        )
        month = month.capitalize()
        out.append(f"{int(day)} {month} {year}" if day else f"{month} {year}")
    return out


def resolve_dates(text: str, when: dt.date) -> str:
    """``text`` with each relative date it names followed by the date it means on ``when``."""

    def one(match: re.Match[str]) -> str:
        if _FOLLOWED.match(text, match.end()):
            return match.group(0)
        meant = _meaning(match, when)
        return f"{match.group(0)} ({meant})" if meant else match.group(0)

    return _PHRASE.sub(one, text)


def _meaning(match: re.Match[str], when: dt.date) -> str:
    phrase = match.group(0).lower()
    if phrase in _CJK:
        shift = _CJK[phrase]
        return day_text(when + dt.timedelta(days=shift)) if isinstance(shift, int) else _before(shift, when)
    if phrase in ("yesterday", "last night", "the day before yesterday", "tomorrow"):
        shift = {"yesterday": -1, "last night": -1, "the day before yesterday": -2, "tomorrow": 1}[phrase]
        return day_text(when + dt.timedelta(days=shift))
    count, unit, side, span, weekday_side, weekday = match.groups()
    if count:
        return _ago(count.lower(), unit.lower(), when)
    if side:
        side, span = side.lower(), span.lower()
        if side == "next":
            return _after(span, when)
        return _before(span, when)
    target = _WEEKDAYS.index(weekday.lower())
    if weekday_side.lower() == "last":
        back = (when.weekday() - target) % 7 or 7
        return day_text(when - dt.timedelta(days=back))
    ahead = (target - when.weekday()) % 7 or 7
    return day_text(when + dt.timedelta(days=ahead))


def _ago(count: str, unit: str, when: dt.date) -> str:
    if count in ("a few", "few"):
        return f"a few {unit}s before {day_text(when)}" if unit in ("day", "week") else ""
    n = int(count) if count.isdigit() else _NUMBERS[count]
    if unit == "day":
        return day_text(when - dt.timedelta(days=n))
    if unit == "week":
        return f"the week of {day_text(when - dt.timedelta(weeks=n))}"
    if unit == "month":
        return _month(when, -n)
    return str(when.year - n)


def _before(span: str, when: dt.date) -> str:
    if span in ("week", "weekend"):
        return f"the {span} before {day_text(when)}"
    if span in _SEASON_ENDS:  # the last one that is over: "last summer" in December is this year's
        return f"{span} {when.year if when.month > _SEASON_ENDS[span] else when.year - 1}"
    return _month(when, -1) if span == "month" else str(when.year - 1)


def _after(span: str, when: dt.date) -> str:
    if span in ("week", "weekend"):
        return f"the {span} after {day_text(when)}"
    if span in _SEASON_ENDS:  # the next one that has not begun
        return f"{span} {when.year if when.month < _SEASON_ENDS[span] - 2 else when.year + 1}"
    return _month(when, 1) if span == "month" else str(when.year + 1)


def _month(when: dt.date, shift: int) -> str:
    index = when.year * 12 + when.month - 1 + shift
    return f"{dt.date(index // 12, index % 12 + 1, 1):%B %Y}"
