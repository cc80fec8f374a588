"""Team sync over git (docs/sync.md): how long a memory scribed on one machine takes to be
searchable on another, and what one sync round costs on a large vault.

1. Latency: a bare repository as the remote and two clones, each with its own index owner (an
   in-process ``Hub``, watcher on) syncing on the timer (``--seconds``, 5 by default). A memory is
   scribed on the first (at a random point of the timers' periods); the time until ``memorize`` on
   the second returns it is measured, ``--samples`` times (p50, p95). Expect about the after-write
   delay (1 s) plus up to one period of the other machine's timer.
2. Cost: a vault of ``--notes`` generated notes (tests/helpers/web.py) in the remote and a clone
   with its index built; another clone pushes ``--new`` new notes, this one has one write of its own,
   and ``sync`` is timed (fetch, merge commit, push, files written, the new notes indexed), then a
   round with nothing to do. The hashing embedder is used for both parts: the numbers are git's
   and Spellbook's plumbing, not a model's (a real model adds its embedding time for the new notes).

    .venv/bin/python bench/bench_team_sync.py [--seconds 5] [--samples 20] [--notes 10000] [--new 100]
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spellbook.engine import Engine
from spellbook.server.hub import Hub
from tests.helpers.git import git
from tests.helpers.team import clone, machine_settings, make_remote
from tests.helpers.web import write_vault


def latency(tmp: Path, seconds: float, samples: int) -> list[float]:
    tmp.mkdir()
    remote = make_remote(tmp)
    hubs = [
        Hub(machine_settings(clone(tmp, remote, name), sync_seconds=seconds, watch=True), warm_up=False)
        for name in ("ada", "bob")
    ]
    for hub in hubs:
        hub.start(background=False)
    times = []
    rng = random.Random(46)
    try:
        for n in range(samples):
            time.sleep(rng.uniform(0, seconds))  # not in step with the other machine's timer
            started = time.perf_counter()
            note = hubs[0].call(
                "scribe", {"text": f"Fact number {n}: the build cache key has part q{n}x.", "title": f"Fact {n}"}
            )
            while True:
                hits = hubs[1].call("memorize", {"query": f"q{n}x", "mode": "keyword", "limit": 3})["results"]
                if any(h["id"] == note["id"] for h in hits):
                    break
                if time.perf_counter() - started > 10 * seconds + 30:
                    raise RuntimeError(f"sample {n} never arrived: {hubs[1].call('stats')['sync']}")
                time.sleep(0.05)
            times.append(time.perf_counter() - started)
            print(f"  sample {n}: {times[-1]:.2f} s", flush=True)
    finally:
        for hub in hubs:
            hub.close()
    return times


def cost(tmp: Path, notes: int, new: int) -> dict[str, float]:
    remote = make_remote(tmp)
    seed = tmp / "seed"
    git(seed, "pull", "-q", "origin", "main")
    write_vault(seed, notes)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", f"{notes} notes")
    git(seed, "push", "-q", "origin", "HEAD:main")
    other = clone(tmp, remote, "ada")
    mine = Engine(machine_settings(clone(tmp, remote, "bob")))
    started = time.perf_counter()
    mine.start()
    out = {"index_build_s": time.perf_counter() - started}
    try:
        for n in range(new):
            (other / "arrivals").mkdir(exist_ok=True)
            (other / "arrivals" / f"New {n}.md").write_text(
                f"---\nid: 'new{n:013d}'\ntitle: New {n}\n---\nArrived from the other machine, number z{n}y.\n"
            )
        git(other, "add", "-A")
        git(other, "commit", "-q", "-m", f"{new} new notes")
        git(other, "push", "-q", "origin", "HEAD:main")
        mine.scribe("One write of this machine's own, so the round merges.", title="Own write")
        mine.git.flush()
        started = time.perf_counter()
        result = mine.sync()
        out["round_with_new_s"] = time.perf_counter() - started
        assert result["in_sync"] and result["pulled"] and result["pushed"], result
        assert mine.memorize(f"z{new - 1}y", mode="keyword")["results"], "the new notes are not searchable"
        started = time.perf_counter()
        assert mine.sync()["in_sync"]
        out["round_nothing_to_do_s"] = time.perf_counter() - started
    finally:
        mine.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--new", type=int, default=100)
    args = parser.parse_args()
    print(
        f"# bench_team_sync: {platform.platform()}, python {platform.python_version()}, "
        f"git {git(Path.cwd(), 'version').split()[-1]}, hashing embedder"
    )
    tmp = Path(tempfile.mkdtemp(prefix="spellbook-team-"))
    try:
        print(f"1. scribe on one machine -> searchable on the other, timer {args.seconds:g} s, {args.samples} samples")
        times = sorted(latency(tmp / "latency", args.seconds, args.samples))
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(f"   p50 {statistics.median(times):.2f} s, p95 {p95:.2f} s, max {times[-1]:.2f} s")
        (tmp / "cost").mkdir()
        print(f"2. one sync round, {args.notes:,} notes in the vault, {args.new} new from the other machine")
        for key, value in cost(tmp / "cost", args.notes, args.new).items():
            print(f"   {key}: {value:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
