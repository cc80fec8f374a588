"""The in-memory keyword index (spellbook/index/postings.py) scores like FTS5's bm25() with the
catalog's column weights, also after writes, removals, frozen tails and merged segments. Each
check runs the same rows through a real FTS5 table of the catalog's shape."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest

from spellbook.index import postings as postings_module
from spellbook.index.fulltext import FTS_WEIGHTS
from spellbook.index.postings import Postings

WORDS = [f"w{i}" for i in range(60)] + ["서울", "서", "울", "東京", "東", "京", "ます"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, weights=[1 / (i + 1) for i in range(len(WORDS))], k=n))


def _row(rng: random.Random) -> tuple[str, str, str]:
    return _text(rng, rng.randint(1, 4)), _text(rng, rng.randint(0, 6)), _text(rng, rng.randint(3, 80))


class Mirror:
    """An FTS5 table of the catalog's shape, written with the same rows as the postings."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE f USING fts5(title, meta, body, tokenize='unicode61 remove_diacritics 0')"
        )

    def add(self, row: int, columns: tuple[str, str, str]) -> None:
        self.db.execute("INSERT INTO f (rowid, title, meta, body) VALUES (?, ?, ?, ?)", (row, *columns))

    def remove(self, row: int) -> None:
        self.db.execute("DELETE FROM f WHERE rowid = ?", (row,))

    def rows(self) -> list[tuple[int, str, str, str]]:
        return self.db.execute("SELECT rowid, title, meta, body FROM f").fetchall()

    def top(self, tokens: list[str], limit: int, allowed: set[int] | None = None) -> list[tuple[int, float]]:
        weights = ", ".join(map(str, FTS_WEIGHTS))
        expression = " OR ".join(f'"{t}"' for t in tokens)
        rows = self.db.execute(
            f"SELECT rowid, -bm25(f, {weights}) FROM f WHERE f MATCH ? ORDER BY 2 DESC", (expression,)
        ).fetchall()
        return [(r, s) for r, s in rows if allowed is None or r in allowed][:limit]


def assert_same_ranking(mine: list[tuple[int, float]], theirs: list[tuple[int, float]]) -> None:
    assert len(mine) == len(theirs)
    assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], rel=1e-6)
    if theirs:  # rows tied at the cut may differ; every row scoring above it is the same
        cut = theirs[-1][1] * (1 + 1e-6)
        assert {r for r, s in mine if s > cut} == {r for r, s in theirs if s > cut}


def queries(rng: random.Random, n: int) -> list[list[str]]:
    return [rng.sample(WORDS, rng.randint(1, 5)) for _ in range(n)]


def test_a_built_index_ranks_like_fts5(monkeypatch) -> None:
    monkeypatch.setattr(postings_module, "BUILD_ROWS", 37)  # a segment every 37 rows, tokens numbered across them
    rng = random.Random(7)
    mirror = Mirror()
    for row in range(1, 400):
        mirror.add(row, _row(rng))
    index = Postings.build(mirror.rows())  # 11 segments, merged on a thread while we search
    assert index.rows == 399
    for tokens in queries(rng, 60):
        assert_same_ranking(index.top(tokens, 20), mirror.top(tokens, 20))
    index.wait_merged()
    assert index.stats()["segments"] < 11
    for tokens in queries(rng, 20):
        assert_same_ranking(index.top(tokens, 20), mirror.top(tokens, 20))
    assert index.top(["absent"], 20) == [] and index.top([], 20) == []


def test_writes_removals_frozen_tails_and_merges_keep_it_equal(monkeypatch) -> None:
    monkeypatch.setattr(postings_module, "TAIL_ROWS", 16)  # a segment every 16 rows: many freezes and merges
    rng = random.Random(11)
    mirror = Mirror()
    for row in range(1, 120):
        mirror.add(row, _row(rng))
    index = Postings.build(mirror.rows())
    live = set(range(1, 120))
    next_row = 120
    for step in range(1_500):
        action = rng.random()
        if action < 0.45 or not live:  # a new chunk
            columns = _row(rng)
            index.add(next_row, *columns)
            mirror.add(next_row, columns)
            live.add(next_row)
            next_row += 1
        elif action < 0.75:  # a removed chunk
            row = rng.choice(sorted(live))
            index.remove(row)
            mirror.remove(row)
            live.discard(row)
        else:  # a rewritten chunk under the same row (SQLite reuses a freed row id too)
            row = rng.choice(sorted(live))
            columns = _row(rng)
            index.remove(row)
            mirror.remove(row)
            index.add(row, *columns)
            mirror.add(row, columns)
        if step % 250 == 249:
            for tokens in queries(rng, 10):  # also while merges run
                index.top(tokens, 10)
    index.wait_merged()
    stats = index.stats()
    assert stats["rows"] == len(live) and stats["segments"] <= 8
    for tokens in queries(rng, 60):
        assert_same_ranking(index.top(tokens, 15), mirror.top(tokens, 15))


def test_only_allowed_rows_are_ranked() -> None:
    rng = random.Random(3)
    mirror = Mirror()
    for row in range(1, 300):
        mirror.add(row, _row(rng))
    index = Postings.build(mirror.rows())
    allowed = {r for r in range(1, 300) if r % 3 == 0}
    mask = np.zeros(200, dtype=bool)  # shorter than the rows: those past it are not allowed
    mask[[r for r in allowed if r < 200]] = True
    for tokens in queries(rng, 30):
        assert_same_ranking(index.top(tokens, 10, mask), mirror.top(tokens, 10, {r for r in allowed if r < 200}))


def test_cleared_it_holds_nothing_and_takes_new_rows() -> None:
    rng = random.Random(5)
    mirror = Mirror()
    for row in range(1, 50):
        mirror.add(row, _row(rng))
    index = Postings.build(mirror.rows())
    index.clear()
    assert index.rows == 0 and index.top(WORDS[:5], 10) == []
    index.add(3, "w1", "", "w1 w2")
    assert [r for r, _ in index.top(["w1"], 10)] == [3]


def test_tokens_whose_strings_share_bytes_are_different_keys() -> None:
    """CPython hashes a string's internal buffer: 'on' (6f 6e) and '湯' (U+6E6F, kept as 6f 6e)
    had one hash, and every note with 'on' counted as holding '湯'."""
    mirror = Mirror()
    for row in range(1, 30):
        mirror.add(row, ("", "", "on the way" if row > 2 else "給湯器 湯"))
    index = Postings.build(mirror.rows())
    assert index.chunk_count("湯") == 2 and index.chunk_count("on") == 27
    assert_same_ranking(index.top(["湯"], 5), mirror.top(["湯"], 5))
