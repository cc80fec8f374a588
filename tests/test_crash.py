"""kill -9 at any moment loses no acknowledged note, leaves no half-written file, and the next
start repairs the index."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.vault.note import parse_note

from .conftest import open_engine

pytestmark = pytest.mark.slow

WRITER = """
import sys
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
engine = Engine(Settings(vault=sys.argv[1], embedder="hashing", watch=False), embedder=HashingEmbedder())
engine.start()
print("ready", flush=True)
n = 0
while True:
    n += 1
    out = engine.scribe(f"Round {sys.argv[2]} note {n} body " * 20, title=f"r{sys.argv[2]} n{n}", category="crash")
    if n % 3 == 0:
        engine.revise(out["id"], text=f"Revised round {sys.argv[2]} note {n}")
    print(out["id"], flush=True)
"""


def test_kill_9_in_a_loop_loses_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    settings = Settings(vault=vault, embedder="hashing", watch=False)
    acknowledged: list[str] = []
    rng = random.Random(7)
    for round_ in range(8):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(vault), str(round_)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(0.05 + rng.random())  # kill at a random moment of the write loop
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate()
        acknowledged += out.split()
        if not acknowledged:
            continue

        for file in vault.rglob("*.md"):
            if ".trash" in file.parts:
                continue
            parsed = parse_note(file.read_text(encoding="utf-8"))
            assert parsed.problem is None and parsed.meta.get("id"), file  # never half a file
        engine = open_engine(settings)
        try:
            assert not list(vault.rglob(".*.tmp")), "leftover temp files were not cleaned up"
            found = engine.get_memories(acknowledged[-20:])
            assert not found["not_found"]
            assert engine.vectors.ids() == engine.catalog.all_chunk_ids()
            files = [f for f in vault.rglob("*.md") if ".spellbook" not in f.parts]
            assert engine.stats()["notes"] == len(files)
        finally:
            engine.close()
    assert len(acknowledged) > 20  # the writer really wrote between kills
