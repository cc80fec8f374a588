"""The vectors saved beside an embedded Chroma (spellbook/index/snapshot.py): a restart reads them
from the file instead of Chroma, and the file is never trusted when it is not Chroma's now (a change
after it, a crash after that change, a writer that does not know the file, a damaged file, a
deleted Chroma folder). Real Chroma in temporary folders; vectors are random."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from spellbook.index.chroma import SNAPSHOT_FILE, VectorIndex
from spellbook.index.snapshot import VectorSnapshot

DIMENSIONS = 16
ROOT = Path(__file__).resolve().parents[2]


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIMENSIONS)).astype(np.float32)


def _ids(n: int, start: int = 0) -> list[str]:
    return [f"c{i:05d}:0" for i in range(start, start + n)]


def _normalised(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _fill(folder: Path, n: int = 300) -> tuple[list[str], np.ndarray]:
    """An index of ``n`` vectors, closed after its matrix was read: the snapshot is saved."""
    ids, rows = _ids(n), _vectors(n, 1)
    index = VectorIndex.embedded(folder)
    index.upsert(ids, rows.tolist())
    index.matrix()
    index.close()
    return ids, rows


def _no_chroma_reads(monkeypatch) -> None:
    def refuse(self):
        raise AssertionError("read the vectors from Chroma, not from the snapshot")

    monkeypatch.setattr(VectorIndex, "_chroma_matrix", refuse)


def _chroma_vectors(folder: Path) -> dict[str, np.ndarray]:
    """What Chroma holds, read with chromadb itself."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    got = client.get_collection("spellbook").get(include=["embeddings"])
    out = {cid: np.asarray(v, dtype=np.float32) for cid, v in zip(got["ids"], got["embeddings"])}
    client.close()
    return out


def test_a_restart_reads_every_vector_from_the_snapshot(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "chroma"
    ids, rows = _fill(folder)
    assert (tmp_path / SNAPSHOT_FILE).is_file()
    _no_chroma_reads(monkeypatch)
    index = VectorIndex.embedded(folder)
    try:
        assert index.ids() == set(ids)  # from the snapshot as well
        matrix = index.matrix()
        got = matrix.get(ids)
        assert np.allclose(np.asarray([got[i] for i in ids]), _normalised(rows), atol=1e-6)
        query = rows[7] + 0.01
        assert index.query(query.tolist(), 3)[0][0] == ids[7]
    finally:
        index.close()


def test_a_change_deletes_the_snapshot_first_and_a_crash_after_it_leaves_none(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    ids, _ = _fill(folder)
    # another process loads from the snapshot, writes one vector, and dies without closing
    code = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from spellbook.index.chroma import VectorIndex
        index = VectorIndex.embedded(Path({str(folder)!r}))
        index.matrix()
        assert index._keeper.current is True
        index.upsert(["new:0"], [[1.0] + [0.0] * {DIMENSIONS - 1}])
        os._exit(0 if not Path({str(tmp_path / SNAPSHOT_FILE)!r}).exists() else 3)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / SNAPSHOT_FILE).exists()
    index = VectorIndex.embedded(folder)
    try:
        assert index.matrix().ids() == set(ids) | {"new:0"} == index.ids()
    finally:
        index.close()


def test_a_writer_that_does_not_know_the_snapshot_makes_it_stale(tmp_path: Path) -> None:
    """An older Spellbook (or anything else) writes to Chroma and leaves the file: its stamp no
    longer matches Chroma's write log, so the vectors are read from Chroma."""
    import chromadb
    from chromadb.config import Settings

    folder = tmp_path / "chroma"
    ids, rows = _fill(folder)
    client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    changed = _vectors(1, 9)[0]
    client.get_collection("spellbook").upsert(ids=[ids[0]], embeddings=[changed.tolist()])
    client.close()
    assert (tmp_path / SNAPSHOT_FILE).is_file()
    index = VectorIndex.embedded(folder)
    try:
        got = index.matrix().get([ids[0], ids[1]])
        assert np.allclose(got[ids[0]], changed / np.linalg.norm(changed), atol=1e-6)
        assert np.allclose(got[ids[1]], _normalised(rows[1:2])[0], atol=1e-6)
        assert index._keeper.current is None  # the stale file stays until a change or a save replaces it
    finally:
        index.close()
    snapshot = VectorSnapshot(tmp_path / SNAPSHOT_FILE, folder)  # the close saved Chroma as it is now
    assert index._keeper.current is True and snapshot.load(snapshot.stamp(index._collection_id)) is not None


@pytest.mark.parametrize("damage", ["truncated", "extra id", "bad head", "other magic", "empty", "huge count"])
def test_a_damaged_snapshot_is_passed_over(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "chroma"
    ids, rows = _fill(folder)
    file = tmp_path / SNAPSHOT_FILE
    data = file.read_bytes()
    magic, head, rest = data.split(b"\n", 2)
    data = {
        "truncated": data[: len(data) // 2],
        "extra id": data + b"c99999:0\n",
        "bad head": magic + b"\n{not json\n" + rest,
        "other magic": b"spellbook-vectors 99\n" + head + b"\n" + rest,
        "empty": b"",
        "huge count": magic + b"\n" + json.dumps({**json.loads(head), "count": 10**12}).encode() + b"\n" + rest,
    }[damage]
    file.write_bytes(data)
    index = VectorIndex.embedded(folder)
    try:
        got = index.matrix().get(ids)
        assert np.allclose(np.asarray([got[i] for i in ids]), _normalised(rows), atol=1e-6)
    finally:
        index.close()


def test_a_deleted_chroma_folder_is_not_masked_by_the_snapshot(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "chroma"
    _fill(folder)
    shutil.rmtree(folder)
    index = VectorIndex.embedded(folder)
    try:
        assert len(index.matrix()) == 0 and index.ids() == set()
    finally:
        index.close()


def test_whenever_the_snapshot_exists_it_is_exactly_chroma(tmp_path: Path, monkeypatch) -> None:
    """Vectors are put (behind the reply and waiting), replaced and removed on two threads taking
    turns (as the indexer's lock makes them), with the writer thread putting them in Chroma, while
    a third keeps saving the snapshot; whenever the file exists, with Chroma held still, it holds
    exactly Chroma's vectors under Chroma's stamp."""
    from spellbook.index import chroma

    monkeypatch.setattr(chroma, "QUIET_SECONDS", 0.002)  # the writer does not wait for more
    folder = tmp_path / "chroma"
    _fill(folder, 200)
    index = VectorIndex.embedded(folder)
    snapshot = VectorSnapshot(tmp_path / SNAPSHOT_FILE, folder)
    index.matrix()
    stop = threading.Event()
    turns = threading.Lock()
    errors: list[BaseException] = []

    def churn(seed: int, wait: bool) -> None:
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                chosen = [f"c{i:05d}:0" for i in rng.integers(0, 260, 5)]
                chosen = list(dict.fromkeys(chosen))
                with turns:
                    if rng.random() < 0.3:
                        index.delete(chosen)
                    else:
                        index.upsert(chosen, rng.standard_normal((len(chosen), DIMENSIONS)).tolist(), wait=wait)
                stop.wait(rng.random() * 0.02)  # now and then nothing is under way
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=churn, args=(1, False)), threading.Thread(target=churn, args=(2, True))]
    for worker in workers:
        worker.start()
    saved = checked = 0
    try:
        for _ in range(2000):
            stop.wait(0.005)
            if index.keep_snapshot():
                saved += 1
            with index._write_lock:  # Chroma holds still while we compare
                if not snapshot.file.exists():
                    continue
                loaded = snapshot.load(snapshot.stamp(index._collection_id))
                assert loaded is not None, "a snapshot on disk whose stamp is not Chroma's now"
                in_chroma = _chroma_vectors_open(index)
                file_ids, file_rows = loaded
                assert set(file_ids) == set(in_chroma)
                for cid, row in zip(file_ids, file_rows):
                    assert np.allclose(row, in_chroma[cid] / np.linalg.norm(in_chroma[cid]), atol=1e-5), cid
                checked += 1
            if saved >= 15 and checked >= 15:
                break
    finally:
        stop.set()
        for worker in workers:
            worker.join()
        index.close()
    assert not errors, errors
    assert saved >= 3 and checked >= 3, (saved, checked)


def _chroma_vectors_open(index: VectorIndex) -> dict[str, np.ndarray]:
    with index._chroma() as collection:
        got = collection.get(include=["embeddings"])
    return {cid: np.asarray(v, dtype=np.float32) for cid, v in zip(got["ids"], got["embeddings"])}


def test_the_snapshot_file_is_small_and_says_what_it_holds(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    ids, _ = _fill(folder, 100)
    assert (tmp_path / SNAPSHOT_FILE).stat().st_mode & 0o777 == 0o600  # vectors of every note: owner only
    data = (tmp_path / SNAPSHOT_FILE).read_bytes()
    magic, head, rest = data.split(b"\n", 2)
    head = json.loads(head)
    assert magic == b"spellbook-vectors 1" and head["count"] == 100 and head["dimensions"] == DIMENSIONS
    assert rest[100 * DIMENSIONS * 4 :].decode().split("\n")[:-1] == ids


def test_a_save_cut_short_leaves_no_temp_file_behind_the_next_one(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    _fill(folder, 50)
    left = tmp_path / f".{SNAPSHOT_FILE}.abc123.tmp"  # what a kill -9 in the middle of a save leaves
    left.write_bytes(b"\0" * 4096)
    index = VectorIndex.embedded(folder)
    try:
        index.upsert(["new:0"], [[1.0] * DIMENSIONS])
        index.matrix()
        assert index.keep_snapshot()
    finally:
        index.close()
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["chroma", SNAPSHOT_FILE]


def test_doctor_checks_what_chroma_holds_not_the_matrix(settings) -> None:
    """A vector lost from Chroma behind the owner's back (its matrix still has it) is found."""
    from tests.helpers.engine import open_engine

    engine = open_engine(settings)
    try:
        out = engine.scribe("Puffins nest in burrows on grassy cliffs.", title="Puffins", category="zoo")
        assert engine.vectors.flush(10) == 0 and engine.maintenance.check()["consistent"]
        lost = engine.catalog.chunk_ids(out["path"])
        engine.vectors.matrix()
        with engine.vectors._chroma() as collection:
            collection.delete(ids=lost)
        assert engine.vectors.ids() >= set(lost)  # the matrix, kept in step with what Spellbook wrote
        report = engine.maintenance.check()
        assert report["counts"]["vectors_missing"] == len(lost) and not report["consistent"]
        assert engine.maintenance.repair()["consistent"]
    finally:
        engine.close()


def test_the_count_comes_from_the_matrix_once_it_is_loaded(tmp_path: Path, monkeypatch) -> None:
    """``stats`` asks for the count: an embedded Chroma answers it by loading its whole graph, so it
    is the matrix's while the matrix holds what Chroma holds, and Chroma's while vectors are behind."""
    folder = tmp_path / "chroma"
    ids, _ = _fill(folder)
    index = VectorIndex.embedded(folder)
    try:
        index.matrix()
        from spellbook.startup.chroma_local import LocalCollection

        asked: list[int] = []
        real_count = LocalCollection.count
        monkeypatch.setattr(LocalCollection, "count", lambda self: asked.append(1) or real_count(self))
        assert index.count() == len(ids) and asked == []
        index.upsert(_ids(5, start=len(ids)), _vectors(5, 2).tolist(), wait=False)
        index.delete(ids[:3])
        assert index.count() == len(ids) + 5 - 3 and asked == []
        assert index.count() == len(index.ids(stored=True))  # what Chroma holds
        index._behind["late:0"] = np.ones(DIMENSIONS, dtype=np.float32)  # a write Chroma did not take yet
        monkeypatch.setattr(index, "flush", lambda timeout=None: 1)
        assert index.count() == len(ids) + 2 and asked == [1]  # Chroma's own count then
    finally:
        index._behind.clear()
        index.close()


def test_a_restart_leaves_chroma_closed_until_a_call_needs_it(tmp_path: Path, monkeypatch) -> None:
    """With a good snapshot, a start reads no vector from Chroma and does not open it (its bindings
    hold ~20 MB once loaded): ids, the matrix, queries and the count come from the snapshot. A
    write opens it; so does a rebuild's reset, which must drop what Chroma holds though nothing in
    this process opened it before."""
    import spellbook.index.chroma as chroma_module

    folder = tmp_path / "chroma"
    ids, rows = _fill(folder)
    opened: list[Path] = []
    real = chroma_module.embedded_client
    monkeypatch.setattr(chroma_module, "embedded_client", lambda path: opened.append(path) or real(path))
    _no_chroma_reads(monkeypatch)
    index = VectorIndex.embedded(folder)
    try:
        assert index.count() == len(ids) and opened == []  # stats, first thing after a start
        assert index.ids() == set(ids)
        assert index.query(rows[3].tolist(), 1)[0][0] == ids[3]
        assert index.rest(0) is False and opened == []
        index.upsert(["new:0"], _vectors(1, 3).tolist())
        assert opened == [folder] and set(_chroma_vectors(folder)) == set(ids) | {"new:0"}
    finally:
        index.close()
    index = VectorIndex.embedded(folder)
    try:
        index.reset()
        assert index.count() == 0 and index.ids() == set()
    finally:
        index.close()
    assert _chroma_vectors(folder) == {}
