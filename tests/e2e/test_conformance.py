"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned in
tests/node/package.json, run with Node 22) against a real ``spellbook serve --http`` on 127.0.0.1:
every server scenario that applies to a server without the suite's fixtures.

The suite lists more server scenarios than it can run against any server but its reference one:
``NOT_APPLICABLE`` names each and why. ``test_every_scenario_is_classified`` fails when a new
suite version brings a scenario that is in neither list, so a version bump is looked at.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.processes import child_env, free_port, start, stop

pytestmark = pytest.mark.slow

SCENARIOS = [
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "prompts-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "sep-2164-resource-not-found",
    "caching",
    "http-header-validation",
    "input-required-result-unsupported-methods",
    "input-required-result-ignore-extra-params",
]
FIXTURES = "calls a tool, prompt or resource only the suite's reference server has"
NOT_APPLICABLE = {
    **dict.fromkeys(
        [
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-with-progress",
            "json-schema-2020-12",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
            "server-sse-polling",
            "http-custom-header-server-validation",
            "server-stateless",
        ],
        FIXTURES,
    ),
    **dict.fromkeys(["logging-set-level", "tools-call-with-logging"], "logging is not a declared capability"),
    "completion-complete": "completions are not a declared capability",
    **dict.fromkeys(["resources-subscribe", "resources-unsubscribe"], "resource subscriptions are not declared"),
    **dict.fromkeys(
        ["tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults", "elicitation-sep1330-enums"],
        "no tool asks the client for sampling or elicitation",
    ),
    **dict.fromkeys(
        [
            f"input-required-result-{name}"
            for name in (
                "basic-elicitation",
                "basic-sampling",
                "basic-list-roots",
                "request-state",
                "multiple-input-requests",
                "multi-round",
                "missing-input-response",
                "non-tool-request",
                "result-type",
                "tampered-state",
                "capability-check",
                "validate-input",
            )
        ],
        "no tool or prompt asks for input (SEP-2322); " + FIXTURES,
    ),
    **dict.fromkeys(
        [f"sep-2640-skills-{name}" for name in ("directory", "enumeration", "manifest")],
        "the skills extension is not declared",
    ),
    **dict.fromkeys(
        [
            f"tasks-{name}"
            for name in (
                "lifecycle",
                "capability-negotiation",
                "wire-fields",
                "request-state-removal",
                "mrtr-input",
                "request-headers",
                "dispatch-and-envelope",
                "status-notifications",
                "required-task-error",
                "mrtr-composition",
            )
        ],
        "the tasks extension is not declared",
    ),
}


def test_every_scenario_is_classified(node_bin: Path) -> None:
    listed = subprocess.run(
        [str(node_bin / "node"), str(node_bin / "conformance"), "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    server_part = listed.split("Client scenarios")[0]
    scenarios = {line.strip()[2:].split(" ")[0] for line in server_part.splitlines() if line.strip().startswith("- ")}
    assert scenarios, listed
    assert scenarios - set(SCENARIOS) - set(NOT_APPLICABLE) == set(), "new scenarios: run them, then classify them"


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
        [
            str(node_bin / "node"),
            str(node_bin / "conformance"),
            "server",
            "--url",
            server_url,
            "--scenario",
            scenario,
            "--output-dir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=child_env(NO_COLOR="1", PATH=f"{node_bin}{os.pathsep}{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    checks = [check for file in tmp_path.rglob("checks.json") for check in json.loads(file.read_text())]
    failed = [check for check in checks if check["status"] not in ("SUCCESS", "INFO")]
    report = f"conformance {scenario}: exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert result.returncode == 0 and checks and not failed, report + json.dumps(failed, indent=2)
    assert any(check["status"] == "SUCCESS" for check in checks), report
