"""What an embedded index imports: Chroma's Rust bindings only, never the chromadb package
(spellbook/startup/chroma_local.py), nor the gRPC it imports. Each case runs in a fresh interpreter,
since the test process may have imported chromadb already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_embedded_index_works_without_chromadb_or_grpc(tmp_path: Path) -> None:
    got = _run(f"""
        import json, sys
        from pathlib import Path
        from spellbook.index.chroma import VectorIndex

        index = VectorIndex.embedded(Path({str(tmp_path / "chroma")!r}))
        index.upsert(["a", "b"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        found = index._collection.query(query_embeddings=[[0.9, 0.1, 0.0]], n_results=1, include=["distances"])
        index.close()
        print(json.dumps({{"nearest": found["ids"][0][0], "chromadb": "chromadb" in sys.modules,
                          "loaded": sorted(m for m in ("grpc", "google.protobuf") if m in sys.modules)}}))
    """)
    assert got == {"nearest": "a", "chromadb": False, "loaded": []}


def test_a_new_index_opens_chroma_only_when_a_vector_is_written(tmp_path: Path) -> None:
    """Where the index folder holds no database yet, Chroma opens when the writer has vectors for
    it; an empty vault never opens it; a later start leaves the database that is there closed until
    something needs it (its vectors come from the snapshot; the doctor's check reads Chroma's own),
    and none of this imports the chromadb package."""
    vault = tmp_path / "vault"
    vault.mkdir()
    got = _run(f"""
        import json, sys
        from pathlib import Path
        from spellbook.config import Settings
        from spellbook.engine import Engine
        from spellbook.embedders.hashing import HashingEmbedder

        settings = Settings(vault=Path({str(vault)!r}), embedder="hashing", watch=False)
        engine = Engine(settings, embedder=HashingEmbedder())
        engine.start()  # an empty vault: reset and reconcile need nothing from Chroma
        started = engine.vectors._client is not None
        found = engine.memorize("walrus")["results"]
        out = engine.scribe("Walruses haul out on sea ice to rest between dives.", title="Walrus")
        hit = engine.memorize("walruses resting on ice", mode="semantic")["results"][0]["id"] == out["id"]
        engine.vectors.flush(10)
        written = engine.vectors._client is not None
        engine.close()
        engine = Engine(settings, embedder=HashingEmbedder())
        opened = engine.vectors._collection is not None  # the database exists now, and stays closed
        engine.start()
        stats = engine.stats()
        after_stats = engine.vectors._collection is not None
        consistent = engine.check()["consistent"]
        checked = engine.vectors._collection is not None
        engine.close()
        print(json.dumps({{"started": started, "found": found, "hit": hit, "written": written, "opened": opened,
                          "after_stats": after_stats, "checked": checked, "vectors": stats["vectors"],
                          "consistent": consistent, "chromadb": "chromadb" in sys.modules}}))
    """)
    assert got == {
        "started": False,
        "found": [],
        "hit": True,
        "written": True,
        "opened": False,
        "after_stats": False,
        "checked": True,
        "vectors": 1,
        "consistent": True,
        "chromadb": False,
    }
