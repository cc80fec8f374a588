"""Relative dates in what a captured session said, given with the day they mean (sessions/dates.py)."""

from __future__ import annotations

import datetime as dt

from spellbook.sessions.dates import day_text, named_dates, resolve_dates

MAY_8 = dt.date(2023, 5, 8)  # a Monday


def test_a_day_before_or_after_the_session_is_given_as_that_day() -> None:
    said = "I raised the worker timeout from 30 s to 45 s yesterday, and we deploy it tomorrow."
    assert resolve_dates(said, MAY_8) == (
        "I raised the worker timeout from 30 s to 45 s yesterday (7 May 2023), and we deploy it tomorrow (9 May 2023)."
    )
    assert (
        resolve_dates("Yesterday the build broke; the day before yesterday it passed.", MAY_8)
        == "Yesterday (7 May 2023) the build broke; the day before yesterday (6 May 2023) it passed."
    )
    assert resolve_dates("We found the leak two days ago.", MAY_8) == "We found the leak two days ago (6 May 2023)."
    assert resolve_dates("The cache was cleared last night.", MAY_8).endswith("last night (7 May 2023).")


def test_weekdays_weeks_months_and_years_are_read_against_the_session_date() -> None:
    assert resolve_dates("The outage was last Friday.", MAY_8) == "The outage was last Friday (5 May 2023)."
    assert resolve_dates("Last Monday we cut the release.", MAY_8) == "Last Monday (1 May 2023) we cut the release."
    assert (
        resolve_dates("We switched to Postgres last week.", MAY_8)
        == "We switched to Postgres last week (the week before 8 May 2023)."
    )
    assert (
        resolve_dates("The freeze starts next month, after the audit last year.", MAY_8)
        == "The freeze starts next month (June 2023), after the audit last year (2022)."
    )
    assert (
        resolve_dates("I wrote the parser 3 years ago and rewrote it a few days ago.", MAY_8)
        == "I wrote the parser 3 years ago (2020) and rewrote it a few days ago (a few days before 8 May 2023)."
    )
    assert resolve_dates("two months ago", dt.date(2023, 1, 31)) == "two months ago (November 2022)"


def test_korean_and_japanese_relative_dates_are_resolved_and_the_text_stays_whole() -> None:
    ko = "어제 타임아웃을 45초로 바꿨습니다. 지난주에는 30초였어요."
    assert (
        resolve_dates(ko, MAY_8)
        == "어제 (7 May 2023) 타임아웃을 45초로 바꿨습니다. 지난주 (the week before 8 May 2023)에는 30초였어요."
    )
    ja = "昨日、タイムアウトを45秒に変更しました。一昨日は30秒でした。"
    assert (
        resolve_dates(ja, MAY_8)
        == "昨日 (7 May 2023)、タイムアウトを45秒に変更しました。一昨日 (6 May 2023)は30秒でした。"
    )


def test_text_without_relative_dates_or_already_dated_is_left_as_it_is() -> None:
    for said in (
        "The yesterday_report table holds the daily totals.",
        "Lastweek is the name of the job.",
        "Yesterday (7 May) the deploy failed.",
        "We deploy every week and every month.",
    ):
        assert resolve_dates(said, MAY_8) == said
    assert day_text(dt.date(2022, 1, 21)) == "21 January 2022"


def test_seasons_are_the_last_one_over_or_the_next_one_to_come() -> None:
    assert resolve_dates("We moved to Kubernetes last summer.", dt.date(2023, 12, 26)).endswith(
        "last summer (summer 2023)."
    )
    assert resolve_dates("We moved to Kubernetes last summer.", dt.date(2023, 7, 1)).endswith(
        "last summer (summer 2022)."
    )
    assert resolve_dates("next spring", MAY_8) == "next spring (spring 2024)"
    assert resolve_dates("last winter", MAY_8) == "last winter"  # which year's? left alone


def test_the_days_and_months_a_prompt_names_are_read_as_recall_lines_write_them() -> None:
    assert named_dates("What did Tim say about his injury on 16 November, 2023?") == ["16 November 2023"]
    assert named_dates("what changed on November 3rd, 2026 and on the 4th of november 2026") == [
        "3 November 2026",
        "4 November 2026",
    ]
    assert named_dates("Where did Joanna travel to in July 2022?") == ["July 2022"]
    assert named_dates("Bump the version to 2.3.1 and update the changelog") == []
