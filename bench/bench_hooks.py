"""Hook latency: SessionStart context, UserPromptSubmit recall, and capture of a 200-turn transcript,
each with a server already owning the index and without one (the hook then opens the index itself).

    PYTHONPATH=. .venv/bin/python bench/bench_hooks.py [--embedder use-m3|hashing] [--runs 10]

Every figure is the wall time of the whole `spellbook hook ...` process, as Claude Code waits for
it (Python start-up and imports included). For SessionEnd that is the hook itself (it hands the
capture to a detached process) and, separately, the capture process it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spellbook.sessions.digest import digest
from spellbook.sessions.quoting import estimate_tokens
from spellbook.sessions.transcript import read_transcript
from tests.helpers.sessions import TASKS, make_transcript

SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))
# Questions that name the tools the vault's sessions name (React, Redis, Postgres, Kubernetes...) but
# ask about none of its work: the bar's test for a question naming what the passages name.
NAMING = [
    "How do I write a custom hook in React?",
    "What is the difference between Redis lists and streams?",
    "Does Postgres support partial indexes on JSON columns?",
    "How do I query DynamoDB by a secondary index?",
    "What's the best way to paginate results in Postgres?",
    "How do Kubernetes readiness probes differ from liveness probes?",
    "Can ArgoCD deploy Helm charts from a private repo?",
    "Why would Loki drop log lines with high-cardinality labels?",
    "How do I convert a PNG to WebP with Pillow?",
    "Is Redis pub/sub reliable for job queues?",
    "What does useEffect cleanup do in React?",
    "How do I set resource limits for a Kubernetes CronJob?",
    "Which Postgres isolation level prevents phantom reads?",
    "How do I run Promtail as a DaemonSet?",
    "Should I use DynamoDB or Postgres for a leaderboard?",
    "How can I mock Redis in pytest?",
    "What's new in React Server Components?",
    "How does ArgoCD handle sync waves?",
    "Can Pillow read HEIC images?",
    "Why is my Kubernetes pod stuck in CrashLoopBackOff?",
]


CPU: list[float] = []  # CPU ms (user + sys) of each timed process: less sensitive to a busy machine


def timed(args: list[str], payload: dict, env: dict) -> tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        args, input=json.dumps(payload).encode(), capture_output=True, env=env, timeout=600, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
    return (time.perf_counter() - started) * 1000, result.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_owner(vault: Path, proc: subprocess.Popen, env: dict) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        result = subprocess.run(
            [SPELLBOOK, "stats", "--vault", str(vault), "--json"], capture_output=True, env=env, check=False
        )
        if result.returncode == 0 and json.loads(result.stdout).get("state") == "ready":
            return
        if proc.poll() is not None:
            raise SystemExit("the server exited")
        time.sleep(0.5)
    raise SystemExit("the server did not become ready")


def summary(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"p50 {statistics.median(values):.0f} ms, p95 {p95:.0f} ms, min {values[0]:.0f} ms (n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default="use-m3")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=30, help="captured sessions already in the vault")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-hooks-"))
    vault, project = tmp / "vault", tmp / "shop"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_")}
    env.update(SPELLBOOK_EMBEDDER=opts.embedder, PYTHONPATH=str(ROOT))
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    capture_cmd = [SPELLBOOK, "hook", "capture", "--vault", str(vault)]
    for n in range(opts.sessions):
        file, sid, _ = make_transcript(tmp, str(project), 12, seed=100 + n)
        timed(capture_cmd, {"session_id": sid, "transcript_path": str(file), "cwd": str(project)}, env)
    big, big_id, _ = make_transcript(tmp, str(project), 200, seed=7)
    big_payload = {"session_id": big_id, "transcript_path": str(big), "cwd": str(project)}
    start_cmd = [SPELLBOOK, "hook", "SessionStart", "--vault", str(vault)]
    start_payload = {"session_id": "bench", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    print(
        f"vault: {opts.sessions} captured sessions of 12 turns + template; embedder {opts.embedder}; "
        f"200-turn transcript {big.stat().st_size // 1024} KiB"
    )
    parsed = read_transcript(big)
    took = []
    for _ in range(5):
        started = time.perf_counter()
        digest(parsed)
        took.append((time.perf_counter() - started) * 1000)

    rows: list[tuple[str, str]] = [("digest of the 200-turn transcript (in process)", summary(took))]
    no_server = [timed(start_cmd, start_payload, env) for _ in range(max(3, opts.runs // 3))]
    assert no_server[-1][1].startswith(b"<spellbook-memory>"), no_server[-1][1][:200]
    rows.append(("SessionStart, no server", summary([t for t, _ in no_server])))
    cap = [timed(capture_cmd, {**big_payload, "session_id": f"{big_id}-{i}"}, env)[0] for i in range(3)]
    rows.append(("capture 200 turns (worker), no server", summary(cap)))

    server = subprocess.Popen(
        [SPELLBOOK, "serve", "--http", "--port", str(free_port()), "--vault", str(vault)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_owner(vault, server, env)
        timed(start_cmd, start_payload, env)  # warm the server's caches once
        CPU.clear()
        with_server = [timed(start_cmd, start_payload, env) for _ in range(opts.runs)]
        tokens = estimate_tokens(with_server[-1][1].decode())
        rows.append(
            (
                "SessionStart, server running",
                summary([t for t, _ in with_server]) + f", ~{tokens} tokens; CPU p50 {statistics.median(CPU):.0f} ms",
            )
        )
        prompt_cmd = [SPELLBOOK, "hook", "UserPromptSubmit", "--vault", str(vault), "--prompt-recall"]
        CPU.clear()
        prompts = [
            timed(
                prompt_cmd,
                {
                    "session_id": "bench",
                    "cwd": str(project),
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": TASKS[i % len(TASKS)][3],
                },
                env,
            )
            for i in range(max(opts.runs, 12))
        ]
        given = sum(1 for _, out in prompts if out.startswith(b"<spellbook-memory>"))
        rows.append(
            (
                "UserPromptSubmit recall, server running",
                summary([t for t, _ in prompts])
                + f", {given}/{len(prompts)} given passages; CPU p50 {statistics.median(CPU):.0f} ms",
            )
        )
        from bench.eval_sessions import UNRELATED

        other = [
            timed(prompt_cmd, {"session_id": "bench", "cwd": str(project), "prompt": p}, env)[1] for p in UNRELATED
        ]
        given_to = [p for p, out in zip(UNRELATED, other) if out]
        rows.append(
            (
                "UserPromptSubmit, coding prompts on no task here",
                f"{len(given_to)}/{len(other)} "
                "given passages (bench/eval_sessions.py's unrelated prompts)" + "".join(f"; {p!r}" for p in given_to),
            )
        )
        naming = [timed(prompt_cmd, {"session_id": "bench", "cwd": str(project), "prompt": p}, env)[1] for p in NAMING]
        given_to = [p for p, out in zip(NAMING, naming) if out]
        rows.append(
            (
                "UserPromptSubmit, questions naming the vault's tools, on no task here",
                f"{len(given_to)}/{len(naming)} given passages" + "".join(f"; {p!r}" for p in given_to),
            )
        )
        cap = [timed(capture_cmd, {**big_payload, "session_id": f"{big_id}-s{i}"}, env)[0] for i in range(3)]
        rows.append(("capture 200 turns (worker), server running", summary(cap)))
        end_cmd = [SPELLBOOK, "hook", "SessionEnd", "--vault", str(vault)]
        ends = [
            timed(end_cmd, {**big_payload, "session_id": f"{big_id}-e{i}", "hook_event_name": "SessionEnd"}, env)[0]
            for i in range(opts.runs)
        ]
        rows.append(("SessionEnd hook (hands off, returns)", summary(ends)))
        time.sleep(20)  # let the detached captures finish before the server stops
    finally:
        server.terminate()
        server.wait(timeout=60)
    modules = "import spellbook.cli, spellbook.server.hub, spellbook.sessions.briefing"
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", modules], capture_output=True, text=True, env=env, check=False
    ).stderr
    top = sorted(
        (line for line in imports.splitlines() if "|" in line and "cumulative" not in line),
        key=lambda line: -int(line.split("|")[1]),
    )[:6]
    bare = statistics.median(timed([sys.executable, "-c", "pass"], {}, env)[0] for _ in range(5))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, value in rows:
        print(f"{name:45s} {value}")
    print(f"{'python -c pass':45s} p50 {bare:.0f} ms")
    print("heaviest imports on the hook's path (self us | cumulative us | module):")
    print("\n".join("  " + line.replace("import time:", "").strip() for line in top))


if __name__ == "__main__":
    main()
