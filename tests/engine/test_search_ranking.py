"""A search reads and scores its candidates a batch at a time, best ceiling first, and stops when
no candidate left can reach the hits (spellbook/engine/ranking.py ``rank``): its hits must be
those of scoring every candidate, with importance, a superseded note, archived and expired notes,
a filter, and every mode."""

from __future__ import annotations

import random
import time
from types import SimpleNamespace

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine, ranking

TOPICS = [
    "harbour boats gulls",
    "kiln glaze clay",
    "river delta silt",
    "lantern festival kites",
    "서울 지하철 노선",
    "東京 電車 時刻表",
]


@pytest.fixture
def engine(vault, monkeypatch):
    monkeypatch.setattr(ranking, "IMPORTANCE_BOOST", 0.3)
    monkeypatch.setattr(ranking, "RECENCY_HALF_LIFE_DAYS", 30.0)
    settings = Settings(vault=vault, embedder="hashing", watch=False)
    engine = Engine(settings, embedder=HashingEmbedder())
    engine.start()
    rng = random.Random(4)
    ids = []
    for i in range(90):
        words = " ".join(rng.sample(" ".join(TOPICS).split(), 6))
        note = engine.scribe(
            f"Note {i}: {words}. {rng.choice(TOPICS)}.",
            title=f"Note {i} {rng.choice(TOPICS)}",
            category=rng.choice(["a", "b"]),
            importance=rng.randint(1, 5),
            keywords=rng.sample(" ".join(TOPICS).split(), 2),
        )
        ids.append(note["id"])
    engine.link(ids[3], ids[7], relation="supersedes")
    engine.revise(ids[11], expires="2020-01-01")
    yield engine
    engine.close()


def _all_scored(monkeypatch) -> None:
    monkeypatch.setattr(ranking, "batch_size", lambda limit: 10_000)


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_the_hits_are_those_of_scoring_every_candidate(engine, monkeypatch, mode) -> None:
    rng = random.Random(9)
    queries = [" ".join(rng.sample(" ".join(TOPICS).split(), rng.randint(1, 4))) for _ in range(25)]
    cases = [(q, limit, spec) for q in queries for limit in (1, 5) for spec in (None, {"category": "a"})]
    clock = time.time() + 86_400 * 20  # one moment for both runs: recency must not move a score between them
    monkeypatch.setattr(ranking, "time", SimpleNamespace(time=lambda: clock))
    monkeypatch.setattr(ranking, "batch_size", lambda limit: 1)  # stop as early as the ceilings allow
    early = [engine.memorize(q, limit=limit, mode=mode, filter=spec)["results"] for q, limit, spec in cases]
    _all_scored(monkeypatch)
    every = [engine.memorize(q, limit=limit, mode=mode, filter=spec)["results"] for q, limit, spec in cases]
    assert early == every
    assert sum(len(r) for r in every) > 100


def test_a_scribes_similar_notes_are_those_of_reading_every_nearest_chunk(engine) -> None:
    """``similar`` reads the nearest chunks a few at a time and stops at ``limit`` notes: the same
    notes as reading them all (several chunks of one note among the nearest, an expired note)."""
    import datetime as dt

    import numpy as np

    from spellbook.engine.search import _best_per_note
    from spellbook.vault.fields import expires_key

    rng = random.Random(11)
    sections = [f"## Part {n}\n{' '.join(rng.sample(' '.join(TOPICS).split(), 5))}" for n in range(4)]
    engine.scribe("\n\n".join(sections), title="Many parts", category="a")
    gone = engine.scribe(sections[0].split("\n", 1)[1] + " again", title="Expired twin", category="a")
    engine.revise(gone["id"], expires="2020-01-01")
    search = engine.search
    checked = 0
    paths = sorted({c.path for c in engine.catalog.chunks(sorted(engine.catalog.all_chunk_ids())).values()})
    for row in engine.catalog.notes_at(paths).values():
        for limit in (1, 3, 5):
            got = search.similar(row.path, limit)
            chunk_ids = engine.catalog.chunk_ids(row.path)
            vectors = list(engine.vectors.vectors(chunk_ids).values())
            mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
            mean /= np.linalg.norm(mean)
            found = engine.vectors.query(mean.tolist(), limit * 4 + len(chunk_ids))
            chunks = engine.catalog.chunks([cid for cid, _ in found])
            now = expires_key(dt.datetime.now(dt.UTC))
            notes = {p: n for p, n in engine.catalog.notes_at(c.path for c in chunks.values()).items() if n.live(now)}
            want = [
                (n.note_id, round(s, 4)) for _, s, _, n in _best_per_note(found, chunks, notes, limit, exclude=row.path)
            ]
            assert [(h["id"], h["similarity"]) for h in got] == want, (row.path, limit)
            assert gone["id"] not in [h["id"] for h in got]
            checked += 1
    assert checked >= 270


def _dated(vault, name: str, when: str, text: str, key: str = "started") -> None:
    (vault / "sessions").mkdir(exist_ok=True)
    (vault / "sessions" / f"{name}.md").write_text(
        f"---\ntitle: {name}\ntype: session\n{key}: {when}\n---\n{text}\n", encoding="utf-8"
    )


@pytest.mark.parametrize("key", ["started", "created"])
def test_a_query_naming_a_time_favours_the_notes_of_that_time(vault, key) -> None:
    """ "Who cooked a curry in July 2022?": the note of July 2022 first, though another holds the same
    words more often; a session's start (else when the note was written) is its time."""
    _dated(
        vault,
        "first",
        "2022-03-10T09:00:00Z",
        "Nate cooked a curry. Nate cooked a curry again, the curry was good.",
        key,
    )
    _dated(vault, "second", "2022-07-04T09:00:00Z", "Nate cooked a curry for his friends after the long walk.", key)
    for topic in TOPICS:
        _dated(vault, f"about {topic.split()[0]}", "2022-07-06T09:00:00Z", f"Joanna wrote about {topic}.", key)
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    engine.start()
    try:
        for mode in ("hybrid", "keyword"):

            def titles(query: str, mode: str = mode) -> list[str]:
                return [h["title"] for h in engine.memorize(query, mode=mode)["results"]]

            assert titles("Who cooked a curry?")[:2] == ["first", "second"], mode
            assert titles("Who cooked a curry in July 2022?")[:2] == ["second", "first"], mode
            assert titles("Who cooked a curry on 1 March, 2022?")[:2] == ["first", "second"], mode
    finally:
        engine.close()


def test_the_hits_of_a_query_naming_a_time_are_those_of_scoring_every_candidate(vault, monkeypatch) -> None:
    rng = random.Random(5)
    for i in range(60):
        words = " ".join(rng.sample(" ".join(TOPICS[:4]).split(), 6))
        _dated(
            vault, f"n{i}", f"2022-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T10:00:00Z", f"Note {i}: {words}."
        )
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    engine.start()
    try:
        queries = [
            " ".join(rng.sample(" ".join(TOPICS[:4]).split(), 3)) + f" in {month} 2022"
            for month in ("March", "July", "October")
        ]
        monkeypatch.setattr(ranking, "batch_size", lambda limit: 1)
        early = [engine.memorize(q, limit=5, mode=m)["results"] for q in queries for m in ("hybrid", "keyword")]
        _all_scored(monkeypatch)
        every = [engine.memorize(q, limit=5, mode=m)["results"] for q in queries for m in ("hybrid", "keyword")]
        assert early == every
        assert all(len(r) == 5 for r in every)
    finally:
        engine.close()


def test_a_query_naming_a_time_looks_deep_enough_to_find_the_note_of_that_time(vault) -> None:
    """70 notes of March say "curry" more often than the one of July: without looking twice as deep,
    the July note is not among the candidates its boost could lift."""
    for i in range(60):
        _dated(vault, f"other {i}", "2022-05-01T09:00:00Z", f"Note {i}: {TOPICS[i % 4]}.")
    for i in range(70):
        _dated(
            vault,
            f"march {i}",
            f"2022-03-{i % 28 + 1:02d}T09:00:00Z",
            f"Curry night {i}: the curry, more curry, and {TOPICS[i % 4]}.",
        )
    _dated(
        vault,
        "dinner",
        "2022-07-04T09:00:00Z",
        "Nate cooked for his friends after the long walk by the harbour; there was curry, rice, salad and a cake.",
    )
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    engine.start()
    try:
        for mode in ("hybrid", "keyword"):
            assert engine.memorize("curry in July 2022", limit=5, mode=mode)["results"][0]["title"] == "dinner", mode
    finally:
        engine.close()
