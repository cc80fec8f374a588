"""The vector index: one adapter over any chromadb ``ClientAPI`` (embedded folder or server).

Spellbook always passes vectors: the collection has no embedding function, so Chroma never tries
to download its default model. Records carry no documents; text lives in the catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

COLLECTION = "spellbook"
MAX_BATCH = 5_000  # Chroma refuses more than 5,461 records per call


class VectorIndex:
    def __init__(self, client: Any, collection: str = COLLECTION) -> None:
        self._client = client
        self._name = collection
        self._collection = self._open()

    @classmethod
    def embedded(cls, folder: Path) -> VectorIndex:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        folder.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(
            path=str(folder), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=True)
        )
        return cls(client)

    @classmethod
    def server(cls, url: str, collection: str) -> VectorIndex:
        """A Chroma server (``chroma run --host 127.0.0.1 --port 8000`` -> ``http://127.0.0.1:8000``)."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"chroma_url must look like http://127.0.0.1:8000, not {url!r}")
        client = chromadb.HttpClient(
            host=parsed.hostname, port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https", settings=ChromaSettings(anonymized_telemetry=False),
        )
        client.heartbeat()  # fail now, with the URL in the message, rather than on the first query
        return cls(client, collection)

    def _open(self):
        return self._client.get_or_create_collection(
            self._name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if close is not None:
            close()  # releases Chroma's SQLite handles; the same folder can be reopened later

    def reset(self) -> None:
        """Drop every vector (for a rebuild)."""
        try:
            self._client.delete_collection(self._name)
        except Exception:  # noqa: BLE001 - a missing collection is what we want anyway
            pass
        self._collection = self._open()

    def count(self) -> int:
        return self._collection.count()

    def ids(self) -> set[str]:
        out: set[str] = set()
        offset = 0
        while True:
            page = self._collection.get(include=[], limit=MAX_BATCH, offset=offset)
            out.update(page["ids"])
            if len(page["ids"]) < MAX_BATCH:
                return out
            offset += MAX_BATCH

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for start in range(0, len(ids), MAX_BATCH):
            got = self._collection.get(ids=list(ids[start : start + MAX_BATCH]), include=["embeddings"])
            for chunk_id, vector in zip(got["ids"], got["embeddings"]):
                out[chunk_id] = list(vector)
        return out

    def sample(self, limit: int) -> list[list[float]]:
        """Up to ``limit`` stored vectors (in storage order), for calibrating similarities."""
        got = self._collection.get(limit=limit, include=["embeddings"])
        return [list(v) for v in got["embeddings"]] if got["embeddings"] is not None else []

    def delete(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), MAX_BATCH):
            self._collection.delete(ids=list(ids[start : start + MAX_BATCH]))

    def upsert(self, ids: Sequence[str], vectors: Sequence[Sequence[float]], metadatas: Sequence[dict]) -> None:
        for start in range(0, len(ids), MAX_BATCH):
            end = start + MAX_BATCH
            self._collection.upsert(
                ids=list(ids[start:end]), embeddings=[list(v) for v in vectors[start:end]],
                metadatas=list(metadatas[start:end]),
            )

    def query(self, vector: Sequence[float], limit: int, ids: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) nearest first; ``ids`` restricts the search to those records."""
        if limit <= 0:
            return []
        kwargs: dict[str, Any] = {}
        if ids is not None:
            if not ids:
                return []
            if len(ids) > MAX_BATCH:
                raise ValueError("restrict to at most 5,000 ids; post-filter larger sets")
            kwargs["ids"] = list(ids)
            limit = min(limit, len(ids))
        result = self._collection.query(
            query_embeddings=[list(vector)], n_results=limit, include=["distances"], **kwargs
        )
        return [(cid, 1.0 - float(dist)) for cid, dist in zip(result["ids"][0], result["distances"][0])]
