"""The vectors of removed or replaced chunks are kept for a while (a move arrives as a delete and a
create, a checkout back restores old text): compact float32 rows, not Python lists of floats (16 KB
a vector at 512-d, 330 MB at the 20,000 kept), and reused as they were."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spellbook.engine import Engine
from tests.helpers.engine import CountingEmbedder


def test_a_replaced_chunk_keeps_a_compact_vector_that_its_text_reuses(
    engine: Engine, embedder: CountingEmbedder, vault: Path
) -> None:
    out = engine.scribe("The lighthouse keeper logs the tides every morning.", title="Tides", category="sea")
    original = (vault / out["path"]).read_text(encoding="utf-8")
    (chunk_id,) = engine.catalog.chunk_ids(out["path"])
    before = engine.vectors.vectors([chunk_id])[chunk_id]
    engine.revise(out["id"], text="The keeper now logs the wind instead.")
    kept = list(engine.indexer._recently_removed.values())
    assert len(kept) == 1
    assert isinstance(kept[0], np.ndarray) and kept[0].dtype == np.float32 and kept[0].nbytes == 4 * len(before)

    embedder.embedded.clear()
    (vault / out["path"]).write_text(original, encoding="utf-8")  # a checkout back to the old text
    report = engine.indexer.sync_paths([out["path"]])
    assert embedder.embedded == [] and report.reused_chunks == 1
    (restored,) = engine.catalog.chunk_ids(out["path"])
    vector = engine.vectors.vectors([restored])[restored]
    assert all(isinstance(x, float) for x in vector)
    assert vector == pytest.approx(before, abs=1e-6)
    assert engine.memorize("lighthouse tides", limit=1)["results"][0]["id"] == out["id"]
