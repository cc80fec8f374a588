"""Retrieval benchmark: load the shared dev sets into a fresh vault through the MCP tools, then
measure hit@k / MRR@10 and latency of ``memorize`` per search mode.

Every note goes in with the real ``scribe`` tool and every query goes through the real
``memorize`` tool, over the in-process MCP client, so the numbers include the tool layer, the
hub, the vault writes and the index exactly as an agent would see them.

    .venv/bin/python bench/eval_retrieval.py                         # both dev sets, use-m3
    .venv/bin/python bench/eval_retrieval.py --embedder minilm --json
    .venv/bin/python bench/eval_retrieval.py --set ../shared/eval/dev_ko.jsonl.gz --limit-queries 50
    .venv/bin/python bench/eval_retrieval.py --conv --conv-context --conv-dates --modes hybrid   # LoCoMo, 7 stores

The dev sets (see ``<workspace>/shared/eval/README.md``) are gzip'd JSON Lines: notes first, then
queries; every record has a ``conv`` (the store it belongs to). Each ``conv`` gets its own vault.

Modes are queried interleaved (each query in every mode, in rotating order), so background load
hits all modes alike. The run prints a hash of the spellbook source it imported; to measure a
fixed version while spellbook/ is being edited, copy the package and put the copy first:
``cp -r spellbook /tmp/snap/ && PYTHONPATH=/tmp/snap .venv/bin/python bench/eval_retrieval.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Running ``python bench/eval_retrieval.py`` puts bench/ first on sys.path, where other scripts'
# names (e.g. bench/tokenizers.py) would shadow real packages that the embedders import.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio

SPELLBOOK_MODULES = (
    "spellbook.config",
    "spellbook.engine",
    "spellbook.server.hub",
    "spellbook.server.tools",
    "spellbook.index.indexer",
    "spellbook.index.catalog",
    "spellbook.index.chroma",
    "spellbook.index.keyword",
    "spellbook.engine.hybrid",
    "spellbook.embedders.base",
    "spellbook.embedders.use",
    "spellbook.embedders.minilm",
    "spellbook.embedders.hashing",
)

# <workspace>/shared/eval from the repository (or from a git worktree one level further down), or $SPELLBOOK_EVAL_DIR.
EVAL_DIR = Path(
    os.environ.get("SPELLBOOK_EVAL_DIR")
    or next(
        (d for d in (Path(__file__).resolve().parents[i] / "shared" / "eval" for i in (2, 3)) if d.is_dir()),
        Path(__file__).resolve().parents[2] / "shared" / "eval",
    )
)
DEFAULT_SETS = [EVAL_DIR / "dev_en.jsonl.gz", EVAL_DIR / "dev_ko.jsonl.gz"]
# Conversational memory (LoCoMo, evaluation only: read at run time, never copied into the repository).
CONV_SETS = [EVAL_DIR / "dev_conv_turns.jsonl.gz", EVAL_DIR / "dev_conv_obs.jsonl.gz"]
EMBEDDERS = ("use-m3", "minilm", "hashing")
MODES = ("hybrid", "semantic", "keyword")
SEARCH_LIMIT = 10
KS = (1, 5, 10)

# Plain BM25 reference numbers from shared/eval/README.md (hit@5, hit@10, MRR@10).
REFERENCE_BM25 = {"dev_en": (0.930, 0.950, 0.850), "dev_ko": (0.981, 0.986, 0.964)}


# --- data -------------------------------------------------------------------------------------
@dataclass
class EvalSet:
    conv: str
    source: Path
    notes: list[dict[str, Any]] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)


def load_sets(path: Path) -> list[EvalSet]:
    """One EvalSet per ``conv`` in the file, in first-seen order."""
    sets: dict[str, EvalSet] = {}
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            conv = record.get("conv") or path.name
            target = sets.setdefault(conv, EvalSet(conv, path))
            kind = record.get("kind")
            if kind == "note":
                target.notes.append(record)
            elif kind == "query":
                target.queries.append(record)
            else:
                raise ValueError(f"{path}:{lineno}: unknown record kind {kind!r}")
    return list(sets.values())


# --- metrics ----------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """Nearest-rank-with-interpolation percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def first_relevant_rank(ranked: list[str | None], relevant: set[str]) -> int | None:
    for rank, note_id in enumerate(ranked, 1):
        if note_id in relevant:
            return rank
    return None


@dataclass
class ModeResult:
    mode: str
    n: int = 0
    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    rr_sum: float = 0.0
    recall10_sum: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    empty_results: int = 0
    errors: list[str] = field(default_factory=list)
    unmapped_hits: int = 0
    by_category: dict[str, list[int | None]] = field(default_factory=lambda: defaultdict(list))
    misses: list[dict[str, Any]] = field(default_factory=list)  # a few examples for the report

    def add(self, query: dict[str, Any], ranked: list[str | None], latency_ms: float) -> None:
        relevant = set(query["relevant"])
        rank = first_relevant_rank(ranked[:SEARCH_LIMIT], relevant)
        self.n += 1
        self.latencies_ms.append(latency_ms)
        if not ranked:
            self.empty_results += 1
        for k in KS:
            if rank is not None and rank <= k:
                self.hits[k] += 1
        if rank is not None:
            self.rr_sum += 1.0 / rank
        found = len(relevant & set(ranked[:SEARCH_LIMIT]))
        self.recall10_sum += found / len(relevant) if relevant else 0.0
        self.by_category[str(query.get("category") or "-")].append(rank)
        if rank is None and len(self.misses) < 5:
            self.misses.append({"id": query["id"], "q": query["q"], "relevant": sorted(relevant), "got": ranked[:3]})

    def summary(self) -> dict[str, Any]:
        n = max(self.n, 1)
        out: dict[str, Any] = {
            "mode": self.mode,
            "queries": self.n,
            **{f"hit@{k}": self.hits[k] / n for k in KS},
            "recall@10": self.recall10_sum / n,
            "mrr@10": self.rr_sum / n,
            "latency_ms_p50": percentile(self.latencies_ms, 50),
            "latency_ms_p95": percentile(self.latencies_ms, 95),
            "latency_ms_mean": statistics.fmean(self.latencies_ms) if self.latencies_ms else float("nan"),
            "empty_results": self.empty_results,
            "errors": len(self.errors),
            "unmapped_hits": self.unmapped_hits,
        }
        cats = {}
        for cat, ranks in sorted(self.by_category.items()):
            m = len(ranks)
            cats[cat] = {
                "queries": m,
                "hit@1": sum(1 for r in ranks if r is not None and r <= 1) / m,
                "hit@5": sum(1 for r in ranks if r is not None and r <= 5) / m,
                "hit@10": sum(1 for r in ranks if r is not None) / m,
                "mrr@10": sum(1.0 / r for r in ranks if r is not None) / m,
            }
        out["by_category"] = cats
        out["ranks"] = [[cat, rank] for cat, ranks in sorted(self.by_category.items()) for rank in ranks]
        out["latencies_ms"] = [round(x, 2) for x in self.latencies_ms]
        if self.errors:
            out["error_examples"] = self.errors[:5]
        out["miss_examples"] = self.misses
        return out


def combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary over several stores of one file (e.g. the seven conversations): every query
    counts once, per mode and per category; latencies pooled."""
    out: dict[str, Any] = {
        "source": results[0]["source"],
        "stores": len(results),
        "notes": sum(r["notes"] for r in results),
        "queries": sum(r["queries"] for r in results),
    }
    scribe = [x for r in results for x in r["load"].get("scribe_ms", [])]
    out["scribe_ms_p50"] = percentile(scribe, 50)
    out["scribe_ms_p95"] = percentile(scribe, 95)
    out["modes"] = {}
    for mode in results[0]["modes"]:
        mr = ModeResult(mode)
        for r in results:
            s = r["modes"][mode]
            for (cat, rank), latency in zip(s["ranks"], s["latencies_ms"]):
                mr.n += 1
                mr.latencies_ms.append(latency)
                mr.by_category[cat].append(rank)
                for k in KS:
                    mr.hits[k] += rank is not None and rank <= k
                mr.rr_sum += 1.0 / rank if rank else 0.0
        out["modes"][mode] = {
            k: v for k, v in mr.summary().items() if k not in ("ranks", "latencies_ms", "miss_examples")
        }
    return out


def render_combined(c: dict[str, Any]) -> str:
    lines = [
        (
            f"== all {c['stores']} stores of {Path(c['source']).name}: {c['notes']} notes, {c['queries']} queries "
            f"(scribe p50 {c['scribe_ms_p50']:.1f} ms, p95 {c['scribe_ms_p95']:.1f} ms)"
        )
    ]
    lines.append(f"   {'mode':<9} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR@10':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for mode, s in c["modes"].items():
        lines.append(
            f"   {mode:<9} {s['hit@1']:>6.3f} {s['hit@5']:>6.3f} {s['hit@10']:>6.3f} {s['mrr@10']:>7.3f} "
            f"{s['latency_ms_p50']:>7.1f} {s['latency_ms_p95']:>7.1f}"
        )
    for mode, s in c["modes"].items():
        lines.append(f"   {mode} by category:")
        for cat, x in s["by_category"].items():
            lines.append(
                f"     {cat:<22} n={x['queries']:<4} hit@1 {x['hit@1']:.3f}  hit@5 {x['hit@5']:.3f}  "
                f"hit@10 {x['hit@10']:.3f}  MRR@10 {x['mrr@10']:.3f}"
            )
    return "\n".join(lines)


# --- client-side fusion sweep ------------------------------------------------------------------
SWEEP_DEPTH = 50  # memorize's maximum limit
# (label, RRF k, semantic weight, keyword weight). The first row is plain RRF (equal weights, k=60).
SWEEP_CONFIGS = [
    ("rrf k60 s1:k1", 60, 1.0, 1.0),
    ("rrf k60 s1:k2", 60, 1.0, 2.0),
    ("rrf k60 s1:k3", 60, 1.0, 3.0),
    ("rrf k60 s2:k1", 60, 2.0, 1.0),
    ("rrf k20 s1:k1", 20, 1.0, 1.0),
    ("rrf k20 s1:k2", 20, 1.0, 2.0),
    ("rrf k10 s1:k2", 10, 1.0, 2.0),
]


def rrf(rankings: list[tuple[list[str], float]], k: int) -> list[str]:
    scores: dict[str, float] = {}
    for ranking, weight in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return [item for item, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def fusion_sweep(queries: list[dict[str, Any]], lists: list[tuple[list[str], list[str]]]) -> dict[str, Any]:
    """Metrics of weighted RRF over the note-level semantic and keyword rankings (top 50 each)."""
    out: dict[str, Any] = {}
    for label, k, w_sem, w_kw in SWEEP_CONFIGS:
        mr = ModeResult(label)
        for q, (sem, kw) in zip(queries, lists):
            mr.add(q, rrf([(sem, w_sem), (kw, w_kw)], k)[:SEARCH_LIMIT], 0.0)
        summary = mr.summary()
        out[label] = {key: summary[key] for key in ("hit@1", "hit@5", "hit@10", "mrr@10")}
    return out


# --- the run ----------------------------------------------------------------------------------
def stored_text(note: dict[str, Any], previous: dict[Any, str], context: bool, dates: bool) -> str:
    """The text an agent following the system guide stores for an eval note: with ``context``, a
    dialogue turn (``meta.dia_id``) gets the turn before it in its session quoted below it
    (``previous`` maps session -> last turn and is updated); with ``dates``, a conversational note
    ends with the day it was said, in words. Otherwise the note's text unchanged."""
    meta = note.get("meta") or {}
    text = note["text"]
    if context and "dia_id" in meta:
        session = meta.get("session")
        if previous.get(session):
            text = f"{text}\n\n> {previous[session]}"
        previous[session] = note["text"]
    if dates and meta.get("session_date_time"):
        text = f"{text}\n\n({str(meta['session_date_time']).split(' on ')[-1]})"
    return text


async def evaluate(
    data: EvalSet,
    embedder: str,
    modes: list[str],
    limit_queries: int | None,
    title_fallback: str,
    progress: bool,
    sweep: bool = False,
    conv_context: bool = False,
    conv_dates: bool = False,
) -> dict[str, Any]:
    from mcp import Client

    from spellbook.config import Settings
    from spellbook.server.hub import Hub
    from spellbook.server.tools import build_server

    queries = data.queries[:limit_queries] if limit_queries else data.queries
    result: dict[str, Any] = {
        "conv": data.conv,
        "source": str(data.source),
        "notes": len(data.notes),
        "queries": len(queries),
        "embedder_setting": embedder,
        "loadavg": {},
    }
    result["loadavg"]["start"] = _loadavg()
    with tempfile.TemporaryDirectory(prefix=f"spellbook-eval-{data.conv}-", ignore_cleanup_errors=True) as tmp:
        vault_dir = Path(tmp) / "vault"
        vault_dir.mkdir()
        settings = Settings(vault=vault_dir, embedder=embedder, watch=False)
        t0 = time.perf_counter()
        hub = Hub(settings, watch=False)
        hub.start(background=False)
        result["open_seconds"] = time.perf_counter() - t0
        try:
            if hub._open_error is not None:
                raise RuntimeError(f"hub failed to open: {hub._open_error!r}")
            server = build_server(hub)
            async with Client(server) as client:
                stats = await client.call_tool("stats", {})
                result["embedder"] = (stats.structured_content or {}).get("embedder")

                # Load every note through scribe.
                memory_to_note: dict[str, str] = {}
                scribe_ms: list[float] = []
                scribe_errors: list[str] = []
                t_load = time.perf_counter()
                previous: dict[Any, str] = {}  # the last turn stored per session (conv_context)
                for i, note in enumerate(data.notes, 1):
                    meta = note.get("meta") or {}
                    text = stored_text(note, previous, conv_context, conv_dates)
                    args: dict[str, Any] = {"text": text, "category": "eval", "source": note["id"]}
                    conversational = data.conv != data.source.name and "session" in meta
                    fallback = title_fallback if title_fallback != "auto" else ("none" if conversational else "id")
                    title = meta.get("title") or (note["id"] if fallback == "id" else None)
                    if title:
                        args["title"] = title
                    t = time.perf_counter()
                    r = await client.call_tool("scribe", args)
                    scribe_ms.append((time.perf_counter() - t) * 1000)
                    if r.is_error or not r.structured_content:
                        scribe_errors.append(f"{note['id']}: {_text_of(r)}")
                        continue
                    memory_to_note[r.structured_content["id"]] = note["id"]
                    if progress and i % 200 == 0:
                        rate = i / (time.perf_counter() - t_load)
                        _log(f"  [{data.conv}] scribed {i}/{len(data.notes)} ({rate:.1f} notes/s)")
                load_seconds = time.perf_counter() - t_load
                result["load"] = {
                    "seconds": load_seconds,
                    "notes_per_second": len(data.notes) / load_seconds if load_seconds else float("nan"),
                    "scribe_ms_p50": percentile(scribe_ms, 50),
                    "scribe_ms_p95": percentile(scribe_ms, 95),
                    "scribe_ms": [round(x, 2) for x in scribe_ms],
                    "errors": len(scribe_errors),
                    "error_examples": scribe_errors[:5],
                }
                if len(memory_to_note) != len(data.notes) - len(scribe_errors):
                    result["load"]["duplicate_ids"] = len(data.notes) - len(scribe_errors) - len(memory_to_note)

                result["loadavg"]["after_load"] = _loadavg()
                stats = (await client.call_tool("stats", {})).structured_content or {}
                result["index"] = {
                    k: stats.get(k)
                    for k in ("notes", "chunks", "vectors", "skipped", "warnings", "problems_total", "state")
                }

                # Queries. Modes are interleaved per query (in rotating order), so a burst of other
                # work on the machine slows every mode alike instead of skewing one mode's latency.
                results_by_mode = {mode: ModeResult(mode) for mode in modes}
                for mode in modes:  # one untimed call each, so lazy set-up does not land in p95
                    await client.call_tool("memorize", {"query": "warm up", "limit": SEARCH_LIMIT, "mode": mode})
                t_queries = time.perf_counter()
                for j, q in enumerate(queries, 1):
                    shift = j % len(modes)
                    for mode in modes[shift:] + modes[:shift]:
                        mr = results_by_mode[mode]
                        t = time.perf_counter()
                        r = await client.call_tool("memorize", {"query": q["q"], "limit": SEARCH_LIMIT, "mode": mode})
                        latency = (time.perf_counter() - t) * 1000
                        if r.is_error or not r.structured_content:
                            mr.errors.append(f"{q['id']}: {_text_of(r)}")
                            mr.add(q, [], latency)
                            continue
                        ranked: list[str | None] = []
                        for hit in r.structured_content.get("results", []):
                            note_id = memory_to_note.get(hit.get("id"))
                            if note_id is None:
                                mr.unmapped_hits += 1
                            ranked.append(note_id)
                        mr.add(q, ranked, latency)
                    if progress and j % 250 == 0:
                        _log(f"  [{data.conv}] {j}/{len(queries)} queries x {len(modes)} modes")
                result["query_seconds"] = time.perf_counter() - t_queries
                result["modes"] = {}
                for mode in modes:
                    summary = results_by_mode[mode].summary()
                    result["modes"][mode] = summary
                    if progress:
                        _log(f"  [{data.conv}] {mode}: hit@10 {summary['hit@10']:.3f} mrr@10 {summary['mrr@10']:.3f}")

                if sweep:  # untimed: deeper semantic and keyword lists, fused here with other settings
                    lists: list[tuple[list[str], list[str]]] = []
                    for q in queries:
                        pair = []
                        for mode in ("semantic", "keyword"):
                            r = await client.call_tool(
                                "memorize", {"query": q["q"], "limit": SWEEP_DEPTH, "mode": mode}
                            )
                            hits = [] if r.is_error else (r.structured_content or {}).get("results", [])
                            pair.append([memory_to_note.get(h.get("id"), "?") for h in hits])
                        lists.append((pair[0], pair[1]))
                    result["fusion_sweep"] = fusion_sweep(queries, lists)
        finally:
            hub.close()
    result["loadavg"]["end"] = _loadavg()
    return result


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _text_of(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in (result.content or [])]
    return " ".join(p for p in parts if p)[:300] or "(no text)"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- code under test --------------------------------------------------------------------------
def source_fingerprint() -> dict[str, Any]:
    """A hash of the spellbook package's .py files (the code being measured), and its newest mtime."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("spellbook")
    root = Path(spec.origin).parent if spec and spec.origin else None
    if root is None:
        return {"path": None, "sha256": None}
    digest = hashlib.sha256()
    newest = 0.0
    for file in sorted(root.rglob("*.py")):
        digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
        newest = max(newest, file.stat().st_mtime)
    return {
        "path": str(root),
        "sha256": digest.hexdigest()[:16],
        "newest_mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest)),
    }


def import_spellbook() -> dict[str, Any]:
    """Import every spellbook module the run uses now (the engine is otherwise imported lazily when
    the hub opens), so an edit to the package during a long run cannot mix two versions."""
    import importlib

    before = source_fingerprint()
    for name in SPELLBOOK_MODULES:
        importlib.import_module(name)
    after = source_fingerprint()
    if before["sha256"] != after["sha256"]:
        raise SystemExit("spellbook's source changed while it was being imported; run again.")
    return after


# --- output -----------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        info["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        pass
    try:
        from spellbook import __version__

        info["spellbook"] = __version__
    except Exception:
        pass
    return info


def render(result: dict[str, Any], by_category: bool) -> str:
    lines: list[str] = []
    load = result["load"]
    idx = result.get("index", {})
    lines.append(f"== {result['conv']}  ({result['notes']} notes, {result['queries']} queries; {result['source']})")
    lines.append(f"   embedder: {result.get('embedder')}")
    lines.append(
        f"   open {result['open_seconds']:.1f} s; "
        f"load {load['seconds']:.1f} s = {load['notes_per_second']:.1f} notes/s "
        f"(scribe p50 {load['scribe_ms_p50']:.1f} ms, p95 {load['scribe_ms_p95']:.1f} ms, errors {load['errors']})"
    )
    la = result.get("loadavg") or {}
    lines.append(
        f"   1-min load average (CPUs {os.cpu_count()}): start {la.get('start')}, after load {la.get('after_load')}, "
        f"end {la.get('end')}; above the CPU count means other work competed for the CPU and timings are inflated"
    )
    lines.append(
        f"   index: {idx.get('notes')} notes, {idx.get('chunks')} chunks, {idx.get('vectors')} vectors, "
        f"{idx.get('problems_total')} problem(s)"
    )
    header = (
        f"   {'mode':<9} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR@10':>7} "
        f"{'p50 ms':>7} {'p95 ms':>7} {'empty':>5} {'err':>4}"
    )
    lines.append(header)
    lines.append("   " + "-" * (len(header) - 3))
    for mode, s in result["modes"].items():
        lines.append(
            f"   {mode:<9} {s['hit@1']:>6.3f} {s['hit@5']:>6.3f} {s['hit@10']:>6.3f} {s['mrr@10']:>7.3f} "
            f"{s['latency_ms_p50']:>7.1f} {s['latency_ms_p95']:>7.1f} {s['empty_results']:>5} {s['errors']:>4}"
        )
    ref = REFERENCE_BM25.get(result["conv"])
    if ref:
        lines.append(
            f"   {'BM25 ref':<9} {'':>6} {ref[0]:>6.3f} {ref[1]:>6.3f} {ref[2]:>7.3f}   "
            "(plain BM25 on the full set, README)"
        )
    if by_category:
        for mode, s in result["modes"].items():
            cats = s.get("by_category", {})
            if len(cats) <= 1:
                continue
            lines.append(f"   {mode} by category:")
            for cat, c in cats.items():
                lines.append(
                    f"     {cat:<22} n={c['queries']:<4} hit@1 {c['hit@1']:.3f}  "
                    f"hit@5 {c['hit@5']:.3f}  hit@10 {c['hit@10']:.3f}  "
                    f"MRR@10 {c['mrr@10']:.3f}"
                )
    if result.get("fusion_sweep"):
        lines.append(
            f"   fusion sweep (client-side weighted RRF of note-level top-{SWEEP_DEPTH} semantic and keyword lists;"
        )
        lines.append("   a baseline for the server's own hybrid row above; the first row is plain equal-weight RRF):")
        for label, m in result["fusion_sweep"].items():
            lines.append(
                f"   {label:<14} {m['hit@1']:>6.3f} {m['hit@5']:>6.3f} {m['hit@10']:>6.3f} {m['mrr@10']:>7.3f}"
            )
    for mode, s in result["modes"].items():
        for example in s.get("error_examples", []):
            lines.append(f"   ! {mode} error: {example}")
    for example in load.get("error_examples", []):
        lines.append(f"   ! scribe error: {example}")
    return "\n".join(lines)


# --- CLI --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        type=Path,
        metavar="PATH",
        help=f"an eval set (.jsonl or .jsonl.gz); repeatable. Default: {', '.join(str(s) for s in DEFAULT_SETS)}",
    )
    p.add_argument("--embedder", choices=EMBEDDERS, default="use-m3")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of hybrid, semantic, keyword")
    p.add_argument("--limit-queries", type=int, default=None, metavar="N", help="only the first N queries per set")
    p.add_argument(
        "--title-fallback",
        choices=("auto", "id", "none"),
        default="auto",
        help="title for notes without meta.title: the eval note id, or none (Spellbook derives one); "
        "auto (default): none for conversations (an agent passes no such id), id otherwise",
    )
    p.add_argument(
        "--conv-context",
        action="store_true",
        help="store each dialogue turn with the turn before it (same session) quoted below it, as the "
        "system guide asks agents to (docs/search.md); default: the turn alone",
    )
    p.add_argument(
        "--conv-dates",
        action="store_true",
        help="end each conversational note with the day it was said, e.g. '(14 March, 2026)', as the "
        "system guide asks agents to; default: no date",
    )
    p.add_argument("--conv", action="store_true", help="the conversational sets (dev_conv_turns, dev_conv_obs)")
    p.add_argument("--all", action="store_true", help="dev_en, dev_ko and the conversational sets")
    p.add_argument("--by-category", action="store_true", help="also print per-category rows")
    p.add_argument(
        "--fusion-sweep",
        action="store_true",
        help="also compare weighted RRF settings, fused here from deeper semantic + keyword lists",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary after the tables")
    p.add_argument(
        "--json-out",
        type=Path,
        metavar="PATH",
        help="also write the JSON summary to PATH, updated after each set (survives a killed run)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        p.error(f"--modes: unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    args.modes = modes
    if args.limit_queries is not None and args.limit_queries < 1:
        p.error("--limit-queries must be at least 1")
    args.sets = (
        (args.sets or [])
        + (CONV_SETS if args.conv and not args.all else [])
        + (DEFAULT_SETS + CONV_SETS if args.all else [])
    )
    args.sets = args.sets or DEFAULT_SETS
    for s in args.sets:
        if not s.is_file():
            p.error(f"--set {s}: no such file")
    return args


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    code = import_spellbook()
    machine = machine_info()
    print(
        f"machine: {machine.get('cpu_count')} CPUs ({machine.get('cpu_affinity', '?')} usable), "
        f"{machine.get('cpu_model', '?')}; Python {machine['python']}; spellbook {machine.get('spellbook', '?')}"
    )
    print(
        f"embedder setting: {args.embedder}; modes: {', '.join(args.modes)}; top {SEARCH_LIMIT}"
        + (f"; first {args.limit_queries} queries per set" if args.limit_queries else ""),
        flush=True,
    )
    print(f"code: spellbook source sha256 {code['sha256']} (newest file {code.get('newest_mtime')}) at {code['path']}")
    results = []
    combined = []
    for path in args.sets:
        file_results = []
        for data in load_sets(path):
            if not args.quiet:
                _log(f"[{data.conv}] {len(data.notes)} notes, {len(data.queries)} queries from {path}")
            result = await evaluate(
                data,
                args.embedder,
                args.modes,
                args.limit_queries,
                args.title_fallback,
                progress=not args.quiet,
                sweep=args.fusion_sweep,
                conv_context=args.conv_context,
                conv_dates=args.conv_dates,
            )
            print()
            print(render(result, args.by_category), flush=True)
            results.append(result)
            file_results.append(result)
            if args.json_out:
                _write_json(
                    args.json_out,
                    {
                        "machine": machine,
                        "code": code,
                        "embedder_setting": args.embedder,
                        "modes": args.modes,
                        "limit_queries": args.limit_queries,
                        "title_fallback": args.title_fallback,
                        "sets": results,
                        "partial": True,
                    },
                )
        if len(file_results) > 1:
            combined.append(combine(file_results))
            print()
            print(render_combined(combined[-1]), flush=True)
    now = source_fingerprint()
    if now["sha256"] != code["sha256"]:
        print(
            f"note: spellbook's source on disk changed during the run (now {now['sha256']}); "
            f"the numbers above are for {code['sha256']}, the version imported at the start."
        )
    return {
        "machine": machine,
        "code": code,
        "code_at_end": now,
        "embedder_setting": args.embedder,
        "modes": args.modes,
        "limit_queries": args.limit_queries,
        "title_fallback": args.title_fallback,
        "sets": results,
        "conv_context": args.conv_context,
        "conv_dates": args.conv_dates,
        "combined": combined,
    }


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    summary = anyio.run(amain, args)
    if args.json_out:
        _write_json(args.json_out, summary)
    if args.json:
        print()
        print(json.dumps(summary, ensure_ascii=False, indent=2, default=str))
    errors = sum(r["load"]["errors"] + sum(m["errors"] for m in r["modes"].values()) for r in summary["sets"])
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
