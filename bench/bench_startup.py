"""What each start-up trick buys (spellbook/startup/): start-up time and memory with every trick on,
with all off (SPELLBOOK_PLAIN_START=1), and with each one off alone.

    .venv/bin/python bench/bench_startup.py                 # 300 notes, 7 rounds
    .venv/bin/python bench/bench_startup.py --rounds 3 --notes 100

A vault of ``--notes`` notes is indexed once; then each round runs every configuration once, in
a shuffled order (the machine is shared: the A/B runs are interleaved and medians reported):

  serve  ``spellbook serve`` over raw stdio pipes with the default model: process start -> the
         ``tools/list`` answer (after ``initialize``), -> the first hybrid ``memorize`` answer (the
         engine and the model loaded), then one ``scribe`` (which opens Chroma for its write) and,
         a second later, the server's CPU time so far, its VmRSS and its peak (VmHWM).
  index  ``spellbook index --rebuild`` of the vault: process start -> exit, its CPU time and peak
         memory (the command's rusage from wait4).

One warm-up run per configuration comes first and is not counted (the handshake cache, the page
cache). Prints a table; nothing passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_core import SPELLBOOK_BIN, compile_package, proc_cpu, proc_status

SERVE = ["", "1", "front", "deferred", "chroma_local", "heap", "blas"]
INDEX = ["", "1", "chroma_local", "heap", "blas"]
WORDS = [
    "deploy",
    "pipeline",
    "rollback",
    "canary",
    "release",
    "cache",
    "eviction",
    "queue",
    "retry",
    "budget",
    "schema",
    "migration",
    "index",
    "vector",
    "search",
    "latency",
    "owner",
    "follower",
    "vault",
    "note",
    "link",
    "merge",
    "archive",
    "topic",
]


def make_vault(folder: Path, notes: int) -> None:
    rng = random.Random(7)
    for n in range(notes):
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
        (folder / f"topic{n % 12}").mkdir(parents=True, exist_ok=True)
        (folder / f"topic{n % 12}" / f"Note {n}.md").write_text(f"# Note {n}\n\n{body}.\n", encoding="utf-8")


def env_for(value: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_")}
    env["SPELLBOOK_PLAIN_START"] = value
    return env


def serve_once(vault: Path, value: str, errlog: Path) -> dict[str, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [SPELLBOOK_BIN, "serve", "--vault", str(vault), "--no-watch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog.open("a"),
        env=env_for(value),
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(id_: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == id_:
                return message

    try:
        ask(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-startup", "version": "1"},
            },
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        ask(2, "tools/list", {})
        listed = time.perf_counter() - started
        found = ask(3, "tools/call", {"name": "memorize", "arguments": {"query": "canary rollback latency"}})
        assert not found["result"].get("isError"), found
        called = time.perf_counter() - started
        wrote = time.perf_counter()
        scribed = ask(4, "tools/call", {"name": "scribe", "arguments": {"text": "The canary rolls back at 2% errors."}})
        assert not scribed["result"].get("isError"), scribed
        wrote = time.perf_counter() - wrote
        time.sleep(1.0)  # the vector writer puts it in Chroma, opened for it
        status, cpu = proc_status(proc.pid), proc_cpu(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return {
        "list_ms": listed * 1000,
        "call_ms": called * 1000,
        "scribe_ms": wrote * 1000,
        "cpu_ms": cpu * 1000,
        "rss_mb": status["VmRSS"] / 1024,
        "peak_mb": status["VmHWM"] / 1024,
    }


def index_once(vault: Path, value: str, errlog: Path) -> dict[str, float]:
    started = time.perf_counter()
    with errlog.open("a") as err:
        pid = subprocess.Popen(
            [SPELLBOOK_BIN, "index", "--vault", str(vault), "--rebuild"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env_for(value),
        ).pid
        _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"index failed: see {errlog}"
    return {
        "exit_ms": (time.perf_counter() - started) * 1000,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
        "peak_mb": usage.ru_maxrss / 1024,
    }


def name(value: str) -> str:
    return {"": "all tricks on", "1": "plain (all off)"}.get(value, f"{value} off")[:30]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=["serve", "index"], help="one of the two sections")
    parser.add_argument(
        "--values",
        nargs="+",
        metavar="VALUE",
        help="SPELLBOOK_PLAIN_START values to compare instead of the section's list ('' = all on)",
    )
    args = parser.parse_args()
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    vault, errlog = work / "vault", work / "stderr.log"
    make_vault(vault, args.notes)
    subprocess.run([SPELLBOOK_BIN, "index", "--vault", str(vault)], check=True, capture_output=True, env=env_for(""))
    sections = [("serve", SERVE, serve_once), ("index", INDEX, index_once)]
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for section, values, once in sections:
        if args.only and section != args.only:
            continue
        values = args.values or values
        for value in values:
            once(vault, value, errlog)  # warm-up
        for _ in range(args.rounds):
            for value in random.sample(values, len(values)):
                runs.setdefault((section, value), []).append(once(vault, value, errlog))
        if section == "index":  # leave the vault indexed as it was
            subprocess.run(
                [SPELLBOOK_BIN, "index", "--vault", str(vault)], check=True, capture_output=True, env=env_for("")
            )
    print(
        f"bench_startup: {args.notes} notes, {args.rounds} rounds (medians), {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    for (section, value), got in runs.items():
        med = {key: statistics.median(r[key] for r in got) for key in got[0]}
        print(
            f"  {section:5s} {name(value):30s} "
            + "  ".join(f"{key} {v:7.0f}" if key.endswith("ms") else f"{key} {v:5.0f}" for key, v in med.items())
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
