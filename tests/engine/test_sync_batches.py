"""``Indexer.sync_batches`` (a first index, an import): each batch is embedded while the one before
it is written, and what that overlap could get wrong does not happen: a file changed on disk
between its reading and its writing is indexed as it is now, two files with one id in different
batches are still reported, and closing the index mid-way stops it without a batch half written."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.errors import IndexUnavailableError
from tests.helpers.engine import open_engine


class Gated(HashingEmbedder):
    """The hashing embedder; a text containing a key of ``on_text`` runs that callback first."""

    parallel = 2

    def __init__(self) -> None:
        super().__init__()
        self.on_text: dict[str, object] = {}

    def embed_documents(self, texts):
        for key, callback in list(self.on_text.items()):
            if any(key in t for t in texts):
                del self.on_text[key]
                callback()
        return super().embed_documents(texts)


def write(vault: Path, name: str, text: str) -> str:
    (vault / name).parent.mkdir(parents=True, exist_ok=True)
    (vault / name).write_text(text, encoding="utf-8")
    return name


@pytest.fixture
def opened(settings: Settings):
    embedder = Gated()
    engine = open_engine(settings, embedder)
    yield engine, embedder, settings.vault_dir
    engine.close()


def test_the_next_batch_is_embedded_while_one_is_written(opened: tuple[Engine, Gated, Path]) -> None:
    engine, embedder, vault = opened
    first = [write(vault, f"one/n{i}.md", f"# One {i}\n\nFirst batch, note {i}.\n") for i in range(3)]
    second = [write(vault, f"two/n{i}.md", f"# Two {i}\n\nSecond batch, note {i}.\n") for i in range(3)]
    written = threading.Event()
    inner = engine.catalog.replace_many

    def replace_many(items):
        items = list(items)
        inner(items)
        if any(f.path == first[0] for f, _, _ in items):
            written.set()

    engine.catalog.replace_many = replace_many
    overlapped: list[bool] = []
    # The second batch's model call waits until the first batch is in the catalog: without the
    # overlap (embed, then write, then read the next) this would time out.
    embedder.on_text["Second batch"] = lambda: overlapped.append(written.wait(timeout=10))
    report = engine.indexer.sync_batches([first, second])
    assert overlapped == [True]
    assert report.indexed == 6 and report.embedded_chunks == 6
    assert engine.vectors.ids() == engine.catalog.all_chunk_ids()


def test_a_file_changed_while_its_batch_was_embedded_is_indexed_as_it_is_now(
    opened: tuple[Engine, Gated, Path],
) -> None:
    engine, embedder, vault = opened
    names = [write(vault, f"notes/n{i}.md", f"# Note {i}\n\nThe old text of note {i}.\n") for i in range(4)]
    edited = "# Note 1\n\nA person rewrote this note while the index was reading it, the lighthouse keeper.\n"
    embedder.on_text["old text of note 1"] = lambda: (vault / names[1]).write_text(edited, encoding="utf-8")
    report = engine.indexer.sync_batches([names[:2], names[2:]])
    assert report.indexed == 4
    (chunk,) = engine.catalog.chunks_of(names[1])
    assert "lighthouse keeper" in chunk.text
    hits = engine.memorize("lighthouse keeper", limit=1)["results"]
    assert hits[0]["path"] == names[1]
    assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
    assert engine.indexer.missing == set()


def test_one_id_in_two_batches_is_reported_as_a_duplicate(opened: tuple[Engine, Gated, Path]) -> None:
    engine, _, vault = opened
    note = "---\nid: shared-id\ntitle: Twin\n---\nOne of two files with one id.\n"
    a = write(vault, "twins/a.md", note)
    b = write(vault, "twins/b.md", note)
    others = [write(vault, f"x/{i}.md", f"Filler {i}.\n") for i in range(3)]
    report = engine.indexer.sync_batches([[a, *others], [b]])
    assert [p["path"] for p in report.problems] == [b]
    assert "duplicate id 'shared-id': twins/a.md has it too" in report.problems[0]["problem"]
    assert engine.get_memories(["shared-id"])["memories"][0]["path"] == a


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_batch_is_written_and_reported_in_order(opened: tuple[Engine, Gated, Path], count: int) -> None:
    """However many batches there are, each is written, and ``done`` hears of each in order, once:
    the last ones too, which no later batch pushes out of those read ahead."""
    engine, _, vault = opened
    batches = [
        [write(vault, f"many{k}/n{i}.md", f"# M{k} {i}\n\nBatch {k} of many, note {i}.\n") for i in range(k % 3 + 1)]
        for k in range(count)
    ]
    done: list[int] = []
    report = engine.indexer.sync_batches(batches, done.append)
    sizes = [len(b) for b in batches]
    assert done == [sum(sizes[: k + 1]) for k in range(count)]
    assert report.indexed == sum(sizes)
    written = [p for b in batches for p in b]
    assert all(engine.catalog.chunk_ids(p) for p in written)
    assert {c for p in written for c in engine.catalog.chunk_ids(p)} <= engine.vectors.ids()


def test_closing_the_index_mid_way_stops_between_batches(opened: tuple[Engine, Gated, Path]) -> None:
    engine, embedder, vault = opened
    batches = [
        [write(vault, f"batch{k}/n{i}.md", f"# B{k} {i}\n\nBatch {k} note {i}.\n") for i in range(3)] for k in range(4)
    ]
    closer = threading.Thread(target=engine.indexer.close)

    def close_now() -> None:  # while batch 1 is embedded
        closer.start()
        for _ in range(1000):
            if engine.indexer.closed:
                return
            time.sleep(0.01)

    embedder.on_text["Batch 1 note"] = close_now
    with pytest.raises(IndexUnavailableError):
        engine.indexer.sync_batches(batches)
    closer.join(timeout=10)
    assert not closer.is_alive()
    indexed = {p for p in engine.catalog.files() if p.startswith("batch")}
    assert indexed in (set(), set(batches[0]))  # batch 0 whole or not at all; nothing after it
    vectors = engine.vectors.ids()
    assert {cid for p in indexed for cid in engine.catalog.chunk_ids(p)} <= vectors
    assert vectors <= engine.catalog.all_chunk_ids()  # no vector of a batch it did not write
