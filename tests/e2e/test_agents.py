"""Codex CLI and Gemini CLI end to end, offline, with the real CLIs from npm (tests/node).

``spellbook install codex`` / ``install gemini`` write their MCP entries and hooks into a temporary
HOME; ``codex mcp list`` and ``gemini mcp list`` read them back. Whole sessions run against
tests/helpers/agent_models.py (a scripted Responses API for Codex, a scripted Gemini API): each
CLI starts Spellbook's MCP server and calls its tools, runs the SessionStart hook (whose context
reaches the model's request) and the end-of-turn hook (which captures the session into the vault).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.agent_models import ModelStub
from tests.helpers.codex_trust import trust_hooks
from tests.helpers.processes import SPELLBOOK, claude_env

pytestmark = pytest.mark.slow


def agent_env(home: Path, node_bin: Path) -> dict[str, str]:
    env = claude_env(home)
    env["PATH"] = f"{node_bin}:{env.get('PATH', '')}"
    env.update(OPENAI_API_KEY="sk-stub", GEMINI_API_KEY="stub-key", CODEX_HOME=str(home / ".codex"))
    return env


def setup(tmp_path: Path, node_bin: Path) -> tuple[Path, Path, Path, dict[str, str]]:
    home, project, vault = tmp_path / "home", tmp_path / "shop", tmp_path / "vault"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = agent_env(home, node_bin)
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    for agent in ("codex", "gemini"):
        done = subprocess.run(
            [SPELLBOOK, "install", agent, "--vault", str(vault)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "configured spellbook in" in done.stdout and "session hooks" in done.stdout, done.stdout
    # Gemini runs MCP servers and hooks only in a folder the person trusts, with an auth method chosen.
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    settings = home / ".gemini" / "settings.json"
    settings.write_text(
        json.dumps({**json.loads(settings.read_text()), "security": {"auth": {"selectedType": "gemini-api-key"}}})
    )
    return home, project, vault, env


def test_mcp_lists_see_spellbook_and_a_second_install_changes_nothing(tmp_path: Path, node_bin: Path) -> None:
    home, project, vault, env = setup(tmp_path, node_bin)
    codex = subprocess.run(
        [str(node_bin / "codex"), "mcp", "list", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert codex.returncode == 0, codex.stderr
    listed = {s["name"]: s for s in json.loads(codex.stdout)}
    assert listed["spellbook"]["transport"]["command"] == SPELLBOOK
    assert listed["spellbook"]["transport"]["args"] == ["serve", "--vault", str(vault)]
    gemini = subprocess.run(
        [str(node_bin / "gemini"), "mcp", "list"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    out = gemini.stdout + gemini.stderr
    assert gemini.returncode == 0, out
    assert re.search(r"spellbook: .*spellbook serve --vault " + re.escape(str(vault)) + r".*Connected", out), out

    files = [home / ".codex" / "config.toml", home / ".codex" / "hooks.json", home / ".gemini" / "settings.json"]
    before = {f: f.read_bytes() for f in files}
    for agent in ("codex", "gemini"):
        again = subprocess.run(
            [SPELLBOOK, "install", agent, "--vault", str(vault)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert again.returncode == 0 and "already configured: spellbook" in again.stdout, again.stdout + again.stderr
        assert "already configured: session hooks" in again.stdout
    assert {f: f.read_bytes() for f in files} == before


def run_codex(node_bin: Path, env: dict, project: Path, turns: list[dict], prompt: str) -> tuple[str, list[dict]]:
    stub = ModelStub("openai", turns)
    provider = (
        f'{{name="stub", base_url="http://127.0.0.1:{stub.port}/v1", env_key="OPENAI_API_KEY", wire_api="responses"}}'
    )
    try:
        done = subprocess.run(
            [
                str(node_bin / "codex"),
                "exec",
                "-c",
                'model_provider="stub"',
                "-c",
                f"model_providers.stub={provider}",
                "-c",
                'model="gpt-5"',
                "-c",
                'mcp_servers.spellbook.default_tools_approval_mode="approve"',
                # the stub answers at once: wait for the MCP server's tools, as a real model's seconds would
                "-c",
                "mcp_servers.spellbook.required=true",
                prompt,
            ],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        stub.close()
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, stub.requests


def run_gemini(node_bin: Path, env: dict, project: Path, turns: list[dict], prompt: str) -> tuple[str, list[dict]]:
    stub = ModelStub("gemini", turns)
    try:
        done = subprocess.run(
            [str(node_bin / "gemini"), "-p", prompt, "--approval-mode", "yolo", "-m", "gemini-2.5-flash"],
            cwd=project,
            env=dict(env, GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{stub.port}"),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        stub.close()
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, stub.requests


def wait_for_notes(vault: Path, sources: set[str], timeout: float = 90.0) -> dict[str, Path]:
    deadline = time.monotonic() + timeout
    found: dict[str, Path] = {}
    while time.monotonic() < deadline:
        for note in (vault / "sessions").rglob("*.md") if (vault / "sessions").exists() else []:
            match = re.search(r"^source: (\S+)$", note.read_text(), re.MULTILINE)
            if match:
                found[match.group(1)] = note
        if sources <= set(found):
            return found
        time.sleep(0.3)
    log = vault / ".spellbook" / "hooks.log"
    raise AssertionError(f"no session notes from {sources - set(found)}:\n{log.read_text() if log.exists() else ''}")


def test_codex_and_gemini_sessions_are_captured_and_briefed(tmp_path: Path, node_bin: Path) -> None:
    home, project, vault, env = setup(tmp_path, node_bin)
    # Codex runs a person's hooks once they are trusted (its /hooks browser); trust them as Codex lists them.
    trusted = trust_hooks(node_bin / "codex", env, project, home / ".codex" / "config.toml")
    assert any(" hook SessionStart --agent codex" in c for c in trusted), trusted

    answer = "The checkout timed out: the payment client opened a TLS connection per request; pooled now."
    out, requests = run_codex(
        node_bin,
        env,
        project,
        [
            {
                "namespace": "mcp__spellbook",
                "tool": "scribe",
                "input": {"text": "Reuse one pooled payment session.", "title": "Pool payment"},
            },
            {"text": answer},
        ],
        "Why does the checkout page time out?",
    )
    assert answer in out
    assert "Spellbook memory for project shop" in json.dumps(requests[0]["body"]["input"])  # SessionStart reached it
    stored = json.dumps(requests[1]["body"]["input"])
    assert "Stored memory" in stored or '\\"path\\"' in stored, stored[-2000:]  # the MCP tool ran

    notes = wait_for_notes(vault, {"codex"})
    text = notes["codex"].read_text()
    assert "Codex session" in text and "Why does the checkout page time out?" in text and answer in text
    assert "context: shop" in text and "mcp__spellbook__scribe" in text and "## insight · " in text

    # A Gemini session in the same project is told about the Codex session, and is captured beside it.
    out, requests = run_gemini(
        node_bin,
        env,
        project,
        [
            {"tool": "mcp_spellbook_memorize", "input": {"query": "checkout payment"}},
            {"text": "Last time: the payment client needed a pooled connection."},
        ],
        "What did we find out about checkout?",
    )
    assert "pooled connection" in out
    first = json.dumps(requests[0]["body"]["contents"])
    assert "Last sessions in shop" in first and "Why does the checkout page time out" in first
    notes = wait_for_notes(vault, {"codex", "gemini"})
    assert notes["gemini"].parent == notes["codex"].parent == vault / "sessions" / "shop"
    text = notes["gemini"].read_text()
    assert "Gemini CLI session" in text and "What did we find out about checkout?" in text
    assert "mcp__spellbook__memorize" in text and "<hook_context>" not in text and "spellbook-memory" not in text

    # And the next Codex session is briefed with both.
    _, requests = run_codex(node_bin, env, project, [{"text": "ok"}], "hello again")
    first = json.dumps(requests[0]["body"]["input"])
    assert "What did we find out about checkout" in first and "Why does the checkout page time out" in first
