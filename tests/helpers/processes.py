"""Spellbook as a child process: the command, a clean environment, an HTTP server on a free loopback port, the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[2]


SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))


def tuned(constants: dict[str, object]) -> list[str]:
    """The command that runs ``spellbook`` with module constants set first, as monkeypatch sets them
    in this process (``{"spellbook.embedders.remote.RETRIES": 1}``); the arguments follow it."""
    lines = ["import importlib, sys"]
    for name, value in constants.items():
        module, _, attr = name.rpartition(".")
        assert hasattr(__import__(module, fromlist=[attr]), attr), name  # a constant that exists
        lines.append(f"setattr(importlib.import_module({module!r}), {attr!r}, {value!r})")
    lines += ["sys.argv[0] = 'spellbook'", "from spellbook.cli import run", "run()"]
    return [sys.executable, "-c", "\n".join(lines)]


def child_env(**extra: str) -> dict[str, str]:
    """The test run's environment without its settings; ``SPELLBOOK_PLAIN_START`` is kept (``make
    test`` runs the stdio end-to-end tests again with it on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_") or k == "SPELLBOOK_PLAIN_START"}
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(vault: Path, port: int, *extra: str, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [SPELLBOOK, "serve", "--http", "--port", str(port), "--vault", str(vault), "--embedder", "hashing", *extra],
        env=child_env(**env),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx2.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(proc.stderr.read())


def stop(proc: subprocess.Popen) -> str:
    """Stop the server; returns what it logged."""
    proc.terminate()
    proc.wait(timeout=15)
    return proc.stderr.read()


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [SPELLBOOK, *args], capture_output=True, text=True, env=child_env(), timeout=120, check=False
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def claude_env(home: Path) -> dict[str, str]:
    env = child_env(
        HOME=str(home),
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",  # no telemetry, error reports or update checks
        DISABLE_TELEMETRY="1",
        NO_COLOR="1",
        SPELLBOOK_EMBEDDER="hashing",  # for the stdio servers Claude Code starts (they inherit its environment)
    )
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("ANTHROPIC_API_KEY", None)
    return env


def alive(pid: int) -> bool:
    """Running (a zombie that its new parent has not reaped yet has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def children_named(parent: int, name: str) -> list[int]:
    """The pids of `parent`'s children whose name (/proc/<pid>/status) is `name`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(parent) and fields.get("Name", "").strip() == name:
            out.append(int(entry))
    return out
