"""Soak benchmark: agents, a person and git-style storms on one vault, the owner kill -9'd.

For ``--minutes`` (default 10), on a throw-away vault:
  * three MCP stdio clients (the SDK's client, each with its own ``spellbook serve`` process;
    one owns the index, the others forward to it) scribe, revise, link, erase and search;
  * a "person" appends lines to their own notes and writes new ones, as an editor saves;
  * every ``--storm-every`` seconds a checkout-style storm moves a folder of 100 notes to
    another name and back, rewriting some on the way;
  * every ``--kill-every`` seconds (default 120) the owning server gets SIGKILL; its client
    starts a new server, the others take over or forward to the new owner.
A write counts as acknowledged when its tool call returned without error. At the end the clients
close, ``spellbook doctor`` checks that the index equals the vault, and every acknowledged write
is looked up. Prints: acknowledged writes, lost (an acknowledged memory missing, or with a text
nobody wrote last), resurrected (an acknowledged erase undone), duplicated notes (one scribe's
text in two files), doctor's result, leftover server processes. Exit 1 if any is wrong.

    .venv/bin/python bench/bench_soak.py --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))
MARKER = re.compile(r"soak-c\d-\d+")


@dataclass
class Ledger:
    """What the agents were told happened (acknowledged) and what they tried (maybe happened)."""

    texts: dict[str, set[str]] = field(default_factory=dict)  # id -> texts the file may hold now
    erased: set[str] = field(default_factory=set)  # acknowledged erases
    maybe_erased: set[str] = field(default_factory=set)  # erases that failed: may have happened
    versions: dict[str, str] = field(default_factory=dict)  # id -> version last read or written
    live: list[str] = field(default_factory=list)
    acknowledged: int = 0
    failed_calls: int = 0
    calls: int = 0


def server_params(vault: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_")}
    env["PYTHONPATH"] = str(ROOT)
    return StdioServerParameters(
        command=SPELLBOOK, args=["serve", "--vault", str(vault), "--embedder", "hashing"], env=env
    )


async def agent(n: int, vault: Path, ledger: Ledger, deadline: float, rng: random.Random) -> None:
    count = 0
    while time.monotonic() < deadline:
        try:
            async with Client(server_params(vault)) as client:
                while time.monotonic() < deadline:
                    count += 1
                    await step(client, n, count, ledger, rng)
        except Exception:  # the server was killed under this client: start another
            ledger.failed_calls += 1
            await anyio.sleep(0.5)


async def step(client: Client, n: int, count: int, ledger: Ledger, rng: random.Random) -> None:
    roll = rng.random()
    live = [i for i in ledger.live if i not in ledger.erased]
    ledger.calls += 1
    if roll < 0.4 or len(live) < 3:
        marker = f"soak-c{n}-{count}"
        text = f"{marker} soak note about topic {count % 7}, written by client {n}."
        result = await call(client, "scribe", text=text, title=f"Soak {n} {count}", category=f"soak{count % 3}")
        if result is not None:
            ledger.texts[result["id"]] = {text}
            ledger.versions[result["id"]] = result["version"]
            ledger.live.append(result["id"])
            ledger.acknowledged += 1
    elif roll < 0.6:
        target = rng.choice(live)
        old = next(iter(ledger.texts[target]))
        text = f"{MARKER.search(old).group(0)} revised by client {n} at {count}."
        ledger.texts[target].add(text)  # in flight: the file may hold it even if the call fails
        # With the version last seen, two clients revising one note cannot both be acknowledged
        # out of order: the second gets a conflict, reads the note again and may try later.
        result = await call(client, "revise", id=target, text=text, version=ledger.versions.get(target))
        if result is not None:
            ledger.texts[target] = {text}
            ledger.versions[target] = result["version"]
            ledger.acknowledged += 1
        else:
            current = await call(client, "get_memories", ids=[target])
            if current and current["memories"]:
                ledger.versions[target] = current["memories"][0]["version"]
    elif roll < 0.7:
        source, target = rng.sample(live, 2)
        if await call(client, "link", source=source, target=target, reason=f"client {n}") is not None:
            ledger.acknowledged += 1
    elif roll < 0.75:
        target = rng.choice(live)
        ledger.maybe_erased.add(target)  # in flight: it may happen even if the call fails
        if await call(client, "erase", id=target) is not None:
            ledger.erased.add(target)
            ledger.acknowledged += 1
    else:
        await call(client, "memorize", query=f"soak note about topic {count % 7}")


async def call(client: Client, tool: str, **args):
    with anyio.fail_after(120):
        result = await client.call_tool(tool, args)
    if result.is_error:
        return None  # a conflict (two clients revising one note) or an erased target: not acknowledged
    return result.structured_content


def person(vault: Path, stop: threading.Event, rng: random.Random, edits: list[int]) -> None:
    folder = vault / "person"
    folder.mkdir(parents=True, exist_ok=True)
    while not stop.wait(0.5):
        files = sorted(folder.glob("*.md"))
        if not files or rng.random() < 0.3:
            file = folder / f"Person note {len(files) + 1}.md"
            file.write_text(f"# Person note {len(files) + 1}\n\nWritten by hand.\n", encoding="utf-8")
        else:
            file = rng.choice(files)
            with file.open("a", encoding="utf-8") as f:
                f.write(f"\nAnother line {rng.random()}.\n")
        edits[0] += 1


def storms(vault: Path, stop: threading.Event, every: float, rng: random.Random, count: list[int]) -> None:
    a, b = vault / "storm" / "main", vault / "storm" / "other"
    a.mkdir(parents=True, exist_ok=True)
    for i in range(100):
        (a / f"Storm {i}.md").write_text(f"# Storm {i}\n\nA note a checkout moves.\n", encoding="utf-8")
    while not stop.wait(every):
        source, target = (a, b) if a.exists() else (b, a)
        source.rename(target)  # a checkout of a branch where the folder has another name
        for file in rng.sample(sorted(target.glob("*.md")), 10):
            file.write_text(
                file.read_text(encoding="utf-8") + f"\nEdited on the branch {rng.random()}.\n", encoding="utf-8"
            )
        count[0] += 1


def killer(vault: Path, stop: threading.Event, every: float, kills: list[int]) -> None:
    while not stop.wait(every):
        try:
            pid = json.loads((vault / ".spellbook" / "owner.json").read_text())["pid"]
            os.kill(pid, signal.SIGKILL)
            kills[0] += 1
            print(f"  [{time.strftime('%H:%M:%S')}] killed the owner (pid {pid})", flush=True)
        except (OSError, ValueError, KeyError):
            pass


def servers_left(vault: Path) -> list[int]:
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmdline and str(vault).encode() in cmdline:
                left.append(int(entry.name))
    return left


def verify(vault: Path, ledger: Ledger) -> dict[str, int]:
    from spellbook.config import Settings
    from spellbook.engine import Engine

    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False))
    engine.start()
    try:
        ids = list(ledger.texts)
        found: dict[str, str] = {}
        for start in range(0, len(ids), 20):
            for memory in engine.get_memories(ids[start : start + 20])["memories"]:
                found[memory["id"]] = memory["text"].strip()
    finally:
        engine.close()
    lost_ids = [
        i
        for i, texts in ledger.texts.items()
        if i not in ledger.erased and found.get(i) not in texts and not (i in ledger.maybe_erased and i not in found)
    ]
    for i in lost_ids[:5]:
        print(f"  lost: {i} holds {found.get(i)!r}; expected one of {sorted(ledger.texts[i])}")
    lost = len(lost_ids)
    resurrected = sum(1 for i in ledger.erased if i in found)
    per_marker: dict[str, int] = {}
    for file in vault.rglob("*.md"):
        if {".spellbook", ".trash"} & set(file.parts):
            continue
        hit = MARKER.search(file.read_text(encoding="utf-8"))
        if hit:
            per_marker[hit.group(0)] = per_marker.get(hit.group(0), 0) + 1
    duplicated = sorted(m for m, c in per_marker.items() if c > 1)
    for marker in duplicated[:5]:
        files = [
            str(f.relative_to(vault))
            for f in vault.rglob("*.md")
            if ".trash" not in f.parts
            and ".spellbook" not in f.parts
            and re.search(re.escape(marker) + r"\b", f.read_text(encoding="utf-8"))
        ]
        print(f"  duplicated: {marker} in {files}")
    return {"lost": lost, "resurrected": resurrected, "duplicated": len(duplicated)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--kill-every", type=float, default=120.0, help="seconds between kill -9 of the owner")
    ap.add_argument("--storm-every", type=float, default=45.0, help="seconds between checkout-style storms")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ledger = Ledger()
    with tempfile.TemporaryDirectory(prefix="spellbook-soak-") as tmp:
        vault = Path(tmp) / "vault"
        started = time.monotonic()
        deadline = started + args.minutes * 60
        stop = threading.Event()
        edits, storm_count, kills = [0], [0], [0]

        async def run() -> None:
            async with anyio.create_task_group() as group:
                for n in range(3):
                    group.start_soon(agent, n, vault, ledger, deadline, random.Random(args.seed * 10 + n))
                    await anyio.sleep(1.0 if n == 0 else 0.2)  # the first server creates the vault

        helpers = []
        try:
            print(f"soak: {args.minutes} min on {vault}", flush=True)
            runner = threading.Thread(target=anyio.run, args=(run,))
            runner.start()
            while not (vault / ".spellbook" / "owner.json").exists() and time.monotonic() < started + 60:
                time.sleep(0.2)
            for target, extra in (
                (person, (rng, edits)),
                (storms, (args.storm_every, rng, storm_count)),
                (killer, (args.kill_every, kills)),
            ):
                helper = threading.Thread(target=target, args=(vault, stop, *extra), daemon=True)
                helper.start()
                helpers.append(helper)
            # The person, the storms and the kills stop 15 s before the agents, so the owner's watcher
            # catches up before the last server exits and doctor compares a settled vault.
            quiet = threading.Timer(max(0.0, deadline - time.monotonic() - 15), stop.set)
            quiet.start()
            runner.join()
            quiet.cancel()
            agents_done = time.time()
        finally:
            stop.set()
            for helper in helpers:
                helper.join(30)
        time.sleep(3)  # let the last servers exit
        doctor = subprocess.run(
            [SPELLBOOK, "doctor", "--vault", str(vault), "--embedder", "hashing", "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        try:
            report = json.loads(doctor.stdout)
        except ValueError:
            report = {"consistent": False, "output": doctor.stdout[-300:] + doctor.stderr[-300:]}
        counts = {k: v for k, v in (report.get("counts") or {}).items() if v}
        failing = [f"{c['check']}: {c['detail']}" for c in report.get("checks", []) if c["status"] == "fail"]
        consistent = bool(report.get("consistent"))
        for key in ("not_indexed", "changed_since_indexed", "deleted_but_indexed"):
            for path in report.get(key, [])[:3]:
                file = vault / path
                age = (
                    f"changed {agents_done - file.stat().st_mtime:.0f} s before the agents stopped"
                    if file.exists()
                    else "gone"
                )
                print(f"  {key.replace('_', ' ')}: {path} ({age})")
        left = servers_left(vault)
        outcome = verify(vault, ledger)
        minutes = (time.monotonic() - started) / 60
        print(
            f"\nminutes: {minutes:.1f}  tool calls: {ledger.calls}  failed calls (server killed): {ledger.failed_calls}"
        )
        print(f"owner kills: {kills[0]}  person edits: {edits[0]}  storms: {storm_count[0]}")
        print(
            f"acknowledged writes: {ledger.acknowledged}  lost: {outcome['lost']}  "
            f"resurrected: {outcome['resurrected']}  duplicated notes: {outcome['duplicated']}"
        )
        print(
            f"index == vault (doctor): {'yes' if consistent else 'NO'} {counts or ''} (doctor exit {doctor.returncode}"
            f"{'; failing: ' + '; '.join(failing) if failing else ''})"
        )
        print(f"leftover processes: {len(left)}")
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        bad = outcome["lost"] or outcome["resurrected"] or outcome["duplicated"] or not consistent or left
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
