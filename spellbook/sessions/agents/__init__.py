"""Codex CLI and Gemini CLI: where their hooks live, which of their events Spellbook answers, how
a hook's answer is written for them, and how their transcripts are read (codex.py, gemini.py).

Both CLIs take Claude Code's hook layout (``{"hooks": {Event: [{"hooks": [{"type": "command",
"command": ...}]}]}}``), so sessions/install.py writes and recognises them; what differs:

    codex   file  user $CODEX_HOME/hooks.json (default ~/.codex)   project <project>/.codex/hooks.json
            events SessionStart, UserPromptSubmit, Stop (after each turn), PreCompact; timeout in seconds
    gemini  file  user ~/.gemini/settings.json ("hooks")            project <project>/.gemini/settings.json
            events SessionStart, BeforeAgent (the prompt), AfterAgent (after each turn), PreCompress,
            SessionEnd; timeout in milliseconds

Each command runs ``spellbook hook <Event> --agent <agent>``; hook.py maps the agent's event onto
its own (``SPELLBOOK_EVENTS``) and answers SessionStart and the prompt in the JSON both CLIs read
(``hookSpecificOutput.additionalContext``), since Gemini takes nothing but JSON on stdout.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

AGENTS = ("codex", "gemini")
# The agent's event -> the event hook.py runs for it.
SPELLBOOK_EVENTS = {
    "codex": {
        "SessionStart": "SessionStart",
        "UserPromptSubmit": "UserPromptSubmit",
        "Stop": "Stop",
        "PreCompact": "PreCompact",
    },
    "gemini": {
        "SessionStart": "SessionStart",
        "BeforeAgent": "UserPromptSubmit",
        "AfterAgent": "Stop",
        "PreCompress": "PreCompact",
        "SessionEnd": "SessionEnd",
    },
}
PROMPT_EVENT = {"codex": "UserPromptSubmit", "gemini": "BeforeAgent"}
TIMEOUTS = {  # the unit each CLI reads: Codex seconds, Gemini milliseconds
    "codex": {"SessionStart": 30, "UserPromptSubmit": 10, "Stop": 30, "PreCompact": 30},
    "gemini": {
        "SessionStart": 30_000,
        "BeforeAgent": 10_000,
        "AfterAgent": 30_000,
        "PreCompress": 30_000,
        "SessionEnd": 30_000,
    },
}


def hooks_path(
    agent: str,
    scope: str,
    *,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> Path:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    base = (project or Path.cwd()) if scope == "project" else None
    if agent == "codex":
        folder = base / ".codex" if base else Path(env.get("CODEX_HOME") or home / ".codex")
        return folder / "hooks.json"
    return (base or home) / ".gemini" / "settings.json"


def hook_commands(agent: str, command: str, vault: Path | None, prompt_recall: bool = False) -> dict[str, str]:
    """The agent's event -> the command line it runs."""
    tail = f" --vault {shlex.quote(str(Path(vault).expanduser().absolute()))}" if vault is not None else ""
    out = {}
    for event in SPELLBOOK_EVENTS[agent]:
        if event == PROMPT_EVENT[agent] and not prompt_recall:
            continue
        out[event] = f"{shlex.quote(command)} hook {event} --agent {agent}{tail}"
        if event == PROMPT_EVENT[agent]:
            out[event] += " --prompt-recall"
    return out


def answer(agent: str, event: str, text: str) -> str:
    """What the hook prints for ``event`` with ``text`` for the model: the JSON both CLIs read."""
    if not text:
        return ""
    name = (
        "UserPromptSubmit"
        if event == "userpromptsubmit" and agent == "codex"
        else ("BeforeAgent" if event == "userpromptsubmit" else "SessionStart")
    )
    return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}, ensure_ascii=False)


def read_session(agent: str | None, file: Path, session_id: str | None) -> Any:
    """The transcript at ``file`` as a ``Session``, read in ``agent``'s format (Claude Code's by default)."""
    if agent == "codex":
        from spellbook.sessions.agents.codex import read_rollout

        return read_rollout(file, session_id)
    if agent == "gemini":
        from spellbook.sessions.agents.gemini import read_chat

        return read_chat(file, session_id)
    from spellbook.sessions.transcript import read_transcript

    return read_transcript(file, session_id)
