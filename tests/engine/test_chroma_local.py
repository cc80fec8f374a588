"""The embedded Chroma without the chromadb package (spellbook/startup/chroma_local.py), checked
against chromadb's own PersistentClient on the same folders: what one writes the other reads, the
collection is made with the configuration chromadb would give it, and queries agree."""

from __future__ import annotations

from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from spellbook.startup.chroma_local import COSINE, LocalChroma


def _chromadb(folder: Path):
    return chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False, allow_reset=True))


def _rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_collection_configuration_is_the_one_chromadb_makes() -> None:
    from chromadb.api.collection_configuration import create_collection_configuration_to_json_str

    assert COSINE == create_collection_configuration_to_json_str({"hnsw": {"space": "cosine"}}, None)


def test_what_local_chroma_writes_chromadb_reads(tmp_path: Path) -> None:
    ids, rows = [f"n{i}:0" for i in range(40)], _rows(40, 1)
    local = LocalChroma(tmp_path)
    collection = local.get_or_create_collection(
        "spellbook", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    collection.upsert(ids=ids, embeddings=rows)
    collection.delete(ids=ids[:5])
    collection.upsert(ids=ids[5:6], embeddings=rows[6:7])  # replaced
    mine = collection.query(query_embeddings=[rows[10]], n_results=4, include=["distances"])
    collection_id, count = collection.id, collection.count()
    local.close()

    client = _chromadb(tmp_path)
    theirs = client.get_collection("spellbook")
    got = theirs.get(include=["embeddings", "metadatas"])
    stored = dict(zip(got["ids"], got["embeddings"], strict=True))
    assert str(theirs.id) == collection_id and theirs.count() == count == 35
    assert theirs.configuration_json["hnsw"]["space"] == "cosine"
    assert sorted(stored) == sorted(ids[5:]) and all(meta is None for meta in got["metadatas"])
    assert np.allclose(stored[ids[5]], rows[6]) and np.allclose(stored[ids[20]], rows[20])
    query = theirs.query(query_embeddings=[rows[10]], n_results=4, include=["distances"])
    assert mine["ids"] == query["ids"] and mine["ids"][0][0] == ids[10]
    assert np.allclose(mine["distances"], query["distances"], atol=1e-6)
    client.close()


def test_what_chromadb_writes_local_chroma_reads(tmp_path: Path) -> None:
    ids, rows = [f"m{i}:0" for i in range(30)], _rows(30, 2)
    client = _chromadb(tmp_path)
    made = client.get_or_create_collection(
        "spellbook", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    made.upsert(ids=ids, embeddings=rows)
    made_id = str(made.id)
    client.close()

    local = LocalChroma(tmp_path)
    collection = local.get_or_create_collection("spellbook")  # the one there, not a second
    assert collection.id == made_id and collection.count() == 30
    page = collection.get(include=["embeddings"], limit=10, offset=20)
    assert page["ids"] == ids[20:30] and np.allclose(np.asarray(page["embeddings"]), rows[20:30])
    assert collection.get(ids=["m3:0", "nope"], include=[])["ids"] == ["m3:0"]
    local.delete_collection("spellbook")
    assert local.get_or_create_collection("spellbook").count() == 0
    local.close()


def test_bad_calls_say_what_was_wrong(tmp_path: Path) -> None:
    local = LocalChroma(tmp_path)
    collection = local.get_or_create_collection("spellbook")
    with pytest.raises(ValueError, match="expected 2 vectors"):
        collection.upsert(ids=["a", "b"], embeddings=_rows(3, 3))
    with pytest.raises(ValueError, match="cosine collections"):
        local.get_or_create_collection("other", configuration={"hnsw": {"space": "l2"}})
    local.close()
    with pytest.raises(RuntimeError, match="closed"):
        collection.count()
