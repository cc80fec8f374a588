"""Crash benchmark: kill -9 the index owner at random moments of its write loop, over and over.

Each round starts a writer process (the real Engine: vault store, catalog, Chroma, the hashing
embedder) that scribes notes and revises every third one, printing each id once the tool call
returned (= acknowledged). After a random 0.05-1.0 s it is killed with SIGKILL. The next start
(``Engine.start``: temp-file cleanup, then reconcile) must bring the index level with the vault:
``Engine.check()`` (what ``spellbook doctor`` runs) consistent, every acknowledged id found, as
many notes in the index as note files on disk. Figures only; the exit code is 1 when any round
lost a write or left the index unequal to the vault.

    .venv/bin/python bench/bench_crash.py                  # 100 rounds, at most 10 minutes
    .venv/bin/python bench/bench_crash.py --rounds 20 --minutes 3
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine

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
    out = engine.scribe(f"Round {sys.argv[2]} note {n} body " * (5 + n % 40), \
title=f"r{sys.argv[2]} n{n}", category="crash")
    if n % 3 == 0:
        engine.revise(out["id"], text=f"Revised round {sys.argv[2]} note {n}")
    print(out["id"], flush=True)
"""


def note_files(vault: Path) -> list[Path]:
    return [f for f in vault.rglob("*.md") if not {".spellbook", ".trash"} & set(f.parts)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=10.0, help="stop starting rounds after this long")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    acknowledged: list[str] = []
    bad_rounds = 0
    lost_total = 0
    with tempfile.TemporaryDirectory(prefix="spellbook-crash-") as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        settings = Settings(vault=vault, embedder="hashing", watch=False)
        rounds = 0
        print("round  acked  lost  files  notes  doctor")
        while rounds < args.rounds and time.monotonic() < deadline:
            rounds += 1
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(vault), str(rounds)], stdout=subprocess.PIPE, text=True, cwd=ROOT
            )
            assert writer.stdout is not None
            if writer.stdout.readline().strip() != "ready":
                writer.kill()
                print(f"{rounds:5}  the writer did not start")
                return 1
            time.sleep(0.05 + rng.random() * 0.95)
            writer.send_signal(signal.SIGKILL)
            out, _ = writer.communicate()
            acknowledged += out.split()
            engine = Engine(settings, embedder=HashingEmbedder())
            try:
                engine.start()
                lost = sum(
                    len(engine.get_memories(acknowledged[i : i + 20])["not_found"])
                    for i in range(0, len(acknowledged), 20)
                )
                report = engine.check()
                files, notes = len(note_files(vault)), engine.stats()["notes"]
                ok = report["consistent"] and not lost and files == notes
                detail = "ok" if report["consistent"] else f"FAIL {report['counts']}"
                print(f"{rounds:5}  {len(acknowledged):5}  {lost:4}  {files:5}  {notes:5}  {detail}", flush=True)
                if not ok:
                    bad_rounds += 1
                    lost_total += lost
                    indexed = set(engine.catalog.files())
                    for f in note_files(vault):
                        path = f.relative_to(vault).as_posix()
                        if engine.catalog.note_at(path) is None:
                            print(
                                f"       not a note in the index: {path} (ledger: {engine.catalog.file(path)}, "
                                f"listed: {path in indexed})"
                            )
            finally:
                engine.close()
    print(
        f"\nrounds: {rounds}  acknowledged writes: {len(acknowledged)}  lost: {lost_total}  "
        f"rounds where the index != the vault: {bad_rounds}"
    )
    return 1 if bad_rounds else 0


if __name__ == "__main__":
    sys.exit(main())
