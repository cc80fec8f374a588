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
