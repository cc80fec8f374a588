"""Vectors written behind the reply (spellbook/index/chroma.py): a search sees a note's vectors the
moment its write returns, while the writer thread has not put them in Chroma yet; a delete or a
second write meanwhile leaves Chroma with exactly what the catalog has."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.index import chroma
from tests.helpers.engine import open_engine


@pytest.fixture
def held(settings: Settings, monkeypatch):
    """An engine whose vector writer waits (batching) until a flush tells it to write."""
    monkeypatch.setattr(chroma, "QUIET_SECONDS", 60.0)
    monkeypatch.setattr(chroma, "LATEST_SECONDS", 60.0)
    engine = open_engine(settings)
    yield engine
    engine.close()


def _in_chroma(engine, ids) -> set[str]:
    with engine.vectors._chroma() as collection:  # opened by now, or opened here (a new index opens on first use)
        return set(collection.get(ids=list(ids), include=[])["ids"])


def test_a_search_finds_a_note_whose_vectors_are_not_in_chroma_yet(held) -> None:
    engine = held
    out = engine.scribe("Walruses haul out on sea ice to rest between dives.", title="Walrus rest", category="zoo")
    engine.scribe("Kettles boil water for tea.", title="Kettle", category="kitchen")
    chunk_ids = engine.catalog.chunk_ids(out["path"])
    assert engine.vectors.behind() >= len(chunk_ids) and not _in_chroma(engine, chunk_ids)
    for filter_ in (None, {"category": "zoo"}):  # Chroma's HNSW, and the in-memory matrix behind filters
        hits = engine.memorize("walruses haul out on sea ice", mode="semantic", filter=filter_)["results"]
        assert hits and hits[0]["id"] == out["id"], filter_
    seen = engine.vectors.vectors(chunk_ids)
    assert seen.keys() == set(chunk_ids) and all(isinstance(x, float) for v in seen.values() for x in v)
    # held as float32 rows (2 KB at 512-d), not lists of Python floats (16 KB)
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in engine.vectors._behind.values())
    assert engine.vectors.flush(10) == 0  # a flush makes the writer write now
    assert _in_chroma(engine, chunk_ids) == set(chunk_ids)
    with engine.vectors._chroma() as collection:
        stored = collection.get(ids=list(chunk_ids), include=["embeddings"])
    for chunk_id, vector in zip(stored["ids"], stored["embeddings"]):
        assert list(vector) == pytest.approx(seen[chunk_id], abs=1e-6)
    assert engine.check()["consistent"]


def test_an_erase_before_the_write_leaves_no_vector_behind(held) -> None:
    engine = held
    out = engine.scribe("Narwhals have one long tusk.", title="Narwhal", category="zoo")
    chunk_ids = engine.catalog.chunk_ids(out["path"])
    engine.erase(out["id"])
    assert not engine.memorize("narwhals tusk", mode="semantic")["results"] or all(
        h["id"] != out["id"] for h in engine.memorize("narwhals tusk", mode="semantic")["results"]
    )
    engine.vectors.flush(10)
    assert not _in_chroma(engine, chunk_ids)  # not written after the erase: no orphan vector
    assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
    assert engine.check()["consistent"]


def test_a_revise_before_the_write_stores_the_new_vectors_only(held) -> None:
    engine = held
    out = engine.scribe("Otters hold hands while they sleep.", title="Otters", category="zoo")
    first = engine.vectors.vectors(engine.catalog.chunk_ids(out["path"]))
    engine.revise(out["id"], text="Otters crack shellfish open with stones.")
    chunk_ids = engine.catalog.chunk_ids(out["path"])
    latest = engine.vectors.vectors(chunk_ids)  # from what is behind
    assert latest and latest != first
    engine.vectors.flush(10)
    assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
    with engine.vectors._chroma() as collection:
        stored = collection.get(ids=chunk_ids, include=["embeddings"])
    for chunk_id, vector in zip(stored["ids"], stored["embeddings"]):
        assert list(vector) == pytest.approx(latest[chunk_id], abs=1e-6)
    assert engine.memorize("shellfish stones", mode="semantic")["results"][0]["id"] == out["id"]


def test_close_writes_what_is_behind(settings: Settings) -> None:
    engine = open_engine(settings)
    out = engine.scribe("Puffins nest in burrows on cliffs.", title="Puffins", category="zoo")
    engine.close()  # no wait: the writer batches for up to a second, close flushes it
    engine = open_engine(settings)
    try:
        assert engine.catalog.chunk_ids(out["path"])[0] in _in_chroma(engine, engine.catalog.chunk_ids(out["path"]))
        assert engine.indexer.missing == set()
    finally:
        engine.close()


def test_an_idle_chroma_rests_and_opens_again_when_needed(settings: Settings) -> None:
    """``rest`` closes an idle embedded Chroma (its graph and vectors leave memory); searches go on
    from the matrix, and the next write, count or read opens it again with nothing lost."""
    engine = open_engine(settings)
    try:
        first = engine.scribe("Puffins nest in burrows on cliffs.", title="Puffins", category="zoo")
        assert not engine.vectors.rest(0)  # its vectors are still behind: no rest
        engine.memorize("puffin burrows", mode="semantic")  # the first search reads the matrix from Chroma
        engine.vectors.flush(10)
        assert engine.vectors.rest(0) and engine.vectors._collection is None
        assert not engine.vectors.rest(0)  # already resting
        assert engine.memorize("puffin burrows", mode="semantic")["results"][0]["id"] == first["id"]
        assert engine.vectors._collection is None  # a search up to EXACT_ROWS never needs Chroma
        second = engine.scribe("Gannets dive from thirty metres.", title="Gannets", category="zoo")
        engine.vectors.flush(10)
        assert engine.vectors._collection is not None  # the writer opened it again
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
        assert engine.vectors.rest(0)
        assert engine.vectors.count() == len(engine.catalog.all_chunk_ids())
        assert engine.memorize("diving seabirds", mode="semantic")["results"][0]["id"] == second["id"]
        assert not engine.vectors.rest(60)  # used just now
        assert engine.check()["consistent"]
    finally:
        engine.close()
    engine = open_engine(settings)  # everything was written before each rest
    try:
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() and engine.indexer.missing == set()
    finally:
        engine.close()


@pytest.mark.parametrize("exact_rows", [50_000, 1])
def test_the_owner_lets_chroma_rest_once_it_has_read_the_vectors_at_start(
    settings: Settings, monkeypatch, exact_rows: int
) -> None:
    """After the start-up scan the owner reads every vector into the matrix; when queries score the
    matrix, Chroma is closed at once (not 20 s later) and opened again by the next write. Above
    EXACT_ROWS, queries use Chroma's graph, so it stays open."""
    from spellbook.server.hub import Hub

    monkeypatch.setattr(chroma, "EXACT_ROWS", exact_rows)
    for i in range(5):
        (settings.vault_dir / f"bird {i}.md").write_text(
            f"# Bird {i}\n\nSeabird number {i} nests on cliffs.\n", encoding="utf-8"
        )
    hub = Hub(settings, watch=False, client="test")
    hub.start(background=False)
    try:
        vectors = hub.engine.vectors
        assert len(vectors.matrix()) == 5
        if exact_rows == 1:  # queries need the graph: written, and not rested
            assert vectors.flush(10) == 0 and not vectors.rest_after_start() and vectors._collection is not None
            return
        assert vectors._collection is None
        hits = hub.call("memorize", {"query": "seabird cliffs", "mode": "semantic"})["results"]
        assert len(hits) == 5 and vectors._collection is None
        out = hub.call("scribe", {"text": "Gannets dive from thirty metres.", "title": "Gannets", "category": "zoo"})
        assert vectors.flush(10) == 0 and vectors._collection is not None
        assert vectors.ids() == hub.engine.catalog.all_chunk_ids()
        assert hub.call("memorize", {"query": "diving gannets", "mode": "semantic"})["results"][0]["id"] == out["id"]
    finally:
        hub.close()


def test_a_vector_put_and_waited_for_is_not_overwritten_by_an_older_one_left_behind(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(chroma, "QUIET_SECONDS", 60.0)  # the writer holds the older vector until the flush
    monkeypatch.setattr(chroma, "LATEST_SECONDS", 60.0)
    index = chroma.VectorIndex.embedded(tmp_path / "chroma")
    try:
        index.upsert(["x:0"], [[1.0, 0.0, 0.0]], wait=False)
        index.upsert(["x:0"], [[0.0, 1.0, 0.0]])  # later, and waited for
        assert index.flush(10) == 0
        with index._chroma() as collection:
            stored = collection.get(ids=["x:0"], include=["embeddings"])["embeddings"][0]
        assert np.allclose(stored, [0.0, 1.0, 0.0])
    finally:
        index.close()


def test_a_bulk_job_gathers_its_batches_into_fewer_chroma_writes(tmp_path, monkeypatch) -> None:
    """Batches 0.25 s apart are written one by one (the writer waits 0.05 s for more); during a bulk
    job (an import, a first index) the writer gathers them (Chroma costs ~10 ms a call); once the
    job ends it writes again without a flush."""
    monkeypatch.setattr(chroma, "LATEST_SECONDS", 5.0)  # only the quiet period decides here
    index = chroma.VectorIndex.embedded(tmp_path / "chroma")
    calls: list[int] = []
    write = index._write
    monkeypatch.setattr(index, "_write", lambda ids, vectors: calls.append(len(ids)) or write(ids, vectors))
    rng = np.random.default_rng(7)

    def five_batches(prefix: str) -> None:
        for b in range(5):
            index.upsert([f"{prefix}{b}:{i}" for i in range(20)], rng.random((20, 8)).tolist(), wait=False)
            time.sleep(0.25)

    try:
        five_batches("alone")
        assert index.flush(10) == 0
        one_by_one = len(calls)
        calls.clear()
        with index.bulk():
            five_batches("bulk")
        deadline = time.monotonic() + 5
        while index.behind() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert index.behind() == 0 and sum(calls) == 100  # written without a flush once the job ended
        assert one_by_one >= 3 and len(calls) <= 2, (one_by_one, calls)
        with index._chroma() as collection:
            assert collection.count() == 200
    finally:
        index.close()


def test_chroma_gets_ids_and_vectors_only(settings: Settings) -> None:
    """Both ways a vector reaches Chroma (behind a tool's write, and waited for by an index run)
    write no metadata: the catalog holds the rest, and Chroma holds the interpreter lock longer
    for each metadata row it writes."""
    engine = open_engine(settings)
    try:
        engine.scribe("Walruses haul out on sea ice to rest between dives.", title="Walrus rest", category="zoo")
        (settings.vault_dir / "hand.md").write_text("# Kettles\n\nKettles boil water for tea.\n", encoding="utf-8")
        engine.indexer.sync_path("hand.md")
        assert engine.vectors.flush(10) == 0
        with engine.vectors._chroma() as collection:
            stored = collection.get(include=["metadatas", "embeddings"])
        assert set(stored["ids"]) == engine.catalog.all_chunk_ids() and len(stored["ids"]) >= 2
        assert all(meta is None for meta in stored["metadatas"])
        assert all(len(v) == engine.embedder.dimensions for v in stored["embeddings"])
    finally:
        engine.close()


class _GatedEmbedder(HashingEmbedder):
    """The hashing embedder, holding any text with 'gated' in it until ``open`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.open = threading.Event()

    def embed_documents(self, texts):
        if any("gated" in t for t in texts):
            self.waiting.set()
            assert self.open.wait(30)
        return super().embed_documents(texts)


def test_the_catalog_is_written_while_the_model_runs_and_no_chunk_keeps_an_old_vector(held, settings) -> None:
    """A tool's write commits its rows while the model still embeds its text (the model's time is
    not added to Spellbook's); meanwhile its chunks count as missing, and a changed chunk has no
    vector at all rather than the one of its old text, in Chroma too (a crash then leaves it
    missing, embedded again at the next start, never with another text's vector)."""
    held.close()
    gate = _GatedEmbedder()
    engine = open_engine(settings, embedder=gate)
    try:
        kept = engine.scribe("Otters hold hands while they sleep.", title="Otters", category="zoo")
        engine.vectors.flush(10)
        old_ids = engine.catalog.chunk_ids(kept["path"])
        assert _in_chroma(engine, old_ids) == set(old_ids)
        results: dict[str, dict] = {}
        writers = [
            threading.Thread(
                target=lambda: results.setdefault(
                    "new", engine.scribe("A gated pelican scoops fish into its pouch.", title="Pelican", category="zoo")
                )
            ),
        ]
        writers[0].start()
        assert gate.waiting.wait(10)
        deadline = time.monotonic() + 10
        while not engine.memorize("pelican pouch", mode="keyword")["results"] and time.monotonic() < deadline:
            time.sleep(0.01)
        (hit,) = engine.memorize("pelican pouch", mode="keyword")["results"]
        new_ids = engine.catalog.chunk_ids(hit["path"])
        assert new_ids and set(new_ids) <= engine.indexer.missing and not engine.vectors.vectors(new_ids)
        gate.open.set()
        writers[0].join(10)
        assert engine.vectors.vectors(new_ids).keys() == set(new_ids) and not set(new_ids) & engine.indexer.missing
        assert results["new"]["id"] == hit["id"]

        gate.open.clear()
        gate.waiting.clear()
        reviser = threading.Thread(target=lambda: engine.revise(kept["id"], text="The gated otters now sleep apart."))
        reviser.start()
        assert gate.waiting.wait(10)
        changed = engine.catalog.chunk_ids(kept["path"])
        deadline = time.monotonic() + 10
        while "apart" not in engine.catalog.chunks(changed)[changed[0]].text and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "apart" in engine.catalog.chunks(changed)[changed[0]].text  # the new text is in the catalog...
        assert not engine.vectors.vectors(changed) and not _in_chroma(engine, changed)  # ...and no old vector anywhere
        gate.open.set()
        reviser.join(10)
        assert engine.vectors.flush(10) == 0 and _in_chroma(engine, changed) == set(changed)
        assert engine.check()["consistent"]
    finally:
        gate.open.set()
        engine.close()
