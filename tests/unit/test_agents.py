"""Codex CLI and Gemini CLI: their config files (install/uninstall), hooks, transcripts, doctor."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from spellbook.cli import clients, doctor
from spellbook.cli.clients import ClientConfigError, install, server_entry, uninstall
from spellbook.config import Settings
from spellbook.sessions import agents
from spellbook.sessions.agents.codex import read_rollout
from spellbook.sessions.agents.gemini import read_chat
from spellbook.sessions.install import install_hooks, installed_hooks, plugin_ids, uninstall_hooks
from spellbook.sessions.notes import render_session

CMD = "/opt/sb/bin/spellbook"


@pytest.fixture
def where(tmp_path: Path) -> dict:
    return {"home": tmp_path / "home", "env": {}, "project": tmp_path / "proj", "platform": "linux"}


def entry(vault: str = "/notes") -> dict:
    return server_entry(command=CMD, vault=Path(vault))


HAND_WRITTEN = """# my codex settings
model = "o3"  # keep

[mcp_servers.github]
command = "npx"
args = ["-y", "@github/mcp"]

[mcp_servers.spellbook]
command = "/old/spellbook"
args = ["serve"]

[mcp_servers.spellbook.env]
SPELLBOOK_EMBEDDER = "hashing"

[projects."/src/app"]
trust_level = "trusted"
"""


def test_codex_install_replaces_only_its_table_and_is_idempotent(where: dict) -> None:
    file = clients.config_path("codex", **{k: v for k, v in where.items()})
    file.parent.mkdir(parents=True)
    file.write_text(HAND_WRITTEN)
    first = install("codex", entry=entry(), **where)
    text = file.read_text()
    assert first.changed and first.backup is not None and first.backup.read_text() == HAND_WRITTEN
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["spellbook"] == {"command": CMD, "args": ["serve", "--vault", "/notes"]}
    assert parsed["mcp_servers"]["github"]["args"] == ["-y", "@github/mcp"]
    assert parsed["projects"] == {"/src/app": {"trust_level": "trusted"}} and parsed["model"] == "o3"
    for line in ("# my codex settings", 'model = "o3"  # keep', '[projects."/src/app"]'):
        assert line in text  # every other line stays as written, comments too
    assert "SPELLBOOK_EMBEDDER" not in text  # the old entry's sub-table went with it
    mtime = file.stat().st_mtime_ns
    second = install("codex", entry=entry(), **where)
    assert not second.changed and file.stat().st_mtime_ns == mtime
    removed = uninstall("codex", **where)
    assert removed.changed and "spellbook" not in tomllib.loads(file.read_text())["mcp_servers"]
    assert "[mcp_servers.github]" in file.read_text() and "# my codex settings" in file.read_text()


def test_codex_entries_it_cannot_edit_safely_are_refused_untouched(where: dict) -> None:
    file = clients.config_path("codex", **where)
    file.parent.mkdir(parents=True)
    for text in ('mcp_servers = { spellbook = { command = "x" } }\n', "model = [unclosed\n"):
        file.write_text(text)
        with pytest.raises(ClientConfigError, match="nothing was written"):
            install("codex", entry=entry(), **where)
        assert file.read_text() == text
        assert not list(file.parent.glob("*.bak"))


def test_codex_and_gemini_http_entries_use_their_own_keys(where: dict) -> None:
    remote = server_entry(command=CMD, http_url="http://127.0.0.1:8765/mcp", token="t0k")
    install("codex", entry=remote, **where)
    install("gemini", entry=remote, **where)
    codex = tomllib.loads(clients.config_path("codex", **where).read_text())["mcp_servers"]["spellbook"]
    assert codex == {"url": "http://127.0.0.1:8765/mcp", "http_headers": {"Authorization": "Bearer t0k"}}
    gemini = json.loads(clients.config_path("gemini", **where).read_text())["mcpServers"]["spellbook"]
    assert gemini == {"httpUrl": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer t0k"}}
    assert clients.config_path("codex", "project", **where) == where["project"] / ".codex" / "config.toml"
    assert clients.config_path("codex", env={"CODEX_HOME": "/c"}, home=where["home"]) == Path("/c/config.toml")


def test_gemini_hooks_keep_other_hooks_and_count_milliseconds(tmp_path: Path) -> None:
    file = tmp_path / ".gemini" / "settings.json"
    file.parent.mkdir()
    theirs = {"type": "command", "command": "lint.sh", "timeout": 500}
    file.write_text(json.dumps({"ui": {"theme": "x"}, "hooks": {"AfterAgent": [{"hooks": [theirs]}]}}))
    commands = agents.hook_commands("gemini", CMD, tmp_path / "v", prompt_recall=True)
    assert set(commands) == {"SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd"}
    assert commands["BeforeAgent"].endswith("--prompt-recall") and "--agent gemini" in commands["SessionStart"]
    install_hooks(file, commands, agents.TIMEOUTS["gemini"])
    config = json.loads(file.read_text())
    assert config["ui"] == {"theme": "x"} and config["hooks"]["AfterAgent"][0]["hooks"] == [theirs]
    assert config["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 30_000
    assert set(installed_hooks(file)) == set(commands)
    uninstall_hooks(file)
    assert json.loads(file.read_text())["hooks"] == {"AfterAgent": [{"hooks": [theirs]}]}


def test_hook_answers_are_the_json_both_clis_read() -> None:
    start = json.loads(agents.answer("codex", "sessionstart", "memo"))
    assert start == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "memo"}}
    assert json.loads(agents.answer("gemini", "userpromptsubmit", "m"))["hookSpecificOutput"]["hookEventName"] == (
        "BeforeAgent"
    )
    assert agents.answer("gemini", "sessionstart", "") == ""


def line(kind: str, payload: dict, second: int) -> str:
    return json.dumps({"timestamp": f"2026-11-28T05:29:{second:02d}Z", "type": kind, "payload": payload}) + "\n"


def test_codex_rollout_becomes_a_session(tmp_path: Path) -> None:
    file = tmp_path / "rollout-2026-11-28T05-29-01a2.jsonl"
    text = "".join(
        [
            line("session_meta", {"id": "01a2", "cwd": "/src/shop", "git": {"branch": "main"}}, 0),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "<spellbook-memory>x"}],
                },
                1,
            ),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "<environment_context>..."}],
                },
                1,
            ),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Why is checkout slow? <private>pw hunter2</private>"}],
                },
                2,
            ),
            line(
                "response_item",
                {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": "pytest -q"})},
                3,
            ),
            line(
                "response_item",
                {
                    "type": "custom_tool_call",
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n*** Update File: src/pay.py\n@@\n-a\n+b\n*** End Patch",
                },
                4,
            ),
            line(
                "response_item",
                {
                    "type": "function_call",
                    "namespace": "mcp__spellbook",
                    "name": "scribe",
                    "arguments": json.dumps({"title": "Pool payment", "text": "..."}),
                },
                5,
            ),
            line("event_msg", {"type": "token_count"}, 5),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Pooled the client."}],
                },
                6,
            ),
            "not json\n",
        ]
    )
    file.write_text(text)
    session = read_rollout(file)
    assert (session.session_id, session.cwd, session.branch, session.source) == ("01a2", "/src/shop", "main", "codex")
    [x] = session.exchanges
    assert x.prompt == "Why is checkout slow?" and x.answer == "Pooled the client."
    assert [name for name, _ in x.tools] == ["Bash", "Edit", "mcp__spellbook__scribe"]
    assert x.files == ["src/pay.py"] and x.insights == ["Pool payment"]
    [note] = render_session(session)
    assert note.fields["source"] == "codex" and note.fields["context"] == "shop"
    assert note.body.startswith("Codex session `01a2`") and "hunter2" not in note.body


def test_gemini_chat_jsonl_last_write_wins_and_hook_context_is_left_out(tmp_path: Path) -> None:
    file = tmp_path / "session-2026-11-28T05-31-e628.jsonl"
    records = [
        {"sessionId": "e628", "projectHash": "ab", "startTime": "2026-11-28T05:31:53Z", "kind": "main"},
        {
            "$set": {
                "messages": [
                    {
                        "id": "m0",
                        "timestamp": "2026-11-28T05:31:53Z",
                        "type": "user",
                        "content": [{"text": "<session_context>\nThe Gemini CLI.</session_context>"}],
                    }
                ]
            }
        },
        {
            "id": "m1",
            "timestamp": "2026-11-28T05:31:54Z",
            "type": "user",
            "content": [{"text": "<hook_context>&lt;spellbook-memory&gt;old</hook_context>\n\nWhy is checkout slow?"}],
        },
        {"id": "m2", "timestamp": "2026-11-28T05:31:55Z", "type": "gemini", "content": ""},
        {
            "id": "m2",
            "timestamp": "2026-11-28T05:31:55Z",
            "type": "gemini",
            "content": "",
            "toolCalls": [
                {"name": "mcp_spellbook_scribe", "args": {"title": "Pool payment", "text": "..."}},
                {"name": "run_shell_command", "args": {"command": "pytest", "description": "Run the tests"}},
            ],
        },
        {
            "id": "m3",
            "timestamp": "2026-11-28T05:31:56Z",
            "type": "user",
            "content": [{"functionResponse": {"name": "mcp_spellbook_scribe", "response": {}}}],
        },
        {"$set": {"lastUpdated": "2026-11-28T05:31:56Z"}},
        {"id": "m4", "timestamp": "2026-11-28T05:31:57Z", "type": "gemini", "content": "Pooled the client."},
    ]
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read_chat(file)
    assert session.session_id == "e628" and session.source == "gemini" and session.cwd is None
    [x] = session.exchanges
    assert x.prompt == "Why is checkout slow?" and x.answer == "Pooled the client."
    assert [name for name, _ in x.tools] == ["mcp__spellbook__scribe", "Bash"] and x.insights == ["Pool payment"]
    whole = tmp_path / "session-old.json"  # the one-object form of older versions
    whole.write_text(json.dumps({"sessionId": "old", "messages": [records[2], records[7]]}))
    assert [x.answer for x in read_chat(whole).exchanges] == ["Pooled the client."]


def test_doctor_reports_agent_hooks_and_the_plugin(tmp_path: Path) -> None:
    home, vault = tmp_path / "home", tmp_path / "vault"
    vault.mkdir()
    settings = Settings(vault=vault)
    for agent in agents.AGENTS:
        install_hooks(
            agents.hooks_path(agent, "user", home=home, env={}),
            agents.hook_commands(agent, CMD, vault),
            agents.TIMEOUTS[agent],
        )
    checks = doctor.agent_hook_checks(settings, home=home, env={}, project=tmp_path)
    assert [(c["check"], c["status"]) for c in checks] == [("codex hooks (user)", "ok"), ("gemini hooks (user)", "ok")]
    assert "/hooks" in checks[0]["detail"]  # Codex asks the person to trust new hooks
    other = Settings(vault=tmp_path)
    assert {c["status"] for c in doctor.agent_hook_checks(other, home=home, env={}, project=tmp_path)} == {"warn"}

    assert plugin_ids(home=home, env={}) == []
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "installed_plugins.json").write_text(
        json.dumps({"version": 2, "plugins": {"spellbook@spellbook": [{}], "other@x": [{}]}})
    )
    assert plugin_ids(home=home, env={}) == ["spellbook@spellbook"]
    checks = doctor.hook_checks(settings, home=home, env={}, project=tmp_path)
    assert ("claude-code plugin", "ok") in [(c["check"], c["status"]) for c in checks]


def test_gemini_uninstall_keeps_a_backup_of_the_file_as_it_was(tmp_path: Path) -> None:
    """The MCP entry and the hooks share Gemini's settings.json: two writes in one second, two backups."""
    import subprocess

    from tests.helpers.processes import SPELLBOOK, child_env

    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    env = child_env(HOME=str(home))
    for verb in ("install", "uninstall"):
        subprocess.run(
            [SPELLBOOK, verb, "gemini", *(["--vault", str(tmp_path)] if verb == "install" else [])],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        if verb == "install":
            installed = (home / ".gemini" / "settings.json").read_text()
    backups = sorted((home / ".gemini").glob("settings.json.*bak"), key=lambda p: p.stat().st_mtime_ns)
    assert installed in [b.read_text() for b in backups]  # the state before uninstall is kept
    assert len({b.read_text() for b in backups}) == len(backups) == 3
