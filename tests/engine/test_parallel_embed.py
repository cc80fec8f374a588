"""A large batch (a first index, an import) is embedded on the embedder's ``parallel`` threads
(spellbook/index/embedding.py): the vectors are those of one thread, in order; a text the
model refuses is still blamed on its own; the default model says how many threads it may use; a
command that embeds loads the model while the index opens."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.errors import EmbedderInputError
from spellbook.index import embedding
from spellbook.index.embedding import PART_MIN, split
from tests.helpers.engine import open_engine

TEXTS = {
    "en": "The canary release rolls back when the error rate doubles within ten minutes.",
    "ko": "배포 파이프라인이 실패하면 롤백 스크립트를 실행하고 담당자에게 알린다.",
    "ja": "東京の倉庫では毎週月曜日に在庫を数え、足りない部品を発注する。",
}


class ThreadNoting(HashingEmbedder):
    """The hashing embedder, noting which thread embedded each text; refuses texts with 'REFUSE'."""

    parallel = 2
    forks = False  # threads of this process, which it notes (child processes: test_lanes.py)

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[str, str] = {}
        self.calls: list[int] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts):
        if any("REFUSE" in t for t in texts):
            raise EmbedderInputError("the model refuses this text")
        time.sleep(0.02)  # a model takes a while: the parts of a batch overlap
        with self._lock:
            self.calls.append(len(texts))
            self.threads.update((t, threading.current_thread().name) for t in texts)
        return super().embed_documents(texts)


def test_parts_keep_the_order_and_split_only_what_is_large_enough() -> None:
    texts = [f"text {i} " + "x" * (i * 7 % 300) for i in range(200)]
    for parallel in (1, 2, 3, 4):
        parts = split(texts, parallel)
        assert [t for part in parts for t in part] == texts
        assert len(parts) == parallel
        sizes = [sum(map(len, part)) for part in parts]
        assert max(sizes) < 1.5 * min(sizes), sizes  # about equal characters each
    assert split(texts[: 2 * PART_MIN - 1], 2) == [texts[: 2 * PART_MIN - 1]]  # too few to split
    assert len(split(texts[: 2 * PART_MIN], 4)) == 2
    assert split([], 2) == [[]]


def test_a_first_index_embeds_on_two_threads_and_blames_a_refused_text_alone(settings: Settings) -> None:
    vault = settings.vault_dir
    for i in range(80):
        marker = " REFUSE" if i == 57 else ""
        (vault / f"note {i:02d}.md").write_text(f"# Note {i}\n\n{TEXTS['en']} Number {i}.{marker}\n", encoding="utf-8")
    embedder = ThreadNoting()
    engine = open_engine(settings, embedder)
    try:
        names = set(embedder.threads.values())
        assert any(n.startswith("spellbook-embed") for n in names) and len(names) == 2, names
        refused = set(engine.catalog.chunk_ids("note 57.md"))
        assert engine.indexer.missing == refused  # note 57 only: the others of its part have vectors
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() - refused
        path = "note 12.md"
        (chunk_id,) = engine.catalog.chunk_ids(path)
        text = next(t for t in embedder.threads if t.startswith("note 12\nNote 12\n"))
        assert engine.vectors.vectors([chunk_id])[chunk_id] == pytest.approx(
            HashingEmbedder().embed_documents([text])[0]
        )
    finally:
        engine.close()


@pytest.mark.slow
def test_the_default_model_gives_the_same_vectors_on_two_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """use-m3 on two threads at once (process-wide BLAS cap, shared table rows): each vector equals
    the one a single thread makes, for English, Korean and Japanese, and an import uses both."""
    from spellbook.embedders.use import USEEmbedder

    texts = [f"{TEXTS[lang]} ({i})" for i in range(40) for lang in ("en", "ko", "ja")]
    one = USEEmbedder(cache_dir=tmp_path / "cache", parallel=1)
    expected = np.asarray(one.embed_documents(texts), dtype=np.float32)
    two = USEEmbedder(cache_dir=tmp_path / "cache", parallel=2)
    assert two.parallel == 2

    results: dict[int, np.ndarray] = {}

    def embed(k: int) -> None:
        results[k] = np.asarray(two.embed_documents(texts[k::2]), dtype=np.float32)

    for _ in range(3):  # two threads in the model at once, the table filling from both
        threads = [threading.Thread(target=embed, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        np.testing.assert_allclose(results[0], expected[0::2], atol=1e-6)
        np.testing.assert_allclose(results[1], expected[1::2], atol=1e-6)

    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    memories = [
        {
            "id": f"m{i:03d}",
            "path": f"imported/m{i:03d}.md",
            "title": f"Memory {i}",
            "metadata": {"id": f"m{i:03d}", "title": f"Memory {i}", "category": "imported"},
            "body": text,
        }
        for i, text in enumerate(texts)
    ]
    export.write_text(
        json.dumps({"spellbook_export": 1, "count": len(memories), "memories": memories}), encoding="utf-8"
    )
    # Threads in this process (child processes: test_lanes.py), so the calls are seen here.
    monkeypatch.setattr(embedding, "PROCESSES", False)
    engine = open_engine(Settings(vault=vault, embedder="use-m3", watch=False), two)
    try:
        seen: set[str] = set()
        inner = two.embed_documents

        def noting(batch):
            seen.add(threading.current_thread().name)
            return inner(batch)

        two.embed_documents = noting
        out = engine.import_memories(str(export))
        assert out["counts"]["created"] == len(texts)
        assert any(n.startswith("spellbook-embed") for n in seen), seen
        (chunk_id,) = engine.catalog.chunk_ids("imported/m007.md")
        stored = np.asarray(engine.vectors.vectors([chunk_id])[chunk_id], dtype=np.float32)
        alone = np.asarray(one.embed_documents([f"Memory 7\n{texts[7]}"])[0], dtype=np.float32)
        np.testing.assert_allclose(stored, alone, atol=1e-6)
        hits = engine.memorize("倉庫の在庫を数える", limit=3)["results"]
        assert hits and all(h["category"] == "imported" for h in hits)
    finally:
        engine.close()


class SlowLoading(HashingEmbedder):
    """The hashing embedder with a model that takes a while to load (or fails to)."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.loaded_on: list[str] = []
        self.loading = threading.Event()
        self.release = threading.Event()

    def warm_up(self) -> None:
        self.loading.set()
        self.release.wait(10)
        self.loaded_on.append(threading.current_thread().name)
        if self.fail:
            raise OSError("the weights file is unreadable")


def test_a_command_that_embeds_loads_the_model_while_the_index_opens(settings: Settings) -> None:
    embedder = SlowLoading()
    engine = Engine(settings, embedder=embedder, load_model=True)
    try:
        assert embedder.loading.wait(5)  # started as the engine opened, not at the first text
        assert embedder.loaded_on == []  # ...and the engine did not wait for it
        closing = threading.Thread(target=engine.close)
        closing.start()
        closing.join(0.3)
        assert closing.is_alive()  # close waits for the load under way
        embedder.release.set()
        closing.join(5)
        assert not closing.is_alive() and embedder.loaded_on == ["spellbook-load"]
    finally:
        embedder.release.set()
        engine.close()

    quiet = SlowLoading()
    Engine(settings, embedder=quiet).close()  # a command that may embed nothing: no load
    assert not quiet.loading.is_set()


def test_a_model_that_fails_to_load_ahead_fails_where_it_is_used(settings: Settings) -> None:
    (settings.vault_dir / "note.md").write_text("# Note\n\nThe canary release rolls back.\n", encoding="utf-8")
    embedder = SlowLoading(fail=True)
    embedder.release.set()
    engine = Engine(settings, embedder=embedder, load_model=True)
    try:
        engine.start()
        assert embedder.loaded_on == ["spellbook-load"]
        assert engine.stats()["vectors"] == 1  # the load's error was not the engine's
    finally:
        engine.close()


@pytest.mark.parametrize("command", ["import", "index"])
def test_the_cli_loads_the_model_ahead_only_when_it_will_embed(tmp_path: Path, monkeypatch, command: str) -> None:
    from spellbook.cli.main import main
    from spellbook.server import hub as hub_module

    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"spellbook_export": 1, "count": 0, "memories": []}), encoding="utf-8")
    asked: list[bool] = []
    real = hub_module.Hub.__init__

    def noting(self, *args, **kwargs):
        asked.append(kwargs.get("load_model", False))
        real(self, *args, **kwargs)

    monkeypatch.setattr(hub_module.Hub, "__init__", noting)
    base = ["--vault", str(vault), "--embedder", "hashing"]
    if command == "import":
        runs = [[*base, str(export)], [*base, "--dry-run", str(export)]]
        expected = [True, False]
    else:
        runs = [base, base, [*base, "--rebuild"]]
        expected = [True, False, True]  # the first index and a rebuild embed everything; a rerun what changed
    for extra in runs:
        assert main([command, *extra]) == 0
    assert asked == expected


class Slow(HashingEmbedder):
    """The hashing embedder, taking a while a call and noting each text and the thread that embedded it."""

    def __init__(self, seconds: float = 0.05) -> None:
        super().__init__()
        self.seconds = seconds
        self.embedded: list[tuple[str, str]] = []

    def embed_documents(self, texts):
        time.sleep(self.seconds)
        self.embedded.extend((t, threading.current_thread().name) for t in texts)
        return super().embed_documents(texts)


def test_a_tools_write_embeds_while_the_file_is_written_and_only_once(settings: Settings, vault: Path) -> None:
    """scribe and revise start their new sections' vectors before writing the file (``Indexer.expect``):
    the model runs on its own thread while the file is written, synced and read back, and the sync
    takes those vectors instead of embedding again. A section left as it was is not embedded again."""
    model = Slow()
    engine = open_engine(settings, model)
    try:
        out = engine.scribe("## One\nThe first part.\n\n## Two\nThe second part.", title="Parts", category="t")
        texts = [t for t, _ in model.embedded]
        assert len(texts) == 2 and len(set(texts)) == 2  # each section once
        assert {name for _, name in model.embedded} == {"spellbook-ahead_0"}
        ids = engine.catalog.chunk_ids(out["path"])
        assert set(engine.vectors.vectors(ids)) == set(ids)
        stored = engine.vectors.vectors(ids)
        assert np.allclose([stored[i] for i in ids], HashingEmbedder().embed_documents(texts), atol=1e-6)
        model.embedded.clear()
        engine.revise(out["id"], text="## One\nThe first part.\n\n## Two\nThe second part, changed.")
        assert [t.rsplit("\n", 1)[-1] for t, _ in model.embedded] == ["The second part, changed."]
        assert engine.indexer.batches._ahead == {}  # taken, nothing left behind
    finally:
        engine.close()


def test_vectors_started_ahead_of_a_write_that_changed_on_the_way_are_not_used(settings: Settings) -> None:
    """What the sync embeds is the file as it reads it: texts started ahead that the file does not
    hold are not taken (and are dropped once enough newer ones came), the file's own are embedded."""
    model = Slow(0.01)
    engine = open_engine(settings, model)
    try:
        vault = engine.vault
        engine.indexer.expect("t/a.md", "---\ntitle: A\n---\nWhat the tool meant to write.\n")
        (vault.root / "t").mkdir()
        (vault.root / "t" / "a.md").write_text("---\ntitle: A\n---\nWhat a person wrote first.\n", encoding="utf-8")
        engine.indexer.sync_path("t/a.md")
        hits = engine.memorize("person wrote first", mode="semantic")["results"]
        assert hits and hits[0]["path"] == "t/a.md"
        ids = engine.catalog.chunk_ids("t/a.md")
        (expected,) = HashingEmbedder().embed_documents(["A\nWhat a person wrote first."])
        assert np.allclose(engine.vectors.vectors(ids)[ids[0]], expected, atol=1e-6)
        for n in range(70):
            engine.indexer.batches.ahead([f"text {n}"])
        assert len(engine.indexer.batches._ahead) == 64
    finally:
        engine.close()


def test_closing_with_vectors_started_ahead_waits_for_none_of_them(settings: Settings) -> None:
    model = Slow(0.3)
    engine = open_engine(settings, model)
    for n in range(5):
        engine.indexer.batches.ahead([f"text {n}"])
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < 1.0  # the one under way finishes; the rest are dropped
    engine.indexer.batches.ahead(["after close"])  # nothing starts once closed
    assert engine.indexer.batches._ahead == {}
