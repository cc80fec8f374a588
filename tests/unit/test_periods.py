"""The time a query names (spellbook/engine/periods.py): days, months, years as people write them in
English, ISO, Korean and Japanese, and numbers that are not times left alone."""

from __future__ import annotations

import datetime as dt

import pytest

from spellbook.engine.periods import period_of, within

D = dt.date


@pytest.mark.parametrize(
    "query, first, last",
    [
        ("What movie did Joanna watch on 1 May, 2022?", D(2022, 4, 24), D(2022, 5, 8)),
        ("What did Tim finish reading on 8th December, 2023?", D(2023, 12, 1), D(2023, 12, 15)),
        ("How was John feeling on April 10, 2022?", D(2022, 4, 3), D(2022, 4, 17)),
        ("what did we decide on 2023-05-01", D(2023, 4, 24), D(2023, 5, 8)),
        ("2023年5月1日の会議で決めたこと", D(2023, 4, 24), D(2023, 5, 8)),
        ("2023년 5월 1일 회의", D(2023, 4, 24), D(2023, 5, 8)),
        ("Where did Joanna travel to in July 2022?", D(2022, 6, 24), D(2022, 8, 7)),
        ("the deploy in Feb 2024", D(2024, 1, 25), D(2024, 3, 7)),
        ("2023년 5월 회의", D(2023, 4, 24), D(2023, 6, 7)),
        ("What state did Joanna visit in summer 2021?", D(2021, 1, 1), D(2021, 12, 31)),
        ("which bugs did we fix in 2023", D(2023, 1, 1), D(2023, 12, 31)),
    ],
)
def test_a_named_time_is_a_span_of_days_with_slack(query, first, last) -> None:
    assert period_of(query) == (first, last, True)


@pytest.mark.parametrize(
    "query",
    [
        "When did James try Cyberpunk 2077?",
        "Bump the version to 2.3.1",
        "May I add a unit test?",
        "Listen on port 2024",
        "Set the timeout to 30 seconds in the may-fail path",
        "Add a test for the date parser",
        "",
    ],
)
def test_what_is_not_a_time_is_none(query) -> None:
    assert period_of(query) is None


def test_a_month_without_a_year_is_that_month_of_any_year() -> None:
    period = period_of("What painting did Evan share in October?")
    assert period is not None and not period[2]
    assert within(period, "2023-10-06T10:00:00Z") and within(period, "2019-10-31")
    assert within(period, "2023-09-26") and within(period, "2023-11-07")  # a week either side
    assert not within(period, "2023-11-20") and not within(period, "2024-08-01")


def test_within_reads_iso_text_and_refuses_the_rest() -> None:
    period = period_of("in July 2022")
    assert within(period, "2022-07-10T09:00:00.000Z") and within(period, D(2022, 8, 7))
    assert not within(period, "2022-08-08") and not within(period, None) and not within(period, "soon")
