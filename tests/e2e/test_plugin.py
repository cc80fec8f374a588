"""The Claude Code plugin (.claude-plugin/, plugin/) with the real Claude Code, offline.

The repository is a plugin marketplace: a clone of it is added with ``claude plugin marketplace
add``, the plugin installed with its vault option, and a ``claude -p`` session (the stub model of
test_sessions_claude.py) gets the SessionStart context and Spellbook's tools under the plugin's
names. The plugin and ``install claude-code --hooks`` never both run the hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.claude_stub import STUB, Stub, wait_for_captures
from tests.helpers.processes import SPELLBOOK, claude_env

pytestmark = pytest.mark.slow

if not STUB.is_file():
    pytest.skip(f"the stub model is not at {STUB} (it lives in the shared tools folder)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "plugin" / "bin" / "spellbook-plugin"
PREFIX = "mcp__plugin_spellbook_spellbook__"


def claude(node_bin: Path, *args: str, env: dict, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(node_bin / "claude"), *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_repository_validates_as_a_marketplace_and_a_plugin(tmp_path: Path, node_bin: Path) -> None:
    env = claude_env(tmp_path)
    done = claude(node_bin, "plugin", "validate", str(ROOT), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation failed" not in done.stdout
    for part in ("SessionStart", "SessionEnd", "mcpServers: spellbook", "spellbook:remember", "spellbook:forget"):
        assert part in done.stdout, done.stdout


def test_plugin_installs_from_the_local_marketplace_and_a_session_uses_it(tmp_path: Path, node_bin: Path) -> None:
    home, project, vault, clone = tmp_path / "home", tmp_path / "shop", tmp_path / "vault", tmp_path / "clone"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)  # what a person clones: tracked files
    env = claude_env(home)
    env["PATH"] = f"{Path(SPELLBOOK).parent}:{env['PATH']}"  # the launcher finds this worktree's spellbook
    added = claude(node_bin, "plugin", "marketplace", "add", str(clone), env=env, cwd=project)
    assert added.returncode == 0, added.stdout + added.stderr
    installed = claude(
        node_bin, "plugin", "install", "spellbook@spellbook", "--config", f"vault={vault}", env=env, cwd=project
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shown = claude(node_bin, "plugin", "configure", "spellbook@spellbook", "--json", env=env, cwd=project)
    assert json.loads(shown.stdout)["inputs"]["vault"] == str(vault)

    # The session: SessionStart's context reaches the model; the plugin's MCP server answers a tool call.
    stub = Stub(
        tmp_path,
        [
            {"tool": PREFIX + "scribe", "input": {"text": "Pool the payment client.", "title": "Pool"}},
            {"text": "Stored."},
        ],
    )
    try:
        run_env = dict(env, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{stub.port}", ANTHROPIC_API_KEY="stub-key")
        done = claude(
            node_bin,
            "-p",
            "Remember to pool the payment client",
            "--allowedTools",
            PREFIX + "*",
            env=run_env,
            cwd=project,
        )
        requests = [r for r in stub.requests() if r.get("tools")]
    finally:
        stub.close()
    assert done.returncode == 0 and "Stored." in done.stdout, done.stdout + done.stderr
    assert vault.is_dir()  # the plugin made the vault on first use
    assert "Spellbook memory for project shop" in json.dumps(requests[0])
    assert any("Pool" in p.read_text() for p in vault.rglob("*.md") if ".spellbook" not in p.parts)
    # Stop and SessionEnd both capture; one may fail when it reaches the MCP server as `claude -p` closes
    # it ("the index is closing"), so wait for one capture, not two.
    log = wait_for_captures(vault, 1)
    notes = list((vault / "sessions" / "shop").glob("*.md"))
    assert len(notes) == 1, log

    # Settings hooks beside the plugin: refused, nothing written.
    refused = subprocess.run(
        [SPELLBOOK, "install", "claude-code", "--hooks", "--vault", str(vault)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0 and "spellbook@spellbook" in refused.stderr, refused.stderr
    assert not (home / ".claude" / "settings.json").read_text().count("hook SessionStart")


def test_plugin_hook_stands_down_when_settings_hooks_exist(tmp_path: Path) -> None:
    from spellbook.sessions.install import hook_commands, install_hooks

    home, vault = tmp_path / "home", tmp_path / "vault"
    (home / ".claude").mkdir(parents=True)
    env = dict(
        claude_env(home),
        PATH=f"{Path(SPELLBOOK).parent}:{os.environ['PATH']}",
        CLAUDE_PLUGIN_OPTION_VAULT=str(vault),
        CLAUDE_PLUGIN_ROOT=str(ROOT),
    )
    payload = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "SessionStart"})
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    subprocess.run([SPELLBOOK, "index", "--vault", str(vault)], env=env, check=True, capture_output=True)
    alone = subprocess.run(
        [str(LAUNCHER), "hook", "SessionStart"],
        input=payload,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert alone.returncode == 0 and "Spellbook memory" in alone.stdout, alone.stderr
    install_hooks(home / ".claude" / "settings.json", hook_commands(SPELLBOOK, vault))
    both = subprocess.run(
        [str(LAUNCHER), "hook", "SessionStart"],
        input=payload,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert both.returncode == 0 and both.stdout == ""
    assert "the plugin's stand down" in (vault / ".spellbook" / "hooks.log").read_text()


def test_first_start_without_spellbook_installs_in_the_background(tmp_path: Path) -> None:
    """No spellbook anywhere: the hook starts `uv tool install <plugin>` detached and returns at once."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    record = tmp_path / "uv-args"
    release = tmp_path / "release"  # the fake install runs until the test is done with it (30 s at most)
    (bin_dir / "uv").write_text(
        f'#!/bin/sh\necho "$@" >> {record}\nfor i in $(seq 300); do [ -e {release} ] && exit 0; sleep 0.1; done\n'
    )
    (bin_dir / "uv").chmod(0o755)
    env = {"HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin", "CLAUDE_PLUGIN_ROOT": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run(
        [str(LAUNCHER), "hook", "SessionStart"],
        input="{}",
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == "" and took < 5, (took, done.stderr)
    deadline = time.monotonic() + 10
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert record.read_text().split() == ["tool", "install", str(ROOT)]
    again = subprocess.run(
        [str(LAUNCHER), "hook", "SessionStart"],
        input="{}",
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert again.returncode == 0  # an install under way is not started twice (the marker folder)
    assert (home / ".cache" / "spellbook-plugin" / "installing").is_dir()
    time.sleep(0.5)  # time enough for a second `uv` to have written its line
    assert record.read_text().splitlines() == [f"tool install {ROOT}"]  # not started a second time
    release.touch()
    deadline = time.monotonic() + 10
    while (home / ".cache" / "spellbook-plugin" / "installing").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (home / ".cache" / "spellbook-plugin" / "installing").exists()  # the marker goes when it ends
