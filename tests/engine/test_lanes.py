"""A first index or an import embeds its large parts in child processes forked with the model
(spellbook/embedders/lanes.py): the vectors are those of this process, the children keep nothing
they inherited, exit at the end of the job (or when this process dies), and a child that fails or
hangs costs only the time to notice: its texts are embedded here instead."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from spellbook.config import Settings
from spellbook.embedders import lanes as lanes_module
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.errors import EmbedderInputError
from spellbook.index import embedding
from spellbook.index.analysis import embed_text
from spellbook.index.embedding import BatchEmbedder
from tests.helpers.engine import open_engine
from tests.helpers.processes import alive, children_named

pytestmark = pytest.mark.skipif(not lanes_module.can_fork(), reason="child processes are forked on Linux only")

TEXT = "The canary release rolls back when the error rate doubles within ten minutes."


class Noting(HashingEmbedder):
    """The hashing embedder on two parts at once, writing a line for each call to ``log`` (the
    process and what it was asked): calls made in a child show up there too. ``kill`` / ``hang`` /
    ``refuse``: texts holding that word make a child die, hang or refuse them."""

    parallel = 2

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    def embed_documents(self, texts):
        child = os.getpid() != PARENT
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "texts": len(texts),
                        "fds": _fds() if child else [],
                        "marked": [w for w in ("KILL", "HANG", "REFUSE") if any(w in t for t in texts)],
                        "signals": _signals() if child else {},
                    }
                )
                + "\n"
            )
        if child and any("KILL" in t for t in texts):
            os.kill(os.getpid(), signal.SIGKILL)
        if child and any("HANG" in t for t in texts):
            time.sleep(3600)
        if child and any("SLOW" in t for t in texts):
            time.sleep(0.5)
        if any("REFUSE" in t for t in texts):
            raise EmbedderInputError("the model refuses this text")
        return super().embed_documents(texts)

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


PARENT = os.getpid()


def _fds() -> dict[str, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def _signals() -> dict[str, object]:
    wakeup = signal.set_wakeup_fd(-1)  # called in the child's main thread: the one that forked it
    return {"wakeup": wakeup, **{name: str(signal.getsignal(getattr(signal, name))) for name in ("SIGINT", "SIGTERM")}}


def _notes(vault: Path, count: int, marker: dict[int, str] | None = None) -> None:
    for i in range(count):
        extra = f" {marker[i]}" if marker and i in marker else ""
        (vault / f"note {i:03d}.md").write_text(f"# Note {i}\n\n{TEXT} Number {i}.{extra}\n", encoding="utf-8")


def test_a_first_index_embeds_in_two_child_processes_and_they_exit_with_the_job(
    settings: Settings, tmp_path: Path
) -> None:
    _notes(settings.vault_dir, 150)
    embedder = Noting(tmp_path / "calls.jsonl")
    engine = open_engine(settings, embedder)
    try:
        calls = embedder.calls()
        children = {c["pid"] for c in calls if c["pid"] != PARENT}
        assert len(children) == 2, calls  # the parts of each large batch, in two children
        assert sum(c["texts"] for c in calls if c["pid"] in children) > 100
        assert not any(alive(pid) for pid in children)  # gone with the first index, reaped
        assert engine.indexer.batches.lane_pids() == []
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() and not engine.indexer.missing
        for path in ("note 000.md", "note 077.md", "note 149.md"):
            (chunk_id,) = engine.catalog.chunk_ids(path)
            row = engine.catalog.chunks([chunk_id])[chunk_id]
            text = embed_text(engine.catalog.note_at(path).title, row.heading, row.text)
            expected = HashingEmbedder().embed_documents([text])[0]
            assert engine.vectors.vectors([chunk_id])[chunk_id] == pytest.approx(expected, abs=1e-6)
    finally:
        engine.close()


def test_a_child_keeps_only_its_socket_and_the_null_device(settings: Settings, tmp_path: Path) -> None:
    _notes(settings.vault_dir, 40)
    embedder = Noting(tmp_path / "calls.jsonl")
    engine = open_engine(settings, embedder)  # holds the owner's files: catalog, Chroma, the log file...
    try:
        child = next(c for c in embedder.calls() if c["pid"] != PARENT)
        fds = child["fds"]
        assert {fd for fd in ("0", "1", "2")} <= fds.keys() and all(fds[fd] == os.devnull for fd in ("0", "1", "2"))
        assert fds["3"].startswith("socket:")
        others = {fd: target for fd, target in fds.items() if fd not in ("0", "1", "2", "3")}
        # what is left: the call log this embedder opened, and listdir's own descriptor
        assert all(
            target == str(tmp_path / "calls.jsonl") or target.startswith("/proc/") for target in others.values()
        ), fds
    finally:
        engine.close()


def test_a_child_drops_the_parents_signal_handlers(settings: Settings, tmp_path: Path) -> None:
    """A server's event loop has a SIGTERM handler and a wakeup descriptor (uvicorn's, asyncio's): a
    child must not run the one nor write to the other, whose number may now be its socket's."""
    _notes(settings.vault_dir, 40)
    read, write = os.pipe()
    os.set_blocking(write, False)
    before = signal.signal(signal.SIGTERM, lambda *_: None)
    old_wakeup = signal.set_wakeup_fd(write)
    try:
        embedder = Noting(tmp_path / "calls.jsonl")
        engine = open_engine(settings, embedder)
        engine.close()
    finally:
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGTERM, before)
        os.close(read)
        os.close(write)
    child = next(c for c in embedder.calls() if c["pid"] != PARENT)
    assert child["signals"] == {"wakeup": -1, "SIGINT": str(signal.SIG_IGN), "SIGTERM": str(signal.SIG_DFL)}


def test_a_refused_text_is_blamed_alone(settings: Settings, tmp_path: Path) -> None:
    _notes(settings.vault_dir, 80, {57: "REFUSE"})
    embedder = Noting(tmp_path / "calls.jsonl")
    engine = open_engine(settings, embedder)
    try:
        refused = set(engine.catalog.chunk_ids("note 057.md"))
        assert engine.indexer.missing == refused
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() - refused
        assert any(c["pid"] != PARENT for c in embedder.calls())
    finally:
        engine.close()


@pytest.mark.parametrize("failure", ["KILL", "HANG"])
def test_a_child_that_dies_or_hangs_costs_only_time(
    settings: Settings, tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    monkeypatch.setattr(lanes_module, "DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(lanes_module, "PER_TEXT_SECONDS", 0.0)
    _notes(settings.vault_dir, 150, {90: failure})
    embedder = Noting(tmp_path / "calls.jsonl")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="spellbook.embedders.lanes"):
        engine = open_engine(settings, embedder)
    try:
        assert time.monotonic() - started < 30
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() and not engine.indexer.missing
        assert len(engine.catalog.all_chunk_ids()) == 150
        warned = [r.getMessage() for r in caplog.records if "child process" in r.getMessage()]
        assert len(warned) == 1, warned  # once for the job, then embedded here
        assert ("signal 9" in warned[0]) if failure == "KILL" else ("did not answer in time" in warned[0])
        assert any(c["pid"] == PARENT and failure in c["marked"] and c["texts"] >= 16 for c in embedder.calls())
        children = {c["pid"] for c in embedder.calls() if c["pid"] != PARENT}
        assert children and not any(alive(pid) for pid in children)  # the hung one was killed
    finally:
        engine.close()


def test_a_fork_that_fails_leaves_the_job_to_this_process(
    settings: Settings, tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(lanes_module.os, "fork", no_fork)
    _notes(settings.vault_dir, 150)
    embedder = Noting(tmp_path / "calls.jsonl")
    with caplog.at_level(logging.WARNING, logger="spellbook.embedders.lanes"):
        engine = open_engine(settings, embedder)
    try:
        assert {c["pid"] for c in embedder.calls()} == {PARENT}
        assert engine.vectors.ids() == engine.catalog.all_chunk_ids() and len(engine.vectors.ids()) == 150
        warned = [r.getMessage() for r in caplog.records if "could not start" in r.getMessage()]
        assert len(warned) == 1 and "could not fork" in warned[0], warned  # tried once for the job
    finally:
        engine.close()


def test_no_child_processes_when_switched_off_or_for_small_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for processes, count in ((False, 150), (True, 10)):
        monkeypatch.setattr(embedding, "PROCESSES", processes)
        vault = tmp_path / f"vault-{processes}"
        vault.mkdir()
        _notes(vault, count)
        embedder = Noting(tmp_path / f"calls-{processes}.jsonl")
        engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False), embedder)
        try:
            assert {c["pid"] for c in embedder.calls()} == {PARENT}
            assert len(engine.vectors.ids()) == count
        finally:
            engine.close()


def test_a_small_part_of_a_bulk_job_goes_to_the_children_once_forked(tmp_path: Path) -> None:
    """The last part of a batch cut by characters, or a batch whose other texts reuse vectors, can
    be under PART_MIN texts: once the job has children it goes to one (here it would wait for the
    GIL the importer holds); a job that small from the start forks none, and a tool's few texts
    during the job stay here."""
    embedder = Noting(tmp_path / "calls.jsonl")
    batches = BatchEmbedder(embedder)
    few = [f"{TEXT} few {i}" for i in range(5)]
    with batches.bulk():
        assert len(batches.start(few)()) == 5  # nothing forked for it
        assert batches.lane_pids() == []
        many = [f"{TEXT} {i}" for i in range(64)]
        batches.start(many)()
        pids = set(batches.lane_pids())
        assert len(pids) == 2
        more = [f"{TEXT} more {i}" for i in range(7)]
        got = batches.start(more)()
        tool = [f"{TEXT} scribed {i}" for i in range(3)]
        batches.embed(tool)
    calls = embedder.calls()
    assert [c["pid"] for c in calls if c["texts"] == 5] == [PARENT]
    assert next(c["pid"] for c in calls if c["texts"] == 7) in pids  # one call: a child answered it
    assert [c["pid"] for c in calls if c["texts"] == 3] == [PARENT]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(HashingEmbedder().embed_documents(more)))


def test_close_waits_for_the_parts_under_way_then_the_children_exit(tmp_path: Path) -> None:
    embedder = Noting(tmp_path / "calls.jsonl")
    batches = BatchEmbedder(embedder)
    texts = [f"{TEXT} {i} SLOW" for i in range(64)]  # each child takes 0.5 s over its part
    with batches.bulk():
        wait = batches.start(texts)
        deadline = time.monotonic() + 10
        while len(batches.lane_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        pids = batches.lane_pids()
        assert len(pids) == 2
        closing = threading.Thread(target=batches.close)
        closing.start()
        closing.join(0.2)
        assert closing.is_alive()  # the children are still at their parts
        vectors = wait()
        closing.join(10)
    assert not closing.is_alive()
    np.testing.assert_allclose(np.asarray(vectors), np.asarray(HashingEmbedder().embed_documents(texts)), atol=1e-9)
    assert {c["pid"] for c in embedder.calls()} == set(pids)  # both parts answered by the children
    assert not any(alive(pid) for pid in pids)


def test_nothing_is_forked_once_closing_began(tmp_path: Path) -> None:
    """A part that started before the engine closed, and reaches the model after, is embedded here:
    no child process is made while the server shuts down."""
    embedder = Noting(tmp_path / "calls.jsonl")
    batches = BatchEmbedder(embedder)
    texts = [f"{TEXT} {i}" for i in range(64)]
    with batches.bulk():
        batches.close()
        got = batches.embed(texts)
        assert batches.lane_pids() == []
    assert {c["pid"] for c in embedder.calls()} == {PARENT}
    np.testing.assert_array_equal(np.asarray(got), np.asarray(HashingEmbedder().embed_documents(texts)))


def test_any_text_crosses_to_a_child_and_back_as_it_is(tmp_path: Path) -> None:
    texts = ["", "배포 파이프라인", "東京の倉庫 📦", 'quote " back\\slash \n new line', "\x00 nul", "a" * 20_000] * 6
    batches = BatchEmbedder(Noting(tmp_path / "calls.jsonl"))
    with batches.bulk():
        got = batches.start(texts)()
        assert batches.lane_pids()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(HashingEmbedder().embed_documents(texts)))


class Thirds(HashingEmbedder):
    """A model that gives float32 vectors, as use-m3 does (``embed_array``): a third of the hashing
    embedder's, which float32 rounds."""

    parallel = 2

    def embed_array(self, texts):
        return np.asarray(super().embed_documents(texts), dtype=np.float32) / np.float32(3)

    def embed_documents(self, texts):
        return self.embed_array(texts).tolist()


def test_a_child_sends_the_models_own_float32_vectors_and_this_process_gets_its_floats(monkeypatch) -> None:
    """A model's float32 array crosses as it is (half the bytes, no lists of floats made in the
    child); a model without one sends its lists as float64. Either way this process gets the floats
    ``embed_documents`` gives here."""
    answers = []
    receive = lanes_module._recv

    def noted(sock, deadline):
        head, data = receive(sock, deadline)
        if isinstance(head, dict):  # an answer (a child reads its texts here too)
            answers.append((head.get("dtype"), len(data), head.get("rows", 0) * head.get("dim", 0)))
        return head, data

    monkeypatch.setattr(lanes_module, "_recv", noted)
    texts = [f"{TEXT} ({i})" for i in range(48)]
    for model, dtype, size in ((Thirds(), "<f4", 4), (HashingEmbedder(parallel=2), "<f8", 8)):
        answers.clear()
        batches = BatchEmbedder(model)
        with batches.bulk():
            got = batches.start(texts)()
            assert batches.lane_pids()
        assert got == model.embed_documents(texts)
        assert answers and all(a == (dtype, cells * size, cells) for a in answers for cells in [a[2]]), answers


@pytest.mark.slow
def test_the_default_model_in_child_processes_gives_this_process_vectors(tmp_path: Path) -> None:
    from spellbook.embedders.use import USEEmbedder

    langs = [
        "The canary release rolls back when the error rate doubles.",
        "배포 파이프라인이 실패하면 롤백 스크립트를 실행한다.",
        "東京の倉庫では毎週月曜日に在庫を数える。",
    ]
    texts = [f"{langs[i % 3]} ({i})" for i in range(96)]
    alone = np.asarray(USEEmbedder(cache_dir=tmp_path / "cache", parallel=1).embed_documents(texts), dtype=np.float32)
    two = USEEmbedder(cache_dir=tmp_path / "cache", parallel=2)
    batches = BatchEmbedder(two)
    assert batches.processes
    with batches.bulk():
        got = batches.start(texts)()
        assert len(batches.lane_pids()) == 2
    np.testing.assert_allclose(np.asarray(got, dtype=np.float32), alone, atol=1e-6)
    assert batches.lane_pids() == []


@pytest.mark.slow
def test_the_children_die_with_a_killed_import(tmp_path: Path) -> None:
    """``spellbook import`` killed with SIGKILL mid-import: its children read end-of-file and exit."""
    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    memories = [
        {
            "id": f"m{i:04d}",
            "path": f"imported/m{i:04d}.md",
            "title": f"Memory {i}",
            "metadata": {"id": f"m{i:04d}", "title": f"Memory {i}"},
            "body": f"{TEXT} Number {i}. " * 8,
        }
        for i in range(3000)
    ]
    export.write_text(
        json.dumps({"spellbook_export": 1, "count": len(memories), "memories": memories}), encoding="utf-8"
    )
    spellbook = str(Path(sys.executable).with_name("spellbook"))
    proc = subprocess.Popen(
        [spellbook, "import", "--vault", str(vault), str(export)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SPELLBOOK_CACHE_DIR": str(tmp_path / "cache")},
    )
    try:
        deadline = time.monotonic() + 120
        children: list[int] = []
        while len(children) < 2 and time.monotonic() < deadline and proc.poll() is None:
            children = children_named(proc.pid, "spellbook-embed")
            time.sleep(0.05)
        assert len(children) == 2, "the import never embedded in two child processes"
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(alive(pid) for pid in children)
    finally:
        if proc.poll() is None:
            proc.kill()
