"""Which granularity finds a past answer better: one note per session (a section per event), or
one note per exchange (prompt + tools + answer)? Same transcripts, same engine, two vaults.

    PYTHONPATH=. .venv/bin/python bench/bench_session_granularity.py [--embedder use-m3] [--sessions 12]

Transcripts come from tests/helpers/sessions.py: each exchange is a concrete task whose answer holds
a fact; the queries are the questions those answers settle, worded differently ("which port does
billing use on staging"). A query succeeds at k when one of the top k hits shows the section that
points at the right exchange (exchange@k: its prompt, tools or answer section; for per-exchange notes,
the note) and, stricter, when that hit's section is the answer itself (answer@k).
Also reported: files written, time to write them, and search time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spellbook.config import Settings
from spellbook.server.hub import Hub
from spellbook.sessions.capture import capture
from spellbook.sessions.notes import _exchange_md, gist, render_session
from spellbook.sessions.transcript import read_transcript
from spellbook.vault.template import init_vault
from tests.helpers.sessions import TASKS, make_transcript


def per_exchange(hub: Hub, session) -> None:
    base = render_session(session)[0].fields
    for n, x in enumerate(session.exchanges, 1):
        title = f"{(x.prompt_time or '')[:10]} {gist(x.prompt, 50)} ({session.session_id[:8]} #{n})"
        hub.call("scribe", {"text": _exchange_md(x), "title": title, **base})


def evaluate(hub: Hub, k_values=(1, 3, 5), spec: dict | None = None) -> dict[str, float]:
    """exchange@k: a top-k hit points at an exchange of the right task (its section, or for
    per-exchange notes the note); answer@k: the hit's section is that task's answer."""
    exchange_at = {k: 0 for k in k_values}
    answer_at = {k: 0 for k in k_values}
    times: list[float] = []
    for prompt, _, answer, question in TASKS:
        started = time.perf_counter()
        found = hub.call("memorize", {"query": question, "limit": max(k_values), **({"filter": spec} if spec else {})})["results"]
        times.append((time.perf_counter() - started) * 1000)
        marks = (gist(prompt)[:30], gist(answer)[:30])
        heading = [h.get("heading") or "" for h in found]
        right = [i for i, h in enumerate(found)
                 if any(m in heading[i] for m in marks) or gist(prompt, 50)[:30] in h["title"]]
        answers = [i for i in range(len(found))  # a response section is headed by the prompt it answers
                   if heading[i].startswith("response") and marks[0] in heading[i]]
        for k in k_values:
            exchange_at[k] += bool(right and right[0] < k)
            answer_at[k] += bool(answers and answers[0] < k)
    n = len(TASKS)
    return {**{f"exchange@{k}": exchange_at[k] / n for k in k_values},
            **{f"answer@{k}": answer_at[k] / n for k in k_values}, "memorize p50 ms": statistics.median(times)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default="use-m3")
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--turns", type=int, default=25)
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-granularity-"))
    transcripts = [make_transcript(tmp, "/work/shop", opts.turns, seed=500 + i)[0] for i in range(opts.sessions)]
    print(f"{opts.sessions} sessions x {opts.turns} exchanges; {len(TASKS)} questions; embedder {opts.embedder}")
    for name in ("one note per session", "one note per exchange"):
        vault = tmp / name.replace(" ", "-")
        init_vault(vault)
        hub = Hub(Settings(vault=vault, embedder=opts.embedder, watch=False), watch=False)
        hub.start(background=False)
        try:
            started = time.perf_counter()
            for file in transcripts:
                session = read_transcript(file)
                if "session" in name.split()[-1]:
                    capture(hub, session, tmp / "locks" / name)
                else:
                    per_exchange(hub, session)
            seconds = time.perf_counter() - started
            files = len(list((vault / "sessions").rglob("*.md")))
            result = evaluate(hub)
            answers = evaluate(hub, spec={"event_type": "response"})
        finally:
            hub.close()
        figures = ", ".join(f"{k} {v:.2f}" for k, v in result.items())
        print(f"{name:24s} {files:4d} files, written in {seconds:.1f} s; {figures}")
        figures = ", ".join(f"{k} {v:.2f}" for k, v in answers.items() if k.startswith("answer"))
        print(f"{'':24s} with filter event_type=response: {figures}")


if __name__ == "__main__":
    main()
