"""An embedded Chroma through its Rust bindings alone, without the chromadb Python package.

``chromadb.PersistentClient`` is a Python layer over ``chromadb_rust_bindings.Bindings``: the
bindings hold the database (SQLite, the write log, the HNSW files) and do every read and write.
The layer adds validation, telemetry and pydantic models, and importing it costs, measured on this
2-core machine, 0.9-1.2 s of interpreter time (held under the GIL, so every other thread of a start
waits too) and 38 MB of resident memory; the bindings alone import in 0.04 s and 5 MB.
Spellbook uses six calls of one collection, so ``LocalChroma`` makes those calls itself, with the
arguments ``chromadb.api.rust.RustBindingsAPI`` passes for them (chromadb is pinned in
pyproject.toml, and another installed version turns this off: spellbook/startup/__init__.py;
tests/engine/test_chroma_local.py checks both ends against chromadb's own client).
The files on disk are Chroma's own, so a ``PersistentClient`` opens the same folder.

A Chroma server (``chroma_url``) still goes through chromadb's ``HttpClient``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

TENANT, DATABASE = "default_tenant", "default_database"  # chromadb.config.DEFAULT_TENANT / _DATABASE
# chromadb's create_collection_configuration_to_json_str({"hnsw": {"space": "cosine"}}, None):
COSINE = '{"hnsw": {"space": "cosine"}, "spann": null, "embedding_function": {"type": "legacy"}}'


class LocalChroma:
    """The client side: one ``Bindings`` for a folder; ``close`` lets go of it (and of the HNSW
    graphs it holds in memory)."""

    def __init__(self, folder: Path) -> None:
        import chromadb_rust_bindings as rust

        folder.mkdir(parents=True, exist_ok=True)
        self._bindings: Any = rust.Bindings(
            allow_reset=True,
            sqlite_db_config=rust.SqliteDBConfig(
                hash_type=rust.MigrationHash.MD5,
                migration_mode=rust.MigrationMode.Apply,
                url=str(folder / "chroma.sqlite3"),
            ),
            persist_path=str(folder),
            hnsw_cache_size=_open_files_allowed() // 5,  # as chromadb: 5 files an HNSW index
        )

    @property
    def bindings(self) -> Any:
        if self._bindings is None:
            raise RuntimeError("this Chroma client was closed")
        return self._bindings

    def get_or_create_collection(
        self, name: str, embedding_function: None = None, configuration: dict[str, Any] | None = None
    ) -> LocalCollection:
        """As chromadb's, for the one configuration Spellbook makes: cosine, no embedding function."""
        if embedding_function is not None or configuration not in (None, {"hnsw": {"space": "cosine"}}):
            raise ValueError("LocalChroma makes cosine collections without an embedding function only")
        made = self.bindings.create_collection(name, COSINE, None, None, True, TENANT, DATABASE)
        return LocalCollection(self, str(made.id))

    def delete_collection(self, name: str) -> None:
        self.bindings.delete_collection(name, TENANT, DATABASE)

    def close(self) -> None:
        self._bindings = None  # the last reference: Rust closes the database and drops its caches


def _open_files_allowed() -> int:
    """The process's limit on open files, as chromadb reads it."""
    if sys.platform == "win32":
        import ctypes

        return int(ctypes.cdll.msvcrt._getmaxstdio())
    import resource

    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


class LocalCollection:
    """The calls ``VectorIndex`` makes, in the shapes chromadb's ``Collection`` gives them."""

    def __init__(self, client: LocalChroma, collection_id: str) -> None:
        self._client = client
        self.id = collection_id

    def count(self) -> int:
        return int(self._client.bindings.count(self.id, TENANT, DATABASE))

    def upsert(self, ids: Sequence[str], embeddings: Sequence[Sequence[float]]) -> None:
        if not ids:
            return
        rows = np.asarray(embeddings, dtype=np.float32)
        if rows.ndim != 2 or len(rows) != len(ids):
            raise ValueError(f"expected {len(ids)} vectors of one length, got an array of shape {rows.shape}")
        self._client.bindings.upsert(self.id, list(ids), list(rows), None, None, None, TENANT, DATABASE)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._client.bindings.delete(self.id, list(ids), None, None, None, TENANT, DATABASE)

    def get(
        self,
        ids: Sequence[str] | None = None,
        include: Sequence[str] = (),
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        got = self._client.bindings.get(
            self.id,
            list(ids) if ids is not None else None,
            None,
            limit,
            offset or 0,
            None,
            list(include),
            TENANT,
            DATABASE,
        )
        return {"ids": list(got.ids), "embeddings": got.embeddings, **{key: getattr(got, key) for key in include}}

    def query(
        self, query_embeddings: Sequence[Sequence[float]], n_results: int, include: Sequence[str] = ("distances",)
    ) -> dict[str, Any]:
        queries = list(np.asarray(query_embeddings, dtype=np.float32))
        got = self._client.bindings.query(
            self.id, None, queries, n_results, None, None, list(include), TENANT, DATABASE
        )
        return {"ids": got.ids, "distances": got.distances}
