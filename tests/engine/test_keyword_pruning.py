"""In a large index the commonest query tokens are left out of the keyword search
(spellbook/index/fulltext.py ``over_budget``); the chunk counts it uses are kept between writes
and counted again after one."""

from __future__ import annotations

import pytest

from spellbook.index import fulltext
from spellbook.index.keyword import tokenize

WALRUS, HARBOUR = tokenize("walrus harbour")  # as indexed (stemmed)


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(fulltext, "COMMON_MIN_CHUNKS", 10)


def _note(engine, i: int, words: str) -> None:
    engine.scribe(f"Entry {i}: {words}.", title=f"Entry {i}", category="pruning")


def test_the_commonest_token_is_left_out_and_counted_again_after_a_write(engine, small_budget) -> None:
    for i in range(30):
        _note(engine, i, "walrus harbour" if i < 3 else "harbour")
    keywords = engine.catalog.keywords
    assert keywords.over_budget("walrus harbour", budget=20) == {HARBOUR}  # 30 chunks vs 3
    assert keywords.over_budget("walrus harbour", budget=100) == set()  # both fit
    assert keywords.over_budget("walrus harbour", budget=20) == {HARBOUR}  # from the kept counts
    for i in range(30, 70):  # walrus is now the commoner token
        _note(engine, i, "walrus")
    assert keywords.over_budget("walrus harbour", budget=40) == {WALRUS}
    hits = engine.memorize("walrus harbour", mode="keyword", limit=50)["results"]
    assert hits and all("harbour" in h["snippet"] or "walrus" in h["snippet"] for h in hits)


def test_a_search_without_filter_still_fills_its_hits_past_hidden_notes(engine, small_budget) -> None:
    """The unfiltered keyword search looks at twice the hits it needs; when archived notes take
    more than that, it ranks what passes in SQL instead, and still returns enough."""
    folder = engine.vault.root / "sea"
    folder.mkdir()
    for i in range(150):
        hidden = i < 140  # and ranked above the live ones: the words twice
        expires, words = (
            ("expires: 2000-01-01\n", "Lighthouse keeper, lighthouse keeper") if hidden else ("", "Lighthouse keeper")
        )
        (folder / f"log {i:03d}.md").write_text(
            f"---\ntitle: Log {i}\ncategory: sea\n{expires}---\n{words} log {i}.\n", encoding="utf-8"
        )
    engine.reconcile()
    engine.sweep_expired()
    assert engine.catalog.hidden_chunks() >= 140
    hits = engine.catalog.keywords.search("lighthouse keeper", "notes.archived = 0", [], 10)
    assert len(hits) == 10  # the 10 live ones, though 100 hidden ones rank as high
    live = {
        engine.catalog.chunk_ids(n.path)[0]
        for n in engine.catalog.list_notes("notes.archived = 0 AND notes.category = 'sea'", [], 100, 0)[0]
    }
    assert {cid for cid, _ in hits} <= live
