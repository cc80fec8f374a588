"""A Codex CLI rollout (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``) -> a ``Session``.

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` holds the session's id, cwd and
git branch; ``response_item`` lines hold the conversation as the model saw it: ``message`` (role
``user``: a prompt, or context Codex itself adds, which starts with a tag such as
``<environment_context>``; role ``assistant``: the answer), ``function_call`` (``exec_command``,
an MCP tool as ``namespace`` ``mcp__<server>`` plus ``name``) and ``custom_tool_call``
(``apply_patch``, whose patch names the files it changes). Tools are recorded under Claude Code's
names where one matches (a shell command as Bash, a patched file as Edit), so a project's notes
read alike whichever agent wrote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from spellbook.sessions.transcript import Session, Turn, _add_tool, json_lines, strip_private

_PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_SHELL = {"exec_command", "shell", "local_shell", "container.exec", "shell_command"}


def read_rollout(file: Path, session_id: str | None = None) -> Session:
    session = Session(session_id or "", source="codex")
    current: Turn | None = None
    for entry in json_lines(file):
        if not isinstance(entry.get("payload"), dict):
            continue
        kind, payload, when = entry.get("type"), entry["payload"], entry.get("timestamp")
        if kind == "session_meta":
            session.session_id = session.session_id or str(payload.get("id") or "")
            session.cwd = session.cwd or payload.get("cwd")
            git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
            session.branch = session.branch or git.get("branch")
            continue
        if kind != "response_item":
            continue
        if isinstance(when, str):
            session.started = min(session.started or when, when)
            session.ended = max(session.ended or when, when)
        current = _item(session, current, payload, when)
    session.session_id = session.session_id or file.stem
    return session


def _item(session: Session, current: Turn | None, item: dict[str, Any], when: str | None) -> Turn | None:
    kind = item.get("type")
    if kind == "message":
        text = "\n".join(
            str(b.get("text", ""))
            for b in item.get("content") or []
            if isinstance(b, dict) and b.get("type") in ("input_text", "output_text", "text")
        )
        text = strip_private(text).strip()
        if item.get("role") == "user" and text and not text.startswith(("<", "# AGENTS.md")):
            current = Turn(prompt=text, prompt_time=when or "")
            session.exchanges.append(current)
        elif item.get("role") == "assistant" and text and current is not None:
            current.answer, current.answer_time = text, when
        return current
    if current is None:
        return current
    if kind == "function_call":
        try:
            params = json.loads(item.get("arguments") or "{}")
        except ValueError:
            params = {}
        params = params if isinstance(params, dict) else {}
        name = str(item.get("name") or "?")
        if item.get("namespace"):
            name = f"{item['namespace']}__{name}"
        if name in _SHELL:
            command = params.get("cmd") or params.get("command")
            command = " ".join(command) if isinstance(command, list) else str(command or "")
            _add_tool(current, "Bash", {"command": command}, when)
        else:
            _add_tool(current, name, params, when)
    elif kind == "custom_tool_call":
        name, text = str(item.get("name") or "?"), str(item.get("input") or "")
        files = _PATCHED.findall(text) if name == "apply_patch" else []
        for path in files:
            _add_tool(current, "Edit", {"file_path": path.strip()}, when)
        if not files:
            _add_tool(current, name, {}, when)
    return current
