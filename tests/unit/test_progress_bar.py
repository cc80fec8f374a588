"""`spellbook index` progress (tqdm): nothing before there is work, a final count, no line per file in a log."""

from __future__ import annotations

import pytest

from spellbook.cli.main import ProgressBar


def test_progress_bar_in_a_log_shows_the_final_count_without_a_line_per_file(capsys: pytest.CaptureFixture) -> None:
    bar = ProgressBar("indexing")
    bar(0, 0)  # nothing to index yet: no bar
    assert capsys.readouterr().err == ""
    for done in range(1, 1001):
        bar(done, 1000)
    bar(3, 3)  # a second pass (rebuild) starts over with its own total
    bar.finish()
    err = capsys.readouterr().err
    assert "indexing" in err and "3/3" in err
    assert err.count("\n") + err.count("\r") < 10  # stderr is not a terminal here: a handful of updates, not 1000


def test_the_bar_shows_once_the_work_has_run_a_moment_or_at_its_end(capsys: pytest.CaptureFixture) -> None:
    """tqdm is imported and drawn only after ``SHOW_AFTER`` seconds or at the last count: a short
    start is not slowed by it, and the bar then starts from the count reached."""
    quick = ProgressBar("importing", unit="memory")
    quick(1, 10)
    quick(5, 10)
    assert capsys.readouterr().err == ""  # within SHOW_AFTER, not done: no bar yet
    quick(10, 10)
    quick.finish()
    assert "10/10" in capsys.readouterr().err

    slow = ProgressBar("importing", unit="memory")
    slow.SHOW_AFTER = 0.0
    slow(4, 10)
    slow.finish()
    err = capsys.readouterr().err
    assert "4/10" in err and "10/10" not in err
