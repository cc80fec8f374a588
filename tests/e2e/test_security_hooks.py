"""The Claude Code hooks against what their input names (docs/security.md, "Session hooks"): the
transcript path is read only if it is a regular file, and within bounds. Real ``spellbook hook``
processes, real FIFOs and devices."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

from spellbook.sessions.transcript import read_transcript
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.sessions import make_transcript


def hook(event: str, vault: Path, payload: dict | str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``spellbook hook <event>`` as Claude Code runs it, with 1.5 GB of address space at most."""
    data = payload if isinstance(payload, str) else json.dumps(payload)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))

    return subprocess.run([SPELLBOOK, "hook", event, "--vault", str(vault)], input=data, text=True,
                          capture_output=True, env=child_env(SPELLBOOK_EMBEDDER="hashing"), timeout=timeout,
                          check=False, preexec_fn=limit)


def test_a_capture_reads_only_a_regular_transcript_and_never_blocks(tmp_path: Path) -> None:
    """A FIFO with no writer blocked the capture for its whole 600 s deadline; /dev/zero grew it
    to 1.2 GB. Both are refused at once, with a line in hooks.log."""
    vault = tmp_path / "vault"
    vault.mkdir()
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        started = time.monotonic()
        done = hook("capture", vault, {"session_id": "s", "transcript_path": str(path)}, timeout=30)
        assert done.returncode == 0 and time.monotonic() - started < 30
        assert f"transcript {path} is not a regular file" in (vault / ".spellbook" / "hooks.log").read_text()
    assert not list(vault.glob("**/*.md"))


def test_a_line_over_the_cap_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    """A line over MAX_LINE_BYTES (16 MiB) is skipped, even one that is a valid entry."""
    long = 20 * 1024 * 1024
    file, session_id, _ = make_transcript(tmp_path, "/work/shop", 3, seed=4)
    lines = file.read_text().splitlines(keepends=True)
    huge = {"type": "user", "timestamp": "2026-11-02T09:00:30Z", "cwd": "/work/shop",
            "message": {"role": "user", "content": "x" * long}}
    file.write_text("".join(lines[:2]) + json.dumps(huge) + "\n" + "".join(lines[2:]))
    session = read_transcript(file)
    assert len(session.exchanges) == 3 and all(len(x.prompt) < 1000 for x in session.exchanges)
    # No newline at all: the long line ends the file and is skipped too.
    with file.open("a") as f:
        f.write("y" * long * 2)
    assert len(read_transcript(file).exchanges) == 3
