"""``spellbook doctor`` on a stopped vault tells work a killed owner left pending (the next start
does it: exit 0, a "pending" line) from drift (exit 1): a vector lost behind the catalog's back, a
note changed with the size and mtime the index has (docs/architecture.md, "Crash safety and
recovery"). A real owner process killed at a chosen point of its write path, the real doctor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from spellbook.config import Settings
from spellbook.index.catalog import Catalog
from spellbook.index.chroma import VectorIndex
from tests.helpers.engine import open_engine
from tests.helpers.processes import SPELLBOOK, child_env

WRITER = """
import sys, time
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
engine = Engine(Settings(vault=sys.argv[1], embedder="hashing", watch=False), embedder=HashingEmbedder())
engine.start()
with engine.vectors._write_lock:  # the vector writer waits until the six are acknowledged...
    for n in range(6):
        print(engine.scribe(f"Pending note {n}: the deploy runs at {n} am. " * 5, title=f"Pending {n}",
                            category="ops")["id"], flush=True)
time.sleep(60)  # ...then dies (its crash point) before Chroma has their vectors
"""


def doctor(vault: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SPELLBOOK, "doctor", "--vault", str(vault), *flags],
        capture_output=True,
        text=True,
        env=child_env(SPELLBOOK_EMBEDDER="hashing"),
        timeout=120,
        check=False,
    )


def test_doctor_says_pending_after_a_killed_owner_and_fails_only_on_drift(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    settings = Settings(vault=vault, embedder="hashing", watch=False)
    engine = open_engine(settings)
    try:
        kept = engine.scribe("Backups run nightly to the NAS.", title="Backups", category="ops")
    finally:
        engine.close()  # a clean close: every vector of this session is vouched for
    env = child_env(SPELLBOOK_TEST_CRASH_AT="vectors-behind:1", PYTHONPATH=str(Path(__file__).parents[2]))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(vault)], stdout=subprocess.PIPE, text=True, env=env)
    out, _ = writer.communicate(timeout=120)
    assert writer.returncode == -signal.SIGKILL and len(out.split()) == 6, out
    (vault / "ops" / "Written while stopped.md").write_text("---\nid: stopped-1\n---\nA hand-written note.\n")

    for _ in range(2):  # doctor changes nothing: the same answer twice
        done = doctor(vault)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "index == vault once pending work is done" in done.stdout
        assert "  not indexed: 1\n" in done.stdout and "  vectors missing: " in done.stdout
        assert "\npending: " in done.stdout and "Nothing to repair" in done.stdout
        assert "vectors lost" not in done.stdout and "--repair" not in done.stdout

    engine = open_engine(settings)  # the next start does the pending work
    engine.close()
    assert doctor(vault).stdout.startswith("index == vault: 8 files in the vault, 8 indexed")

    # Drift: a vector deleted from Chroma behind the catalog's back.
    catalog = Catalog(vault / ".spellbook" / "catalog.sqlite3")
    lost = catalog.chunk_ids(kept["path"])
    catalog.close()
    vectors = VectorIndex.embedded(vault / ".spellbook" / "chroma")
    vectors.delete(lost)
    vectors.close()
    done = doctor(vault)
    assert done.returncode == 1 and "index differs from the vault" in done.stdout, done.stdout
    assert f"vectors lost behind the index's back: {kept['path']}" in done.stdout
    assert "Run `spellbook doctor --repair` to fix it." in done.stdout and "\npending: " not in done.stdout
    assert doctor(vault, "--repair").returncode == 0 and doctor(vault).returncode == 0

    # Drift: a note changed with the size and mtime the ledger holds (no start would look at it).
    note = vault / kept["path"]
    before = note.stat()
    note.write_text(note.read_text().replace("nightly", "Nightly"))
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    done = doctor(vault)
    assert done.returncode == 1 and f"changed with the size and mtime the index has: {kept['path']}" in done.stdout
    assert doctor(vault, "--repair").returncode == 0
    engine = open_engine(settings)
    try:
        assert engine.memorize("Nightly backups", mode="keyword")["results"][0]["path"] == kept["path"]
        assert "Nightly" in engine.get_memories([kept["id"]])["memories"][0]["text"]
    finally:
        engine.close()
    assert doctor(vault).returncode == 0
