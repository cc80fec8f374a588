"""A Claude Code transcript (its JSONL file) -> a ``Session`` of exchanges. Pure, standard library only.

Claude Code appends one JSON object a line to ``~/.claude/projects/<project>/<session>.jsonl``:
``type: "user"`` entries hold a prompt (``message.content`` a string, or text blocks) or the
results of tools (``tool_result`` blocks); ``type: "assistant"`` entries hold text and
``tool_use`` blocks (one entry per block, several per API message); other types (attachments,
hook summaries, queue operations, summaries) carry no conversation. Sidechains (sub-agents) and
meta entries (slash-command plumbing) are left out. Each prompt opens a ``Turn``: the tools
that followed, the files they changed, the scribes to Spellbook (insights), and the last text the
assistant wrote before the next prompt (its final answer).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

MAX_TRANSCRIPT_BYTES = 200 * 1024 * 1024  # read at most this much, even of a file that grows meanwhile
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer line (a pasted image, or no newline at all) is skipped
EDIT_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
_PRIVATE = re.compile(r"<private(?:\s[^<>]*)?>.*?(?:</private\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_PLUMBING = ("<command-", "<local-command", "<bash-", "<system-reminder>", "Caveat: The messages below")


@dataclass
class Turn:
    """One exchange of a session: a prompt, the tools that followed, and the answer."""

    prompt: str
    prompt_time: str
    tools: list[tuple[str, str]] = field(default_factory=list)  # (tool name, one-line summary)
    tool_time: str | None = None
    files: list[str] = field(default_factory=list)  # changed by Write/Edit/MultiEdit/NotebookEdit
    insights: list[str] = field(default_factory=list)  # what the agent scribed to Spellbook
    commands: list[tuple[str, bool | None]] = field(default_factory=list)  # (Bash command, passed; None: no result)
    answer: str = ""
    answer_time: str | None = None


@dataclass
class Session:
    session_id: str
    cwd: str | None = None
    branch: str | None = None
    started: str | None = None
    ended: str | None = None
    exchanges: list[Turn] = field(default_factory=list)
    source: str = "claude-code"  # the agent that wrote the transcript: claude-code, codex, gemini


def strip_private(text: str) -> str:
    """Text with every ``<private>...</private>`` span removed (an unclosed one runs to the end)."""
    return _PRIVATE.sub("", text)


def read_transcript(file: Path, session_id: str | None = None) -> Session:
    """Parse a transcript file; unreadable lines are skipped (Claude Code may be appending). The path
    comes from the hook's input: only a regular file is read (``ValueError`` for a FIFO, a device, a
    folder, refused without blocking), at most ``MAX_TRANSCRIPT_BYTES``, lines up to ``MAX_LINE_BYTES``."""
    return parse_entries(json_lines(file), session_id or file.stem)


def json_lines(file: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL transcript (bounded as ``read_transcript`` says), one a line;
    lines that do not parse are skipped."""
    entries: list[dict[str, Any]] = []
    for line in _lines(file):
        try:
            entry = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def open_regular(file: Path) -> BinaryIO:
    """``file`` opened for reading if it is a regular file of at most ``MAX_TRANSCRIPT_BYTES``;
    ``ValueError`` otherwise (a FIFO, a device, a folder: refused without blocking)."""
    # O_NONBLOCK: opening a FIFO with no writer returns at once (then refused), instead of waiting.
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"transcript {file} is not a regular file")
        if info.st_size > MAX_TRANSCRIPT_BYTES:
            raise ValueError(f"transcript {file} is over {MAX_TRANSCRIPT_BYTES} bytes")
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb")


def _lines(file: Path) -> Iterator[bytes]:
    with open_regular(file) as f:
        budget = MAX_TRANSCRIPT_BYTES
        while budget > 0:
            line = f.readline(min(MAX_LINE_BYTES + 1, budget))
            budget -= len(line)
            if not line:
                return
            if len(line) <= MAX_LINE_BYTES:
                yield line
                continue
            while line and not line.endswith(b"\n") and budget > 0:  # the rest of the long line
                line = f.readline(min(MAX_LINE_BYTES, budget))
                budget -= len(line)


def parse_entries(entries: list[dict[str, Any]], session_id: str) -> Session:
    session = Session(session_id)
    current: Turn | None = None
    pending: dict[str, tuple[Turn, int]] = {}  # a Bash tool_use id -> its command, until its result
    for entry in entries:
        kind, when = entry.get("type"), entry.get("timestamp")
        if kind not in ("user", "assistant") or entry.get("isSidechain"):
            continue
        session.cwd = session.cwd or entry.get("cwd")
        session.branch = session.branch or entry.get("gitBranch")
        if isinstance(when, str):
            session.started = min(session.started or when, when)
            session.ended = max(session.ended or when, when)
        content = (entry.get("message") or {}).get("content")
        if kind == "user":
            _command_results(content, pending)
            prompt = _prompt_text(entry, content)
            if prompt:
                current = Turn(prompt=prompt, prompt_time=when or "")
                session.exchanges.append(current)
            continue
        if current is None or not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                current.answer, current.answer_time = strip_private(block["text"]).strip(), when
            elif block.get("type") == "tool_use":
                params = block.get("input") if isinstance(block.get("input"), dict) else {}
                _add_tool(current, str(block.get("name", "?")), params, when)
                if block.get("name") == "Bash" and isinstance(params.get("command"), str):
                    current.commands.append((" ".join(strip_private(params["command"]).split()), None))
                    pending[str(block.get("id"))] = (current, len(current.commands) - 1)
    return session


def _command_results(content: Any, pending: dict[str, tuple[Turn, int]]) -> None:
    """Mark the Bash commands whose results ``content`` holds passed or failed (``is_error``)."""
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            found = pending.pop(str(block.get("tool_use_id")), None)
            if found:
                exchange, n = found
                exchange.commands[n] = (exchange.commands[n][0], not block.get("is_error"))


def _prompt_text(entry: dict[str, Any], content: Any) -> str:
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("toolUseResult") is not None:
        return ""
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return ""
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    if not isinstance(content, str):
        return ""
    text = strip_private(content).strip()
    return "" if not text or text.startswith(_PLUMBING) else text


def _add_tool(exchange: Turn, name: str, params: dict[str, Any], when: str | None) -> None:
    exchange.tool_time = exchange.tool_time or when
    target = next(
        (
            str(params[k])
            for k in ("file_path", "notebook_path", "path", "pattern", "url", "query")
            if isinstance(params.get(k), str)
        ),
        "",
    )
    if name == "Bash":
        target = str(params.get("description") or params.get("command") or "")
    if name in EDIT_TOOLS and target and target not in exchange.files:
        exchange.files.append(target)
    if name.startswith("mcp__") and name.endswith("__scribe"):
        title = params.get("title") or params.get("text", "")
        exchange.insights.append(strip_private(str(title)).strip())
    # Whole: notes.py cuts it, after the privacy filter (a secret cut in two is not recognised)
    exchange.tools.append((name, " ".join(strip_private(target).split())))
