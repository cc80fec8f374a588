"""Does SessionStart carry what the next session must know? Three projects of eight realistic coding
sessions (tests/helpers/coding_sessions.py) are captured through the real capture path, in a shuffled
order (captured is not when it happened), with the memories the agent scribed in them; then each
project's SessionStart text is scored against its probe questions: the current answer must be in
it, an old value never shown as current, a resolved item never listed as open. With ``--prompts``,
each probe question is also typed as a prompt (what the UserPromptSubmit hook injects, 600 tokens):
the probe counts when every expected word is in the injection, and a changed value's old one must
come after the new one and say that it changed.

    PYTHONPATH=. .venv/bin/python bench/eval_briefing.py [--embedder hashing|use-m3] [--budget 1500] [--show]
        [--prompts]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spellbook.config import Settings
from spellbook.server.hub import Hub
from spellbook.sessions.quoting import estimate_tokens
from spellbook.vault.template import init_vault
from tests.helpers.coding_sessions import HELD_OUT, PROBES, PROBES_HELD_OUT, PROJECTS, capture_projects, score

try:
    from spellbook.sessions.briefing import session_context
except ImportError:  # before the briefing module existed
    from spellbook.sessions.recall import session_context  # type: ignore[no-redef]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--budget", type=int, default=1_500)
    ap.add_argument("--show", action="store_true", help="print each project's SessionStart text")
    ap.add_argument("--prompts", action="store_true", help="also type each probe question as a prompt")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="eval-briefing-"))
    vault = tmp / "vault"
    init_vault(vault)
    hub = Hub(Settings(vault=vault, embedder=opts.embedder, watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    try:
        capture_projects(hub, tmp, PROJECTS + HELD_OUT)
        for label, projects, probes in (("all", PROJECTS, PROBES), ("held-out", HELD_OUT, PROBES_HELD_OUT)):
            total = answered = 0
            for project in projects:
                started = time.perf_counter()
                text = session_context(hub, project.name, None, opts.budget, semantic=True)
                took = (time.perf_counter() - started) * 1000
                got, faults = score(text, probes[project.name])
                total += len(probes[project.name])
                answered += len(got)
                print(
                    f"{project.name:6s} {len(got)}/{len(probes[project.name])} probes, {len(text)} chars, "
                    f"~{estimate_tokens(text)} tokens of {opts.budget}, {took:.0f} ms in process"
                )
                for probe in probes[project.name]:
                    print(f"  {'yes' if probe in got else 'no '}  {probe.question}")
                for fault in faults:
                    print(f"  fault: {fault}")
                if opts.show:
                    print(text)
            print(f"{label}: {answered}/{total} probes answered ({answered / total:.0%}); embedder {opts.embedder}")
            if opts.prompts:
                prompts(hub, projects, probes)
    finally:
        hub.close()


def prompts(hub: Hub, projects: list, probes: dict) -> None:
    """Each probe question as the next prompt: is the answer in what the hook injects, and does a
    changed value's new one come first?"""
    from spellbook.sessions.recall import MIN_RELEVANCE, PROMPT_BUDGET, prompt_context

    total = answered = changed = newest = 0
    for project in projects:
        for probe in probes[project.name]:
            text = prompt_context(hub, project.name, probe.question, MIN_RELEVANCE, PROMPT_BUDGET)
            folded = text.casefold()
            ok = all(word.casefold() in folded for word in probe.expect)
            total += 1
            answered += ok
            where = ""
            lines = [line.casefold() for line in text.splitlines()]
            new = probe.expect[0].casefold()
            olds = [
                n for n, line in enumerate(lines) for old in probe.stale if old.casefold() in line and new not in line
            ]
            if ok and olds:  # a line with the old value alone ("from 30 s to 45 s" states the new one)
                changed += 1
                ahead = next(n for n, line in enumerate(lines) if new in line) < olds[0]
                marked = all("(changed " in lines[n] for n in olds)
                newest += ahead and marked
                order = "after" if ahead else "before"
                where = f" (the old value too: {order} the new, {'' if marked else 'not '}marked changed)"
            print(f"  prompt {'yes' if ok else 'no '}  {probe.question}{where} ({len(text)} chars)")
    print(
        f"  prompts: {answered}/{total} answered ({answered / total:.0%}); "
        f"with the old value too: {changed}, of them after the new and marked changed: {newest}"
    )


if __name__ == "__main__":
    main()
