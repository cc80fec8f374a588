"""Keyword search ranks with the in-memory copy of the catalog's FTS5 index (spellbook/index/
postings.py): built on the first search, it follows every write (scribe, revise, erase, a rebuilt
index), also the writes committed while it is being built, and answers as FTS5 does."""

from __future__ import annotations

import threading

from spellbook.index import postings as postings_module
from spellbook.index.postings import Postings


def _ids(engine, query: str, **kw) -> list[str]:
    return [h["id"] for h in engine.memorize(query, mode="keyword", limit=10, **kw)["results"]]


def _fts_only(engine, query: str, **kw) -> list[str]:
    keywords = engine.catalog.keywords
    kept, keywords.postings = keywords.postings, None
    keywords._building = threading.Thread()  # marks it as loading: FTS5 ranks
    try:
        return _ids(engine, query, **kw)
    finally:
        keywords.postings, keywords._building = kept, None


def test_the_copy_follows_every_write_and_answers_as_fts5(engine) -> None:
    walrus = engine.scribe("The walrus sleeps on the harbour ice.", title="Walrus", category="zoo", tags=["arctic"])
    for i in range(12):
        engine.scribe(f"Harbour log {i}: boats and gulls.", title=f"Log {i}", category="port")
    assert _ids(engine, "walrus")[0] == walrus["id"]
    postings = engine.catalog.keywords.postings
    assert postings is not None and postings.rows == 13  # built (synchronously) by the first search

    engine.revise(walrus["id"], text="The seal naps on the harbour ice.")
    assert _ids(engine, "sleeps") == [] and _ids(engine, "seal naps") == [walrus["id"]]
    engine.erase(walrus["id"])
    assert _ids(engine, "seal naps") == []
    assert postings.rows == 12

    for query in ("harbour boats", "gulls log 3", "항구", "harbour", "arctic"):
        assert _ids(engine, query) == _fts_only(engine, query)
        assert _ids(engine, query, filter={"category": "port"}) == _fts_only(engine, query, filter={"category": "port"})

    engine.rebuild_index()
    assert engine.catalog.keywords.postings.rows == 12 and _ids(engine, "gulls log 3") == _fts_only(
        engine, "gulls log 3"
    )


def test_writes_committed_while_it_is_built_are_not_lost(engine, monkeypatch) -> None:
    old = [engine.scribe(f"Old note {i} about lanterns.", title=f"Old {i}", category="misc")["id"] for i in range(5)]
    reading, go = threading.Event(), threading.Event()
    build = Postings.build

    def slow_build(rows, stop=lambda: False):
        reading.set()
        go.wait(10)
        return build(rows, stop)

    monkeypatch.setattr(postings_module.Postings, "build", staticmethod(slow_build))
    keywords = engine.catalog.keywords
    keywords.load()  # on a thread: it has its snapshot, then waits
    assert reading.wait(10)
    new = engine.scribe("A new note about lanterns and kites.", title="Kites", category="misc")
    gone = old[2]
    engine.erase(gone)
    go.set()
    keywords._building.join(10)
    assert keywords.postings is not None and keywords.postings.rows == 5
    assert _ids(engine, "kites") == [new["id"]]
    assert sorted(_ids(engine, "lanterns")) == sorted([*old[:2], *old[3:], new["id"]])
