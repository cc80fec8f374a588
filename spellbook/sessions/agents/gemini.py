"""A Gemini CLI chat (``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``, or the older
one-object ``.json``) -> a ``Session``.

The JSONL file starts with the session's metadata (``sessionId``, ``startTime``...); then each
line is a message (``{"id", "timestamp", "type", "content", ...}``, written again under the same
id when its tool calls complete: the last write wins) or a ``{"$set": {...}}`` update of the
metadata, whose ``messages`` replace the list. ``type: "user"`` messages hold a prompt (text
parts; the hook's own context arrives wrapped in ``<hook_context>``, Gemini's set-up in
``<session_context>``, both left out) or tool results (``functionResponse`` parts);
``type: "gemini"`` messages hold the answer (``content``) and ``toolCalls`` (``name``, ``args``).
The chat does not record the working directory: the hook's payload gives it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from spellbook.sessions.transcript import (
    MAX_TRANSCRIPT_BYTES,
    Session,
    Turn,
    _add_tool,
    open_regular,
    strip_private,
)

_WRAPPED = re.compile(r"<(hook_context|session_context)>.*?(?:</\1>|\Z)", re.DOTALL)
# Gemini's built-in tools under Claude Code's names, so a project's notes read alike.
_TOOLS = {
    "run_shell_command": "Bash",
    "replace": "Edit",
    "write_file": "Write",
    "read_file": "Read",
    "grep_search": "Grep",
    "glob": "Glob",
    "web_fetch": "WebFetch",
}


def read_chat(file: Path, session_id: str | None = None) -> Session:
    with open_regular(file) as f:  # a regular file only, bounded (as a Claude Code transcript)
        text = f.read(MAX_TRANSCRIPT_BYTES).decode("utf-8", "replace")
    meta, messages = _records(text)
    session = Session(session_id or str(meta.get("sessionId") or file.stem), source="gemini")
    current: Turn | None = None
    for message in messages:
        when = message.get("timestamp") if isinstance(message.get("timestamp"), str) else None
        if when:
            session.started = min(session.started or when, when)
            session.ended = max(session.ended or when, when)
        if message.get("type") == "user":
            prompt = _prompt(message.get("content"))
            if prompt:
                current = Turn(prompt=prompt, prompt_time=when or "")
                session.exchanges.append(current)
        elif message.get("type") == "gemini" and current is not None:
            for call in message.get("toolCalls") or []:
                if isinstance(call, dict):
                    name = str(call.get("name") or "?")
                    args = call.get("args") if isinstance(call.get("args"), dict) else {}
                    if name.startswith("mcp_") and name.count("_") >= 2:  # mcp_<server>_<tool>, as Claude names it
                        server, tool = name[4:].split("_", 1)
                        name = f"mcp__{server}__{tool}"
                    _add_tool(current, _TOOLS.get(name, name), args, when)
            text = strip_private(_text(message.get("content"))).strip()
            if text:
                current.answer, current.answer_time = text, when
    return session


def _records(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metadata, messages in order, each as last written)."""
    stripped = text.lstrip()
    if stripped.startswith("{") and "\n{" not in stripped.rstrip():  # the one-object .json form
        try:
            whole = json.loads(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return whole, [m for m in whole["messages"] if isinstance(m, dict)]
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("$set"), dict):
            update = record["$set"]
            if isinstance(update.get("messages"), list):
                messages = {str(m.get("id", i)): m for i, m in enumerate(update["messages"]) if isinstance(m, dict)}
            meta.update({k: v for k, v in update.items() if k != "messages"})
        elif "type" in record and "id" in record:
            messages[str(record["id"])] = {**messages.get(str(record["id"]), {}), **record}
        else:
            meta.update(record)
    return meta, list(messages.values())


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _prompt(content: Any) -> str:
    if isinstance(content, list) and any(isinstance(p, dict) and "functionResponse" in p for p in content):
        return ""
    return strip_private(_WRAPPED.sub("", _text(content))).strip()
