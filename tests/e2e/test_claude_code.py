"""Claude Code's own check: ``spellbook install claude-code`` writes the config, and ``claude mcp
list`` (npm ``@anthropic-ai/claude-code``, offline, in a temporary HOME) connects to every entry.

``claude mcp list`` starts each stdio server and connects to each URL, runs the MCP handshake, and
prints ``name: ... - ✔ Connected`` or ``✘ Failed to connect``; it needs no login or network. Servers
from a project's ``.mcp.json`` wait for the user's approval first (``⏸ Pending approval``); the test
approves them as a user would, with ``enableAllProjectMcpServers`` in the temporary HOME's settings.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.processes import SPELLBOOK, claude_env, free_port, start, stop

pytestmark = pytest.mark.slow

TOKEN = "not-the-servers-token"


def install(env: dict[str, str], project: Path, *args: str) -> None:
    result = subprocess.run(
        [SPELLBOOK, "install", "claude-code", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def mcp_list(claude: Path, env: dict[str, str], project: Path) -> tuple[dict[str, str], str]:
    """``claude mcp list`` in ``project``: {server name: status line}, and the whole output."""
    result = subprocess.run(
        [str(claude), "mcp", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    output = f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    statuses = {
        m["name"]: m["status"]
        for m in re.finditer(r"^(?P<name>[\w.-]+): .* - (?P<status>.+)$", result.stdout, re.MULTILINE)
    }
    return statuses, output


def test_claude_code_connects_over_stdio_http_and_sse(tmp_path: Path, node_bin: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    env = claude_env(home)
    port = free_port()
    shared = tmp_path / "shared-vault"
    proc = start(shared, port)  # on loopback: the token it makes on first start is required
    base = f"http://127.0.0.1:{port}"
    try:
        install(env, project, "--scope", "project", "--vault", str(tmp_path / "project-vault"))  # ./.mcp.json
        install(env, project, "--name", "spellbook-user", "--vault", str(tmp_path / "user-vault"))  # ~/.claude.json
        # install reads the token from the shared vault's index folder
        install(env, project, "--name", "spellbook-http", "--http", f"{base}/mcp", "--vault", str(shared))
        install(env, project, "--name", "spellbook-sse", "--http", f"{base}/sse", "--vault", str(shared))
        install(env, project, "--name", "spellbook-wrong-token", "--http", f"{base}/mcp", "--token", TOKEN)
        install(env, project, "--name", "spellbook-no-token", "--http", f"{base}/mcp", "--no-token")  # fails to connect
        assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["spellbook"]["command"] == SPELLBOOK
        (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))

        statuses, output = mcp_list(node_bin / "claude", env, project)
    finally:
        stop(proc)
    for name in ("spellbook", "spellbook-user", "spellbook-http", "spellbook-sse"):
        assert "Connected" in statuses.get(name, ""), f"{name} did not connect:\n{output}"
    assert "Failed" in statuses.get("spellbook-no-token", ""), output
    assert "Failed" in statuses.get("spellbook-wrong-token", ""), output
