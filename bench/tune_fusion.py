"""Tune hybrid fusion offline: build an index of an eval set once (files written straight into a
vault, then one batched reconcile), cache each query's semantic and keyword candidate lists, and
score fusion variants on the cache. Prints hit@1/5/10 and MRR@10 per variant.

    .venv/bin/python bench/tune_fusion.py [--set dev_en] [--embedder use-m3] [--workdir /tmp/tune]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import pickle
import time
from pathlib import Path

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.engine.hybrid import coverage, fuse, query_terms
from spellbook.vault.note import render_note

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
DEPTH = 50


def load(name: str):
    notes, queries = [], []
    with gzip.open(EVAL / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            (notes if rec["kind"] == "note" else queries).append(rec)
    return notes, queries


def build(name: str, embedder: str, workdir: Path):
    cache = workdir / f"{name}-{embedder}.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    notes, queries = load(name)
    vault = workdir / f"{name}-{embedder}"
    vault.mkdir(parents=True, exist_ok=True)
    for n, note in enumerate(notes):
        meta = {"id": note["id"], "title": note["meta"].get("title") or note["id"]}
        (vault / f"{n:05d}.md").write_text(render_note(meta, note["text"]), encoding="utf-8")
    engine = Engine(Settings(vault=vault, embedder=embedder, watch=False))
    started = time.perf_counter()
    engine.start()
    print(f"indexed {len(notes)} notes in {time.perf_counter() - started:.1f} s")
    rows = []
    for q in queries:
        vector = engine.embedder.embed_query(q["q"])
        sem = engine.vectors.query(vector, DEPTH)
        kw = engine.catalog.keywords.search(q["q"], "1", [], DEPTH)
        ids = {cid for cid, _ in sem} | {cid for cid, _ in kw}
        chunks = engine.catalog.chunks(list(ids))
        notes_at = engine.catalog.notes_at(c.path for c in chunks.values())
        terms = query_terms(q["q"])
        info = {
            cid: (notes_at[c.path].note_id, coverage(terms, (c.text, c.heading, notes_at[c.path].title)))
            for cid, c in chunks.items()
        }
        rows.append({"q": q["q"], "relevant": set(q["relevant"]), "sem": sem, "kw": kw, "info": info})
    engine.close()
    cache.write_bytes(pickle.dumps(rows))
    return rows


def metrics(rows, rank_fn):
    h1 = h5 = h10 = mrr = 0.0
    for row in rows:
        ranked = rank_fn(row)
        note_ids = []
        for cid in ranked:
            nid = row["info"][cid][0]
            if nid not in note_ids:
                note_ids.append(nid)
        for r, nid in enumerate(note_ids[:10], 1):
            if nid in row["relevant"]:
                h1 += r == 1
                h5 += r <= 5
                h10 += 1
                mrr += 1 / r
                break
    n = len(rows)
    return h1 / n, h5 / n, h10 / n, mrr / n


def rrf(ws: float, power: float, k: int):
    def fn(r):
        kw = [c for c, _ in r["kw"]]
        weight = {c: r["info"][c][1] ** power for c in kw}
        return [c for c, _ in fuse([[c for c, _ in r["sem"]], kw], [ws, weight], k=k)]
    return fn


def convex(alpha: float, power: float):
    def fn(r):
        kw = dict(r["kw"])
        top = max(kw.values(), default=1.0) or 1.0
        sem = dict(r["sem"])
        ids = set(kw) | set(sem)
        lo, hi = min(sem.values(), default=0.0), max(sem.values(), default=1.0)
        span = (hi - lo) or 1.0
        def score(c):
            s = (sem[c] - lo) / span if c in sem else 0.0
            k = kw.get(c, 0.0) / top * r["info"][c][1] ** power
            return alpha * s + (1 - alpha) * k
        return sorted(ids, key=lambda c: -score(c))
    return fn


def variants():
    yield "semantic", lambda r: [c for c, _ in r["sem"]]
    yield "keyword", lambda r: [c for c, _ in r["kw"]]
    for ws in (1.0, 0.5, 0.35):
        for power in (1.0, 1.5, 2.0):
            for k in (60, 20):
                yield f"rrf k={k} wsem={ws} cov^{power}", rrf(ws, power, k)
    for alpha in (0.2, 0.3, 0.4, 0.5):
        for power in (0.0, 1.0, 1.5, 2.0):
            yield f"convex alpha_sem={alpha} cov^{power}", convex(alpha, power)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=None)
    parser.add_argument("--embedder", default="use-m3")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spellbook-tune"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    for name in args.set or ["dev_en", "dev_ko"]:
        rows = build(name, args.embedder, args.workdir)
        print(f"\n== {name} ({len(rows)} queries, {args.embedder})")
        print(f"{'variant':<34} hit@1  hit@5 hit@10 MRR@10")
        for label, fn in variants():
            h1, h5, h10, mrr = metrics(rows, fn)
            print(f"{label:<34} {h1:.3f}  {h5:.3f}  {h10:.3f}  {mrr:.3f}")


if __name__ == "__main__":
    main()
