"""A ``Session`` -> the markdown notes it is stored as. Pure.

One note per session (docs/sessions.md has the measurement behind that choice), with one section
per event, headed ``<type> · <time> · <gist>`` where type is prompt, response, tool or insight
(``spellbook.index.filters.event_type_of`` reads it back). A long session continues in
``(part 2)``, ``(part 3)``... notes, so no note passes the vault's text limit; parts are filled
in order, so capturing the same session again rewrites the same parts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from spellbook.sessions.digest import Digest, digest, render
from spellbook.sessions.transcript import Session, Turn

SEP = " · "  # as spellbook.index.filters.EVENT_SEPARATOR (not imported: keeps the hook's imports light)
PART_CHARS = 30_000  # a part's body stays under this (the vault's default limit is 50,000)
PROMPT_CHARS = 2_000
ANSWER_CHARS = 2_000
GIST_CHARS = 70
TOOL_CHARS = 160  # of a tool's target (a command, a path); the privacy filter has seen all of it
INSIGHT_CHARS = 500
CATEGORY = "sessions"
AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
_PART = re.compile(r" \(part (\d+)\)$")


@dataclass(frozen=True)
class SessionNote:
    part: int
    title: str
    body: str
    fields: dict[str, Any]


def project_of(cwd: str | None) -> str:
    """The project a session belongs to: the name of the git repository holding ``cwd``, else
    the folder's name."""
    if not cwd:
        return "unknown"
    path = Path(cwd)
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder.name or "unknown"
    return path.name or "unknown"


def gist(text: str, limit: int = GIST_CHARS) -> str:
    """One line of at most ``limit`` characters, cut at a word."""
    line = " ".join(re.sub(r"[#*`>\[\]|]", " ", text).split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip(" ,.;:") + "…"


def part_of(title: str) -> int:
    match = _PART.search(title)
    return int(match.group(1)) if match else 1


def redact_session(session: Session, scrub: Callable[[str], str]) -> Session:
    """The session with ``scrub`` (the privacy filter) applied to every text it will store, whole:
    ``render_session`` cuts them afterwards."""
    exchanges = [
        replace(
            x,
            prompt=scrub(x.prompt),
            answer=scrub(x.answer),
            tools=[(n, scrub(t)) for n, t in x.tools],
            files=[scrub(f) for f in x.files],
            insights=[scrub(i) for i in x.insights],
            commands=[(scrub(c), ok) for c, ok in x.commands],
        )
        for x in session.exchanges
    ]
    return replace(session, exchanges=exchanges)


def render_session(session: Session, project: str | None = None, digested: Digest | None = None) -> list[SessionNote]:
    """The notes of a session (at least one when it has a prompt), part 1 first; part 1 opens with
    ``digested`` (the summariser's), else the extractive digest."""
    if not session.exchanges:
        return []
    project = project or project_of(session.cwd)
    date = (session.started or "")[:10] or "undated"
    base = f"{date} {gist(session.exchanges[0].prompt, 60)}".strip()
    sections = [_exchange_md(x) for x in session.exchanges]
    groups: list[list[str]] = [[]]
    size = 0
    for text in sections:
        if groups[-1] and size + len(text) > PART_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text)
    notes: list[SessionNote] = []
    for n, group in enumerate(groups, 1):
        title = base if n == 1 else f"{base} (part {n})"
        head = (
            f"{AGENT_NAMES.get(session.source, session.source)} session `{session.session_id}` in **{project}**"
            f"{f' (branch {session.branch})' if session.branch else ''}, "
            f"{_clock(session.started, True)} to {_clock(session.ended, True)}"
            f"{f', part {n} of {len(groups)}' if len(groups) > 1 else ''}.\n"
        )
        if n == 1:
            head += _summary(session, digested or digest(session))
        body = head + "\n" + "\n".join(group)
        fields = {
            "category": CATEGORY,
            "topic": project,
            "type": "session",
            "context": project,
            "session": session.session_id,
            "started": session.started,
            "ended": session.ended,
            "source": session.source,
            "tags": ["session", session.source],
        }
        notes.append(SessionNote(n, title, body, {k: v for k, v in fields.items() if v}))
    return notes


def _summary(session: Session, digested: Digest) -> str:
    """The head of part 1: the session's digest (sessions/digest.py), then its size and tools."""
    tools = Counter(name for x in session.exchanges for name, _ in x.tools)
    line = f"{len(session.exchanges)} prompts."
    if tools:
        line += " Tools: " + ", ".join(f"{name} ×{n}" for name, n in tools.most_common(12)) + "."
    return "\n" + render(digested) + "\n" + line + "\n"


def _exchange_md(x: Turn) -> str:
    out = [_section("prompt", x.prompt_time, x.prompt, PROMPT_CHARS)]
    if x.tools:
        counts = Counter(name for name, _ in x.tools)
        head = ", ".join(f"{name} ×{n}" for name, n in counts.most_common(6))
        lines = [f"- {name}: {summary[:TOOL_CHARS]}" if summary else f"- {name}" for name, summary in x.tools[:30]]
        if len(x.tools) > 30:
            lines.append(f"- … {len(x.tools) - 30} more")
        if x.files:
            lines.append("\nFiles changed: " + ", ".join(f"`{f}`" for f in x.files))
        out.append(f"## tool{SEP}{_clock(x.tool_time)}{SEP}{head}\n\n" + "\n".join(lines) + "\n")
    for insight in x.insights:
        out.append(_section("insight", x.tool_time, insight, INSIGHT_CHARS))
    if x.answer:  # headed by the prompt it answers: the answer is found by the question's words too
        out.append(_section("response", x.answer_time, x.answer, ANSWER_CHARS, head=x.prompt))
    return "\n".join(out)


def _section(kind: str, when: str | None, text: str, limit: int, head: str | None = None) -> str:
    if len(text) > limit:
        text = text[:limit].rstrip() + " …"
    # A line starting with '#' in a prompt or answer would open a section of its own: escape it.
    text = re.sub(r"^(\s{0,3})#", r"\1\\#", text, flags=re.MULTILINE)
    return f"## {kind}{SEP}{_clock(when)}{SEP}{gist(head or text)}\n\n{text}\n"


def _clock(when: str | None, with_date: bool = False) -> str:
    if not when:
        return "?"
    stamp = when.replace("T", " ")[:19]
    return (stamp + " UTC") if with_date else stamp[11:19] or stamp
