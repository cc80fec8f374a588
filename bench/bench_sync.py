"""Sync benchmark: how fast hand edits and a ``git checkout`` storm reach the index.

Runs the real index owner in-process (``spellbook.server.hub.Hub`` with the real watchdog
watcher, the real embedder, Chroma and the SQLite catalog) on throw-away vaults under a temp
folder. It prints figures only; nothing here passes or fails.

    .venv/bin/python bench/bench_sync.py                                  # defaults (use-m3, 1k + 10k, storm)
    .venv/bin/python bench/bench_sync.py --embedder hashing --sizes 500 --edits 20 --skip-storm

Sections:
  1. edit -> searchable: a vault of N hand-written notes (``# Title`` + 2 short paragraphs, a
     unique marker word per note) is indexed by ``hub.start`` (timed: the first index). Then
     ``--edits`` times a random note is rewritten by a plain file write (as an editor saves)
     with a NEW marker, and ``memorize(marker, mode=keyword, limit=1)`` is polled every 10 ms
     until that note is the top hit. The time from the write to that answer is the latency.
     The bench also wraps (in this process only) ``indexer.sync_paths``/``reconcile`` and
     ``embedder.embed_documents`` to split the latency into: write -> the watcher's sync starts
     (event delivery + debounce), the sync itself, and sync end -> found (polling).
  2. git checkout storm: a git repository vault of 2,000 notes; branch ``other`` moves a folder
     of 1,000 notes to another folder, edits 20, deletes 20 and adds 20 notes. With the hub
     watching ``main``, ``git checkout other`` / ``git checkout main`` is run 3 times each way;
     settle time = from starting the checkout until ``check()`` is consistent AND the markers
     expected on that branch (the 20 edited notes, the 20 added/deleted ones, 5 moved notes)
     are the top keyword hit at their path.
  3. machine: cores, embedder id, 1-minute load average at start and end.

The summary is printed at the end and written to ``bench/results/sync_<embedder>.txt`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS_DIR = HERE / "results"
sys.path.insert(0, str(REPO))

from spellbook.config import Settings
from spellbook.index.watcher import DEBOUNCE_SECONDS
from spellbook.server.hub import Hub

SEED = 20241122
POLL_SECONDS = 0.010
EDIT_TIMEOUT = 60.0
SETTLE_TIMEOUT = 600.0
SETTLE_POLL = 0.05

WORDS = [
    "project",
    "meeting",
    "budget",
    "release",
    "schedule",
    "design",
    "review",
    "customer",
    "feedback",
    "server",
    "backup",
    "database",
    "migration",
    "report",
    "invoice",
    "travel",
    "recipe",
    "garden",
    "library",
    "research",
    "paper",
    "draft",
    "outline",
    "interview",
    "hiring",
    "onboarding",
    "roadmap",
    "sprint",
    "retro",
    "incident",
    "outage",
    "alert",
    "dashboard",
    "metric",
    "latency",
    "storage",
    "network",
    "firewall",
    "certificate",
    "renewal",
    "contract",
    "vendor",
    "pricing",
    "forecast",
    "quarter",
    "summary",
    "decision",
    "question",
    "answer",
    "idea",
    "experiment",
    "result",
    "hypothesis",
    "sample",
    "survey",
    "workshop",
    "training",
    "course",
    "lecture",
    "chapter",
    "exercise",
    "practice",
    "habit",
    "morning",
    "evening",
    "weekend",
    "holiday",
    "family",
    "friend",
    "neighbour",
    "kitchen",
    "bicycle",
    "repair",
    "invoice",
    "receipt",
    "warranty",
    "manual",
    "printer",
    "laptop",
    "monitor",
    "keyboard",
    "battery",
    "charger",
    "cable",
    "router",
    "modem",
    "password",
    "account",
    "profile",
    "settings",
    "preference",
    "theme",
    "layout",
    "template",
    "checklist",
    "reminder",
    "deadline",
    "priority",
    "backlog",
    "ticket",
    "issue",
    "patch",
    "upgrade",
    "version",
    "changelog",
    "branch",
    "merge",
    "conflict",
    "rebase",
    "commit",
]


# ============================================================================================
# helpers
# ============================================================================================
def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


def ms(x: float | None) -> str:
    return "   n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 1000:6.0f} ms"


def load1() -> float:
    return os.getloadavg()[0]


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, marker: str | None = None) -> str:
    sentences = [sentence(rng, rng.randint(6, 12)) for _ in range(rng.randint(2, 3))]
    if marker:
        sentences.insert(rng.randint(0, len(sentences)), f"Reference {marker}.")
    return " ".join(sentences)


def note_text(rng: random.Random, title: str, marker: str) -> str:
    return f"# {title}\n\n{paragraph(rng, marker)}\n\n{paragraph(rng)}\n"


def title_for(rng: random.Random, n: int) -> str:
    return f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} {n}"


class CountingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.levelname} {record.name}: {record.getMessage()[:300]}")


# ============================================================================================
# Instrumentation: wraps the owner's indexer and embedder (instance attributes, this process only)
# ============================================================================================
class Probe:
    def __init__(self, engine: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.embedded = 0
        self.active = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        indexer = engine.indexer
        embedder = engine.embedder
        orig_sync, orig_reconcile, orig_embed = indexer.sync_paths, indexer.reconcile, embedder.embed_documents

        def wrap(kind: str, fn: Any) -> Any:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                depth = getattr(self._local, "depth", 0)
                self._local.depth = depth + 1
                with self._lock:
                    self.active += 1
                paths = list(args[0]) if kind == "sync" and args else []
                t0 = time.perf_counter()
                report = None
                try:
                    if kind == "sync":
                        report = fn(paths, *args[1:], **kwargs)
                    else:
                        report = fn(*args, **kwargs)
                    return report
                finally:
                    t1 = time.perf_counter()
                    self._local.depth = depth
                    with self._lock:
                        self.active -= 1
                    self.events.append(
                        {
                            "kind": kind,
                            "t0": t0,
                            "t1": t1,
                            "nested": depth > 0,
                            "paths": paths,
                            "thread": threading.current_thread().name,
                            "embedded": getattr(report, "embedded_chunks", None),
                            "reused": getattr(report, "reused_chunks", None),
                            "indexed": getattr(report, "indexed", None),
                            "removed": getattr(report, "removed", None),
                        }
                    )

            return wrapped

        def embed(texts: Any) -> Any:
            self.embedded += len(texts)
            return orig_embed(texts)

        indexer.sync_paths = wrap("sync", orig_sync)
        indexer.reconcile = wrap("reconcile", orig_reconcile)
        embedder.embed_documents = embed

    def between(self, t0: float, t1: float | None = None) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["t0"] >= t0 and (t1 is None or e["t0"] <= t1)]

    def wait_idle(self, quiet: float = 1.0, timeout: float = 120.0) -> None:
        """Until no sync/reconcile has run for ``quiet`` seconds."""
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            last = max((e["t1"] for e in self.events), default=0.0)
            if self.active == 0 and time.perf_counter() - last >= quiet:
                return
            time.sleep(0.05)


def open_hub(vault: Path, embedder: str) -> tuple[Hub, dict[str, float]]:
    settings = Settings(vault=vault, embedder=embedder, watch=True)
    hub = Hub(settings)
    marks: dict[str, float] = {}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        marks.setdefault("scan_done", now)
        marks["last"] = now
        marks["total"] = total

    marks["start"] = time.perf_counter()
    hub.start(background=False, progress=progress)
    marks["end"] = time.perf_counter()
    return hub, marks


def top_path(hub: Hub, query: str) -> str | None:
    res = hub.call("memorize", {"query": query, "mode": "keyword", "limit": 1})
    hits = res.get("results") or []
    return hits[0]["path"] if hits else None


# ============================================================================================
# 1. edit -> searchable
# ============================================================================================
def build_vault(root: Path, n: int, rng: random.Random, folders: int = 20) -> dict[int, tuple[str, str]]:
    """n notes in `folders` folders; returns n -> (path, title)."""
    notes: dict[int, tuple[str, str]] = {}
    for i in range(n):
        rel = f"area{i % folders:02d}/note-{i:05d}.md"
        title = title_for(rng, i)
        file = root / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(note_text(rng, title, f"mk{i}zz"), encoding="utf-8")
        notes[i] = (rel, title)
    return notes


def bench_edits(base: Path, n: int, edits: int, embedder: str, out: list[str], log_handler: CountingHandler) -> None:
    rng = random.Random(SEED + n)
    vault = base / f"edit-{n}"
    vault.mkdir()
    t = time.perf_counter()
    notes = build_vault(vault, n, rng)
    print(f"[edits {n}] wrote {n} notes in {time.perf_counter() - t:.1f} s; first index...", flush=True)
    load_before = load1()
    hub, marks = open_hub(vault, embedder)
    first = marks["end"] - marks["start"]
    opened = marks.get("scan_done", marks["end"]) - marks["start"]
    try:
        stats = hub.call("stats")
        t = time.perf_counter()
        chk = hub.call("check")
        check_s = time.perf_counter() - t
        # sanity: a few original markers are found at their paths
        sample = rng.sample(sorted(notes), 5)
        found_orig = sum(top_path(hub, f"mk{i}zz") == notes[i][0] for i in sample)
        t = time.perf_counter()
        hub.call("reconcile")
        noop_reconcile_s = time.perf_counter() - t
        print(
            f"[edits {n}] first index {first:.1f} s ({n / first:.1f} notes/s); check {check_s:.2f} s "
            f"consistent={chk['consistent']}; no-op reconcile {noop_reconcile_s:.2f} s",
            flush=True,
        )
        probe = Probe(hub.engine)
        time.sleep(1.0)
        probe.wait_idle(quiet=0.5)

        latencies: list[float] = []
        to_sync: list[float] = []
        sync_dur: list[float] = []
        after_sync: list[float] = []
        syncs_per_edit: list[int] = []
        poll_calls: list[float] = []
        timeouts = 0
        targets = rng.sample(sorted(notes), min(edits, n))
        for k, i in enumerate(targets):
            rel, title = notes[i]
            marker = f"ed{k}x{i}zz"
            text = note_text(rng, title, marker)
            t_write = time.perf_counter()
            with open(vault / rel, "w", encoding="utf-8") as f:  # truncate + write, like an editor save
                f.write(text)
            found_at = None
            while time.perf_counter() - t_write < EDIT_TIMEOUT:
                c0 = time.perf_counter()
                hit = top_path(hub, marker)
                c1 = time.perf_counter()
                poll_calls.append(c1 - c0)
                if hit == rel:
                    found_at = c1
                    break
                time.sleep(POLL_SECONDS)
            if found_at is None:
                timeouts += 1
                print(f"[edits {n}] edit {k}: {rel} not found within {EDIT_TIMEOUT:.0f} s", flush=True)
                probe.wait_idle(quiet=0.5)
                continue
            latencies.append(found_at - t_write)
            syncs = [e for e in probe.between(t_write, found_at) if e["kind"] == "sync" and rel in e["paths"]]
            syncs_per_edit.append(len(syncs))
            if syncs:
                last = syncs[-1]  # the one that made it searchable
                to_sync.append(syncs[0]["t0"] - t_write)
                sync_dur.append(last["t1"] - last["t0"])
                after_sync.append(found_at - last["t1"])
            time.sleep(0.3)  # let trailing events (close_write) drain before the next edit
            probe.wait_idle(quiet=0.3)
        load_after = load1()
        chk_after = hub.call("check")
        stats_after = hub.call("stats")
        threads_used = {e["thread"] for e in probe.events if e["kind"] == "sync"}
        out.append(
            f"1. Edit -> searchable, N={n} hand-written notes "
            f"({edits} edits; load(1m) {load_before:.2f} -> {load_after:.2f})"
        )
        out.append(
            f"   first index (hub.start: open, model load, scan, index) {first:6.1f} s = {n / first:6.1f} notes/s"
            f"   [open+model+scan {opened:.1f} s, indexing {first - opened:.1f} s]"
        )
        out.append(
            f"      -> {stats['notes']} notes, {stats['chunks']} chunks, {stats['vectors']} vectors; "
            f"check(): consistent={chk['consistent']} in {check_s * 1000:.0f} ms; "
            f"original markers found {found_orig}/5; no-op full reconcile {noop_reconcile_s * 1000:.0f} ms"
        )
        if latencies:
            out.append(
                f"   latency write -> top hit   p50 {ms(pct(latencies, 50))}   p95 {ms(pct(latencies, 95))}   "
                f"max {ms(max(latencies))}   mean {ms(statistics.mean(latencies))}   timeouts {timeouts}"
            )
            out.append(
                f"     split (medians): write -> watcher sync starts {ms(pct(to_sync, 50))} "
                f"(p95 {ms(pct(to_sync, 95)).strip()}), sync {ms(pct(sync_dur, 50))} "
                f"(p95 {ms(pct(sync_dur, 95)).strip()}), sync end -> found {ms(pct(after_sync, 50))}"
            )
            out.append(
                f"     syncs touching the edited path before it was found: "
                f"{dict(sorted((x, syncs_per_edit.count(x)) for x in set(syncs_per_edit)))} (count: edits); "
                f"sync threads {sorted(threads_used)}"
            )
            out.append(
                f"     memorize(keyword) poll call p50 {ms(pct(poll_calls, 50))} p95 {ms(pct(poll_calls, 95))} "
                f"({len(poll_calls)} calls); chunks embedded during edits {probe.embedded}"
            )
        else:
            out.append(f"   no edit became searchable (timeouts {timeouts})")
        out.append(
            f"   after: check consistent={chk_after['consistent']} counts={chk_after['counts']}; "
            f"notes {stats_after['notes']} chunks {stats_after['chunks']} vectors {stats_after['vectors']}"
        )
    finally:
        hub.close()
    print("\n".join(out[-8:]), flush=True)


# ============================================================================================
# 2. git checkout storm
# ============================================================================================
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )


def bench_storm(base: Path, embedder: str, out: list[str], rounds: int = 3) -> None:
    rng = random.Random(SEED)
    vault = base / "storm"
    vault.mkdir()
    per = 1000
    main_notes: dict[str, tuple[str, str]] = {}  # path -> (title, marker) on main
    for i in range(2 * per):
        folder = "alpha" if i < per else "beta"
        rel = f"{folder}/sub{(i % per) // 100}/note-{i:05d}.md"
        title = title_for(rng, i)
        marker = f"mk{i}zz"
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(note_text(rng, title, marker), encoding="utf-8")
        main_notes[rel] = (title, marker)
    (vault / ".gitignore").write_text(".spellbook/\n")
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", "main: 2000 notes")
    # branch other: move alpha -> gamma/alpha (1000 notes), edit 20, delete 20, add 20 (in beta)
    git(vault, "checkout", "-q", "-b", "other")
    git(vault, "mv", "alpha", "gamma")
    beta = sorted(p for p in main_notes if p.startswith("beta/"))
    picked = rng.sample(beta, 40)
    edited, deleted = picked[:20], picked[20:]
    other_markers: dict[str, str] = {}
    for k, rel in enumerate(edited):
        marker = f"br{k}x{rel[-8:-3]}zz"
        (vault / rel).write_text(note_text(rng, main_notes[rel][0], marker), encoding="utf-8")
        other_markers[rel] = marker
    for rel in deleted:
        (vault / rel).unlink()
    added: dict[str, str] = {}
    for k in range(20):
        rel = f"beta/new/added-{k:02d}.md"
        marker = f"add{k}zz"
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(note_text(rng, f"Added note {k}", marker), encoding="utf-8")
        added[rel] = marker
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", "other: move alpha, edit 20, delete 20, add 20")
    diff = git(vault, "diff", "--shortstat", "main", "other").stdout.strip()
    git(vault, "checkout", "-q", "main")

    moved_sample = rng.sample(sorted(p for p in main_notes if p.startswith("alpha/")), 5)
    # probes: query -> expected top path, per branch
    probes = {
        "other": {
            **{m: p for p, m in other_markers.items()},
            **{m: p for p, m in added.items()},
            **{main_notes[p][1]: "gamma/" + p[len("alpha/") :] for p in moved_sample},
        },
        "main": {
            **{main_notes[p][1]: p for p in edited},
            **{main_notes[p][1]: p for p in deleted},
            **{main_notes[p][1]: p for p in moved_sample},
        },
    }
    print(f"[storm] repo ready ({diff}); first index of 2000 notes...", flush=True)
    hub, marks = open_hub(vault, embedder)
    first = marks["end"] - marks["start"]
    try:
        chk = hub.call("check")
        stats0 = hub.call("stats")
        t = time.perf_counter()
        hub.call("reconcile")
        noop_reconcile = time.perf_counter() - t
        probe = Probe(hub.engine)
        probe.wait_idle(quiet=0.5)
        out.append(
            f"2. git checkout storm (2000-note git vault; branch other: {diff}; "
            "alpha/ (1000 notes) moved to gamma/, 20 edited, 20 deleted, 20 added)"
        )
        out.append(
            f"   first index {first:.1f} s ({2000 / first:.1f} notes/s); consistent={chk['consistent']}; "
            f"{stats0['chunks']} chunks / {stats0['vectors']} vectors; "
            f"no-op full reconcile {noop_reconcile * 1000:.0f} ms"
        )
        out.append(
            "   (times from the start of `git checkout`: settled = check() consistent AND every probe marker is the"
            " top keyword hit at its path; probes-found = the probes alone; watcher-done = end of the last"
            " reconcile/sync; embedded = chunks sent to the embedder; reused = chunks given an existing vector;"
            " check() = median duration of the check() calls made while polling)"
        )
        out.append(
            "   checkout     settled   git  probes-found  watcher-done  reconciles(time)  syncs  "
            "embedded reused   check()   load1"
        )
        branch = "main"
        settles: list[float] = []
        for r in range(rounds * 2):
            target = "other" if branch == "main" else "main"
            before = hub.call("stats")
            emb0 = probe.embedded
            t0 = time.perf_counter()
            git(vault, "checkout", "-q", target)
            t_git = time.perf_counter() - t0
            t_found = t_settled = None
            check_times: list[float] = []
            polls = 0
            queries = list(probes[target].items())  # moved-note probes last: all() stops at the first miss
            while time.perf_counter() - t0 < SETTLE_TIMEOUT:
                polls += 1
                if t_found is None and all(top_path(hub, q) == p for q, p in queries):
                    t_found = time.perf_counter() - t0
                if t_found is not None:
                    c0 = time.perf_counter()
                    c = hub.call("check")
                    check_times.append(time.perf_counter() - c0)
                    if c["consistent"] and all(top_path(hub, q) == p for q, p in queries):
                        t_settled = time.perf_counter() - t0
                        break
                time.sleep(SETTLE_POLL)
            t_end = time.perf_counter()
            probe.wait_idle(quiet=1.0)
            evs = probe.between(t0)
            recs = [e for e in evs if e["kind"] == "reconcile" and not e["nested"]]
            syncs = [e for e in evs if e["kind"] == "sync" and not e["nested"]]
            top = recs + syncs
            after = hub.call("stats")
            settle = t_settled if t_settled is not None else float("nan")
            work_done = max((e["t1"] for e in top), default=t0) - t0
            settles.append(settle)
            rec_time = sum(e["t1"] - e["t0"] for e in recs)
            reused = sum(e["reused"] or 0 for e in top)
            embedded_rep = sum(e["embedded"] or 0 for e in top)
            line = (
                f"   {branch:>5}->{target:<5} {settle:6.2f} s {t_git:5.2f} s  "
                f"{(t_found or float('nan')):8.2f} s  {work_done:8.2f} s     "
                f"{len(recs):2d} ({rec_time:5.2f} s)      {len(syncs):3d}   "
                f"{probe.embedded - emb0:5d} {reused:6d}   {ms(pct(check_times, 50))}  {load1():.2f}"
            )
            out.append(line)
            print(line, flush=True)
            timeline = ", ".join(
                f"{e['kind']}[{e['thread']}] {e['t0'] - t0:.2f}-{e['t1'] - t0:.2f}s"
                f" (idx {e['indexed']}, rm {e['removed']}, emb {e['embedded']})"
                for e in sorted(top, key=lambda e: e["t0"])[:8]
            )
            out.append(
                f"      timeline: {timeline}{' ...' if len(top) > 8 else ''}; polls {polls}; "
                f"chunks {before['chunks']}->{after['chunks']} vectors {before['vectors']}->{after['vectors']}"
                f"{'' if embedded_rep == probe.embedded - emb0 else f' (reports say {embedded_rep} embedded)'}"
                f"{'' if t_settled is not None else f'; NOT SETTLED after {t_end - t0:.0f} s'}"
            )
            branch = target
        good = [s for s in settles if not math.isnan(s)]
        if good:
            out.append(
                f"   settle time: median {statistics.median(good):.2f} s, "
                f"max {max(good):.2f} s over {len(settles)} checkouts"
            )
        final = hub.call("check")
        out.append(f"   final check: consistent={final['consistent']} counts={final['counts']}")
    finally:
        hub.close()


# ============================================================================================
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="use-m3", choices=["use-m3", "minilm", "ollama", "hashing"])
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated vault sizes for the edit latency test")
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--skip-storm", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temp vaults")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = CountingHandler()
    logging.getLogger().addHandler(handler)

    load_start = load1()
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="spellbook-bench-sync-"))
    body: list[str] = []
    embedder_id = "?"
    try:
        for n in sizes:
            bench_edits(base, n, args.edits, args.embedder, body, handler)
        if not args.skip_storm:
            bench_storm(base, args.embedder, body)
        # embedder id: from a tiny vault (cheap) so it is known even if a section failed
        tiny = base / "tiny"
        tiny.mkdir()
        (tiny / "a.md").write_text("# A\n\nhello\n")
        hub, _ = open_hub(tiny, args.embedder)
        try:
            embedder_id = hub.call("stats")["embedder"]
        finally:
            hub.close()
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    load_end = load1()
    total = time.perf_counter() - started

    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    bar = "=" * 100
    head = [
        bar,
        (
            f"Spellbook sync benchmark  embedder={args.embedder} ({embedder_id})  sizes={sizes}  edits={args.edits}"
            f"  storm={'no' if args.skip_storm else 'yes'}"
        ),
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.platform()}  python {platform.python_version()}",
        (
            f"machine: {os.cpu_count()} cores ({cpu_model}); "
            f"load(1m) at start {load_start:.2f}, at end {load_end:.2f}; "
            f"total {total / 60:.1f} min"
        ),
        "NOTE: other work may be running on this shared 2-core box; figures include that contention.",
        (
            f"watcher debounce {DEBOUNCE_SECONDS} s (index/watcher.py); poll every "
            f"{POLL_SECONDS * 1000:.0f} ms (edits) / {SETTLE_POLL * 1000:.0f} ms + check() (storm); "
            "hub in-process, watch=True"
        ),
        bar,
    ]
    tail = [f"Warnings/errors logged: {len(handler.records)}"] + [f"   {r}" for r in handler.records[:15]] + [bar]
    summary = "\n".join(head + body + tail)
    print("\n" + summary)
    out = args.out or RESULTS_DIR / f"sync_{args.embedder}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(summary + "\n", encoding="utf-8")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
