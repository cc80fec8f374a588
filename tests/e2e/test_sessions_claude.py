"""Session memory end to end with the real Claude Code CLI (``claude -p``, offline).

The model is ``../shared/tools/stub_model.py`` (loaded from the steering folder beside the repo at
run time, never copied here): a scripted stand-in for the Messages API that logs every request
Claude Code sends. ``spellbook install claude-code --hooks`` writes the MCP entry and the hooks into
a temporary HOME; the hooks and the MCP server Claude Code starts run this worktree's code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.claude_stub import STUB, Stub, wait_for_captures
from tests.helpers.processes import SPELLBOOK, claude_env

pytestmark = pytest.mark.slow

FAKE_KEY = (
    "sk-ant-api03-"
    + "Zq8xW2vT5nR1mK7pL4sJ9dF3gH6bN0cV2xZ8qW5eR7tY1uI4oP3aS6dF9gH2jK5lM8nB1vC4xZ7qW0eR3tY6uI9oP2aS5dF8gH1j-AAAAAA"
)
SECRET = "hunter2-correct-horse"

if not STUB.is_file():
    pytest.skip(
        f"the stub model is not at {STUB} (it lives in the steering repo's shared/tools/)", allow_module_level=True
    )


def run_claude(
    claude: Path, env: dict, project: Path, stub: Stub, prompt: str, extra: list[str] | None = None
) -> subprocess.CompletedProcess:
    env = dict(env, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{stub.port}", ANTHROPIC_API_KEY="stub-key")
    return subprocess.run(
        [str(claude), "-p", prompt, *(extra or []), "--allowedTools", "mcp__spellbook__*"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def session_notes(vault: Path) -> list[Path]:
    return sorted((vault / "sessions").rglob("*.md")) if (vault / "sessions").exists() else []


def frontmatter(file: Path, key: str) -> str:
    match = re.search(rf"^{key}: (.+)$", file.read_text(), re.MULTILINE)
    assert match, f"no {key} in {file}"
    return match.group(1).strip().strip("'\"")


def test_sessions_are_captured_recalled_and_searchable(tmp_path: Path, node_bin: Path) -> None:
    home, project, vault = tmp_path / "home", tmp_path / "shop", tmp_path / "vault"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    env = claude_env(home)
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    result = subprocess.run(
        [SPELLBOOK, "install", "claude-code", "--hooks", "--vault", str(vault)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    claude = node_bin / "claude"

    # Session 1: a prompt with a private span and a key; the model scribes one insight and answers.
    answer = "The checkout timed out because the payment client opened a TLS connection per request; pooled now."
    stub = Stub(
        tmp_path,
        [
            {
                "tool": "mcp__spellbook__scribe",
                "input": {"text": "Reuse one pooled payment session.", "title": "Pool payment"},
            },
            {"text": answer},
        ],
    )
    prompt = f"Why does the checkout page time out? <private>my password is {SECRET}</private> key {FAKE_KEY}"
    try:
        first = run_claude(claude, env, project, stub, prompt)
    finally:
        stub.close()
    assert first.returncode == 0, first.stderr
    assert answer in first.stdout
    log = wait_for_captures(vault, 2)  # Stop and SessionEnd: the same session, twice

    # (a) the session is one note, holding the prompt, the tool, the insight and the answer
    notes = session_notes(vault)
    assert len(notes) == 1, f"{notes}\n{log}"
    text = notes[0].read_text()
    session_id = frontmatter(notes[0], "session")
    note_id = frontmatter(notes[0], "id")
    assert frontmatter(notes[0], "context") == "shop" and frontmatter(notes[0], "type") == "session"
    assert "Why does the checkout page time out?" in text and answer in text
    assert "## tool · " in text and "mcp__spellbook__scribe" in text and "## insight · " in text
    # the model's own scribe during the session carries the session id (Claude Code's env for the server)
    insight = next(p for p in vault.rglob("*.md") if "Pool payment" in p.read_text() and p not in notes)
    assert frontmatter(insight, "session") == session_id
    # (d) neither the private span nor the key reached the vault, in any file
    everything = "".join(p.read_text(errors="replace") for p in vault.rglob("*.md"))
    assert SECRET not in everything and FAKE_KEY not in everything and FAKE_KEY[:30] not in everything

    # Session 2: its first model request carries the SessionStart context with session 1's gist;
    # the model then searches that session's events and walks its timeline.
    stub = Stub(
        tmp_path,
        [
            {
                "tool": "mcp__spellbook__memorize",
                "input": {"query": "payment connection", "filter": {"session": session_id, "event_type": "response"}},
            },
            {"tool": "mcp__spellbook__timeline", "input": {"id": note_id}},
            {"text": "Recalled."},
        ],
    )
    try:
        second = run_claude(claude, env, project, stub, "What did we find out last time?")
        requests = [r for r in stub.requests() if r.get("tools")]
    finally:
        stub.close()
    assert second.returncode == 0, second.stderr
    first_request = json.dumps(requests[0]["messages"])
    assert "Spellbook memory for project shop" in first_request
    assert "Why does the checkout page time out" in first_request  # the gist of the earlier session

    # (c) memorize filtered by session and event type hits the answer; timeline lists the events in order
    results = [_tool_result(r) for r in requests[1:3]]
    found = json.loads(results[0])
    assert found["results"] and found["results"][0]["id"] == note_id, results[0]
    assert found["results"][0]["heading"].startswith("response · "), results[0]
    timeline = json.loads(results[1])
    kinds = [s["heading"].split(" · ")[0] for s in timeline["sections"] if s["heading"]]
    assert kinds == ["prompt", "tool", "insight", "response"], timeline
    wait_for_captures(vault, 4)
    assert len(session_notes(vault)) == 2  # session 2 has its own note; session 1 was not duplicated


def test_a_failing_hook_leaves_the_session_working(tmp_path: Path, node_bin: Path) -> None:
    """(e) the vault is missing, then the index is locked by an owner that never answers: the
    session still answers, and each hook logged its error and exited 0."""
    from spellbook.sessions.install import hook_commands, install_hooks

    home, project = tmp_path / "home", tmp_path / "proj"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    env = claude_env(home)
    claude = node_bin / "claude"
    missing = tmp_path / "no-such-vault"
    install_hooks(home / ".claude" / "settings.json", hook_commands(SPELLBOOK, missing))
    stub = Stub(tmp_path, [{"text": "Still here."}])
    try:
        result = run_claude(claude, env, project, stub, "hello")
    finally:
        stub.close()
    assert result.returncode == 0 and "Still here." in result.stdout, result.stderr
    assert not missing.exists()  # a hook never creates a vault

    vault = tmp_path / "vault"
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    install_hooks(home / ".claude" / "settings.json", hook_commands(SPELLBOOK, vault))
    index = vault / ".spellbook"
    index.mkdir()
    # An "owner" that holds the lock and publishes a port nobody listens on.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, json, os, sys, time\n"
                f"fd = os.open({str(index / 'owner.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
                "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                f"open({str(index / 'owner.json')!r}, 'w')"
                ".write(json.dumps({'pid': os.getpid(), 'port': 9, 'token': 'x'}))\n"
                "print('locked', flush=True)\n"
                "time.sleep(300)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    stub = Stub(tmp_path, [{"text": "Still answering."}])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        result = run_claude(claude, env, project, stub, "hello again")
        seconds = time.monotonic() - started
    finally:
        stub.close()
        holder.kill()
        holder.wait(timeout=10)
    assert result.returncode == 0 and "Still answering." in result.stdout, result.stderr
    assert "Spellbook memory" not in result.stdout
    log = (index / "hooks.log").read_text()
    assert "gave up" in log or "failed" in log, log
    assert seconds < 120


def test_prompt_recall_is_on_after_install_and_recall_off_typed_in_a_session_reaches_the_hook(
    tmp_path: Path, node_bin: Path
) -> None:
    """``install claude-code --hooks`` turns prompt recall on: a question gets the passage that
    answers it. A prompt starting with ``#recall off`` reaches the UserPromptSubmit hook (Claude Code
    once took ``#`` for its memory shortcut; this version does not), and the session resumed after
    it gets no passages."""
    import uuid

    home, project, vault = tmp_path / "home", tmp_path / "shop", tmp_path / "vault"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    env = claude_env(home)
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    (vault / "ops").mkdir()
    (vault / "ops" / "billing.md").write_text(
        "---\ntitle: Billing on staging\ncontext: shop\n---\nStaging deploys "
        "from the release branch through ArgoCD; billing listens on port 8443.\n"
    )
    subprocess.run(
        [SPELLBOOK, "install", "claude-code", "--hooks", "--vault", str(vault)],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    claude, session = node_bin / "claude", str(uuid.uuid4())
    question = "Which port does billing listen on in staging?"

    def last_request(*args: str) -> str:
        stub = Stub(tmp_path, [{"text": "ok"}])
        try:
            result = run_claude(claude, env, project, stub, args[-1], list(args[:-1]))
            requests = [r for r in stub.requests() if r.get("tools")]
        finally:
            stub.close()
        assert result.returncode == 0, result.stderr
        return json.dumps(requests[-1]["messages"])

    asked = last_request(question)
    assert "Passages from Spellbook memory" in asked and "port 8443" in asked
    off = last_request("--session-id", session, "#recall off")
    assert "prompt recall is off for this session" in off
    again = last_request("--resume", session, question)
    assert "Passages from Spellbook memory" not in again


def _tool_result(request: dict) -> str:
    for message in reversed(request["messages"]):
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    return "\n".join(b.get("text", "") for b in inner if isinstance(b, dict))
                return str(inner)
    raise AssertionError(f"no tool_result in {json.dumps(request)[:2000]}")
