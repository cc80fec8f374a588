"""How fast each page of the web view answers on a large vault (target: under 300 ms each).

Builds a vault of ``--notes`` generated notes (tests/helpers/web.py: categories, topics, tags,
wikilinks and typed relations; made-up words so notes differ like real ones), commits it to git,
starts a real ``spellbook ui --no-browser`` on it (hashing embedder unless ``--embedder``), waits
for the first index build, then asks each page ``--rounds`` times over HTTP (bearer token, as a
signed-in browser would) and prints the first answer and p50/p95 of the rest, with the page size.

The graph page is measured unfiltered (sampled to its 1,500 most-linked memories above that size:
engine/graph.py) and filtered to one category. The Memory page includes git history.

    .venv/bin/python bench/bench_web.py [--notes 10000] [--rounds 20] [--embedder hashing] [--keep DIR]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.git import git
from tests.helpers.web import base_of, start_ui, stop_ui, token_of, write_vault

TARGET_MS = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the vault here instead of a temp folder")
    args = parser.parse_args()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-web-"))
    vault = workdir / "vault"
    started = time.perf_counter()
    if not (vault / ".git").exists():
        vault.mkdir(parents=True, exist_ok=True)
        notes = write_vault(vault, args.notes)
        git(vault, "init", "-q")
        git(vault, "add", "-A")
        git(vault, "commit", "-qm", "generated vault")
        print(f"vault: {len(notes):,} notes written and committed in {time.perf_counter() - started:.1f} s")
    proc, address = start_ui(vault, "--embedder", args.embedder, "--no-watch")
    base, token = base_of(address), token_of(vault)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx2.Client(base_url=base, headers=headers, timeout=600) as http:
            started = time.perf_counter()
            while ">ready<" not in http.get("/").text:
                time.sleep(1)
            print(f"index: ready {time.perf_counter() - started:.1f} s after the server answered")
            first = min((vault / "ops" / "deploy").glob("*.md"))  # a note with its git history
            note_id = first.read_text(encoding="utf-8").split("id: ", 1)[1].split("\n", 1)[0]
            pages = {
                "overview": "/",
                "activity": "/activity",
                "search": "/search?q=canary+rollback+release",
                "search (filtered)": "/search?q=backup+snapshot&category=ops&tag=infra",
                "memory": f"/memory/{note_id}",
                "graph": "/graph",
                "graph (one category)": "/graph?category=ops",
                "care": "/care",
            }
            print(
                f"\n{'page':22} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'KB':>6}  (rounds {args.rounds}, "
                f"target < {TARGET_MS:.0f} ms)"
            )
            slow = []
            for name, path in pages.items():
                first_ms, times, size = _measure(http, path, args.rounds)
                p50, p95 = statistics.median(times), _p95(times)
                flag = "" if p95 < TARGET_MS else "  SLOW"
                if flag:
                    slow.append(name)
                print(f"{name:22} {first_ms:9.1f} {p50:8.1f} {p95:8.1f} {size / 1024:6.0f}{flag}")
            print(
                "\nright after a write (scribe over MCP): the page shows the kept answer (minus notes gone since), "
                "marked 'As of N s ago', while the owner makes the fresh one"
            )
            for name, path in (("care", "/care"), ("graph", "/graph"), ("overview", "/")):
                anyio.run(_scribe, f"{base}/mcp", token, name)
                t = time.perf_counter()
                page = http.get(path).text
                print(
                    f"{name:22} {(time.perf_counter() - t) * 1000:9.1f} ms  {'(As of ...)' if 'As of' in page else ''}"
                )
            anyio.run(_scribe, f"{base}/mcp", token, "refresh")
            time.sleep(12)  # the owner's loop recomputes what was viewed (engine/memo.py)
            print("12 s after a write (the owner's loop has recomputed them: fresh answers, no 'As of')")
            for name, path in (("care", "/care"), ("graph", "/graph")):
                t = time.perf_counter()
                page = http.get(path).text
                print(
                    f"{name:22} {(time.perf_counter() - t) * 1000:9.1f} ms  {'(As of ...)' if 'As of' in page else ''}"
                )
            graph = http.get("/graph").text
            summary = graph.split("id=graph-summary>", 1)[1].split("</p>", 1)[0]
            print(f"\ngraph: {summary}")
    finally:
        stop_ui(proc)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{platform.processor() or platform.machine()}, {platform.python_version()}, embedder {args.embedder}, "
        f"{args.notes:,} notes"
    )
    if slow:
        print(f"over the target: {', '.join(slow)}")
    return 1 if slow else 0


async def _scribe(url: str, token: str, what: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        done = await client.call_tool("scribe", {"text": f"Bench write before {what}.", "title": f"Bench {what}"})
        assert not done.is_error, done


def _measure(http: httpx2.Client, path: str, rounds: int) -> tuple[float, list[float], int]:
    def once() -> tuple[float, int]:
        t = time.perf_counter()
        answer = http.get(path)
        ms = (time.perf_counter() - t) * 1000
        if answer.status_code != 200:
            raise SystemExit(f"{path} answered {answer.status_code}: {answer.text[:300]}")
        return ms, len(answer.content)

    first, size = once()
    return first, [once()[0] for _ in range(rounds)], size


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


if __name__ == "__main__":
    sys.exit(main())
