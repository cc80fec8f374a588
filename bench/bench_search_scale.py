"""memorize latency as the vault grows: p50/p95 per mode, with and without filters.

Notes are mixes of 2-4 real sentences from ../shared/eval (English and Korean), queries are the
eval's real questions. Notes are written straight into a vault and indexed in one batched reconcile (indexing speed is
bench_sync.py's business). At 10k notes it uses the real default model; at 100k chunks the
vectors come from the hashing embedder at 512 dimensions (the query-embedding cost is then ~0.2 ms
instead of ~4 ms: add that back), because what is measured there is Chroma + SQLite with filters.

    .venv/bin/python bench/bench_search_scale.py [--sizes 10000] [--big 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.vault.note import render_note

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
TOPICS = ["deploy", "database", "frontend", "billing", "hiring", "travel", "cooking", "garden", "music", "health"]


def _sentences() -> tuple[list[str], list[str]]:
    """Real sentences and queries from ../shared/eval (English and Korean), for a realistic vocabulary."""
    sentences: list[str] = []
    queries: list[str] = []
    for name in ("dev_en", "dev_ko"):
        with gzip.open(EVAL / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                if rec["kind"] == "note":
                    sentences += [x.strip() + "." for x in re.split(r"(?<=[.!?])\s+", rec["text"]) if len(x) > 20]
                else:
                    queries.append(rec["q"])
    return sentences, queries


def make_vault(root: Path, n: int, seed: int = 1) -> list[str]:
    """n notes of 2-4 real sentences each (unique mixes), with metadata to filter on; returns queries."""
    rng = random.Random(seed)
    sentences, queries = _sentences()
    for i in range(n):
        topic = rng.choice(TOPICS)
        body = " ".join(rng.sample(sentences, rng.randint(2, 4)))
        meta = {
            "id": f"n{i:06d}",
            "title": f"{topic} note {i}",
            "category": rng.choice(["projects", "people", "ops", "life"]),
            "topic": topic,
            "tags": rng.sample(TOPICS, 2),
            "importance": rng.randint(1, 5),
            "created": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T10:00:00+00:00",
        }
        folder = root / meta["category"] / topic
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {i:06d}.md").write_text(render_note(meta, body), encoding="utf-8")
    return queries


def percentiles(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1]
    return f"p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms"


def measure(engine: Engine, queries: list[str], label: str) -> None:
    filters = {
        "none": None,
        "category (25%)": {"category": "projects"},
        "category+topic (2.5%)": {"category": "projects", "topic": "deploy"},
        "tags any": {"tags_any": ["music"]},
        "date range": {"updated_after": "2026-06-01", "updated_before": "2026-07-01"},
    }
    print(f"\n{label}")
    for mode in ("hybrid", "semantic", "keyword"):
        for name, spec in filters.items():
            if mode != "hybrid" and name not in ("none", "category (25%)"):
                continue
            times = []
            for q in queries:
                started = time.perf_counter()
                engine.memorize(q, limit=5, mode=mode, filter=spec)
                times.append((time.perf_counter() - started) * 1000)
            print(f"  {mode:<9} filter {name:<22} {percentiles(times)}")
    # The worst case: a filter whose answer is not kept (first use, or after a big batch of writes).
    times = []
    for q in queries[:50]:
        engine.catalog._filters.clear()
        started = time.perf_counter()
        engine.memorize(q, limit=5, mode="hybrid", filter=filters["category (25%)"])
        times.append((time.perf_counter() - started) * 1000)
    print(f"  {'hybrid':<9} filter {'category, cold':<22} {percentiles(times)}")
    # A write between searches: kept filter answers are brought up to date, not recomputed.
    times = []
    for i, q in enumerate(queries[:50]):
        engine.scribe(f"Bench note {i} about {q}", title=f"bench {i}", category="projects")
        started = time.perf_counter()
        engine.memorize(q, limit=5, mode="hybrid", filter=filters["category (25%)"])
        times.append((time.perf_counter() - started) * 1000)
    print(f"  {'hybrid':<9} filter {'category, after write':<22} {percentiles(times)}")


def run(size: int, embedder, label: str, queries: int, keep: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        vault = (keep / f"vault-{size}") if keep else Path(tmp) / "vault"
        if vault.exists():  # a vault kept from an earlier run (--keep): same notes, index reused
            real_queries = _sentences()[1]
        else:
            vault.mkdir(parents=True)
            real_queries = make_vault(vault, size)
        engine = Engine(Settings(vault=vault, watch=False), embedder=embedder)
        started = time.perf_counter()
        engine.start()
        built = time.perf_counter() - started
        stats = engine.stats()
        qs = random.Random(7).sample(real_queries, queries)
        measure(
            engine,
            qs,
            f"{label}: {stats['notes']} notes, {stats['chunks']} chunks (indexed in {built:.0f} s, "
            f"{stats['notes'] / built:.0f} notes/s)",
        )
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="keep the generated vaults (and indexes) here for the next run")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f} at start")
    from spellbook.embedders.use import USEEmbedder

    for size in [int(s) for s in args.sizes.split(",") if s]:
        model = USEEmbedder()
        model.warm_up()
        run(size, model, f"use-m3 at {size:,}", args.queries, args.keep)
    if args.big:
        run(
            args.big,
            HashingEmbedder(dimensions=512),
            f"hashing-512 at {args.big:,} (Chroma + SQLite cost)",
            args.queries,
            args.keep,
        )
    print(f"\nload {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
