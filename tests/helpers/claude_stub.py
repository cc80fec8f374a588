"""The stub Messages API (``stub_model.py`` in the shared tools folder beside the repository) that
lets the real Claude Code run whole sessions offline, and waiting for the session hooks' captures."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
# ../shared beside the repo (CI's clone); a worktree under <repo's parent>/wt/ looks one level up too.
STUB = next(
    (
        p
        for p in (
            ROOT.parent / "shared" / "tools" / "stub_model.py",
            ROOT.parent.parent / "shared" / "tools" / "stub_model.py",
        )
        if p.is_file()
    ),
    ROOT.parent / "shared" / "tools" / "stub_model.py",
)


class Stub:
    def __init__(self, tmp: Path, turns: list[dict]) -> None:
        self.port = free_port()
        self.log = tmp / f"requests-{self.port}.jsonl"
        script = tmp / f"script-{self.port}.json"
        script.write_text(json.dumps(turns))
        self.proc = subprocess.Popen(
            [sys.executable, str(STUB), "--port", str(self.port), "--script", str(script), "--log", str(self.log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # "stub model on http://..." once it listens

    def requests(self) -> list[dict]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line)["body"] for line in lines]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def wait_for_captures(vault: Path, count: int, timeout: float = 90.0) -> str:
    """Wait until the hooks log shows ``count`` finished captures; returns the log."""
    log = vault / ".spellbook" / "hooks.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.count("capture: session") >= count and text.count("hook capture done") >= count:
            return text
        time.sleep(0.3)
    raise AssertionError(f"captures did not finish:\n{log.read_text() if log.exists() else '(no log)'}")
