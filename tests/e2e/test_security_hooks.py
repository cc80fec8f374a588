"""The Claude Code hooks against what their input names (docs/security.md, "Session hooks"): the
transcript path is read only if it is a regular file, and within bounds. Real ``spellbook hook``
processes, real FIFOs and devices."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import time
from pathlib import Path

import pytest

from spellbook.sessions.agents import read_session
from spellbook.sessions.transcript import read_transcript
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.sessions import make_transcript


def hook(event: str, vault: Path, payload: dict | str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``spellbook hook <event>`` as Claude Code runs it (umask 022), with 1.5 GB of address space at most."""
    data = payload if isinstance(payload, str) else json.dumps(payload)

    def limit() -> None:
        os.umask(0o022)
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))

    return subprocess.run(
        [SPELLBOOK, "hook", event, "--vault", str(vault)],
        input=data,
        text=True,
        capture_output=True,
        env=child_env(SPELLBOOK_EMBEDDER="hashing"),
        timeout=timeout,
        check=False,
        preexec_fn=limit,
    )


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


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
def test_every_agents_transcript_reader_refuses_what_is_not_a_regular_file(tmp_path: Path, agent: str) -> None:
    """Codex's rollouts and Gemini's chats come from a hook's input too: the same refusal, at once."""
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        started = time.monotonic()
        with pytest.raises(ValueError, match="not a regular file"):
            read_session(agent, path, "s")
        assert time.monotonic() - started < 5


def test_a_line_over_the_cap_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    """A line over MAX_LINE_BYTES (16 MiB) is skipped, even one that is a valid entry."""
    long = 20 * 1024 * 1024
    file, _session_id, _ = make_transcript(tmp_path, "/work/shop", 3, seed=4)
    lines = file.read_text().splitlines(keepends=True)
    huge = {
        "type": "user",
        "timestamp": "2026-11-02T09:00:30Z",
        "cwd": "/work/shop",
        "message": {"role": "user", "content": "x" * long},
    }
    file.write_text("".join(lines[:2]) + json.dumps(huge) + "\n" + "".join(lines[2:]))
    session = read_transcript(file)
    assert len(session.exchanges) == 3 and all(len(x.prompt) < 1000 for x in session.exchanges)
    # No newline at all: the long line ends the file and is skipped too.
    with file.open("a") as f:
        f.write("y" * long * 2)
    assert len(read_transcript(file).exchanges) == 3


def test_a_hook_makes_its_folder_and_log_private_and_input_cannot_forge_a_log_line(tmp_path: Path) -> None:
    """The first hook in a vault with no index made .spellbook/ 0755 and hooks.log 0644; a session
    id (or a transcript path) with a newline wrote a line of its own into hooks.log."""
    vault = tmp_path / "vault"
    vault.mkdir()
    fifo = tmp_path / "a\n2026-01-01 00:00:00,000 1 ERROR forged by the path"
    os.mkfifo(fifo)
    session = "s\n2026-01-01 00:00:00,000 1 ERROR forged by the session id"
    done = hook("Stop", vault, {"session_id": session, "transcript_path": str(fifo)})
    assert done.returncode == 0
    log = vault / ".spellbook" / "hooks.log"
    deadline = time.monotonic() + 30
    while "the transcript was not read" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)  # the detached capture process logs its refusal, then ends
    text = log.read_text()
    assert "session s\\n2026-01-01 00:00:00,000 1 ERROR forged by the session id started" in text
    assert "a\\n2026-01-01 00:00:00,000 1 ERROR forged by the path is not a regular file" in text
    assert not [line for line in text.splitlines() if line.startswith("2026-01-01")]  # every record is one line
    assert stat.S_IMODE((vault / ".spellbook").stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE((vault / ".spellbook" / "sessions").stat().st_mode) == 0o700
    # An index folder and log made by an older version are closed up.
    os.chmod(vault / ".spellbook", 0o755)
    os.chmod(log, 0o644)
    assert hook("SessionEnd", vault, {"session_id": "t"}).returncode == 0
    assert (stat.S_IMODE((vault / ".spellbook").stat().st_mode), stat.S_IMODE(log.stat().st_mode)) == (0o700, 0o600)


def test_a_hook_with_no_vault_says_so_in_one_line(tmp_path: Path) -> None:
    """No vault printed a traceback on stderr (a FileNotFoundError, not one of Spellbook's errors)."""
    missing = tmp_path / "missing"
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "capture"):
        done = hook(event, missing, {"session_id": "s", "prompt": "hi", "transcript_path": str(tmp_path / "t.jsonl")})
        assert (done.returncode, done.stdout) == (0, "")
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"No vault at {missing}; run `spellbook init {missing}`." in done.stderr
    assert not missing.exists()
