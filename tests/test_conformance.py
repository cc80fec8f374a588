"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, run with Node 22)
against a real ``spellbook serve --http`` on 127.0.0.1: the generic server scenarios.

The suite's other server scenarios call fixture tools, prompts and resources (``test_simple_text``,
``test_prompt_with_image`` ...) that only its reference server has, or optional capabilities
Spellbook does not declare (``logging/setLevel``, ``completion/complete``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import child_env
from .test_http import free_port, start, stop

pytestmark = pytest.mark.slow

SCENARIOS = ["server-initialize", "ping", "tools-list", "prompts-list", "resources-list", "dns-rebinding-protection"]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    # The suite's `server` command (0.1.16) has no way to send headers, so the server runs with the
    # bearer token turned off (--no-token, loopback only); the token itself is tested in test_http.
    proc = start(tmp_path_factory.mktemp("conformance") / "vault", port, "--no-token")
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(scenario: str, server_url: str, node_bin: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(node_bin / "node"), str(node_bin / "conformance"), "server", "--url", server_url,
         "--scenario", scenario, "--output-dir", str(tmp_path)],
        cwd=tmp_path, env=child_env(NO_COLOR="1", PATH=f"{node_bin}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True, text=True, timeout=120, check=False,
    )
    checks = [check for file in tmp_path.rglob("checks.json") for check in json.loads(file.read_text())]
    failed = [check for check in checks if check["status"] not in ("SUCCESS", "INFO")]
    report = f"conformance {scenario}: exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert result.returncode == 0 and checks and not failed, report + json.dumps(failed, indent=2)
    assert any(check["status"] == "SUCCESS" for check in checks), report
