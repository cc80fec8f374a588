"""What a new session is told at SessionStart: a briefing on the project, within a token budget.

In order of what is kept first when the budget is short: what was left open (the open items of the
project's last sessions, newest first, minus those a later session took up), the project's durable
memories (decisions, failures, insights, successes: one line each with its id and the first
sentence of its text), the digests of the last sessions (newest first by when they happened, the
``started`` of their notes, not when they were captured), then the memories most relevant to the
project (searched by its name and the files its last commits changed), then the vault's index.
When two lines give different values for the same thing (``engine.differences.changed_value``:
"port 8000", "port 8080"), the older says that it changed and what it became; it is never shown as
current. Everything comes from the index owner through ``Hub.call``; nothing here opens the index.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spellbook.engine.differences import changed_value, numbers_of
from spellbook.git.repo import Git, GitFailed
from spellbook.sessions import digest as digests
from spellbook.sessions.quoting import estimate_tokens, one_line, quoted_block

CONTEXT_TOKENS = 1500  # budget of the context a new session is given
SESSIONS = 10  # the last sessions whose digests are read (one get_memories call)
DURABLE_TYPES = ("decision", "failure", "insight", "success")
CLAUDE_MEMORY_TAG = "claude-memory"  # Claude Code's own memory files, imported (sessions/claude_memory.py)
DURABLE = 12
RELEVANT = 6
OPEN_ITEMS = 8
_PART = re.compile(r" \(part \d+\)$")
_FACT = re.compile(r"- (?:Decided|Fixed|Outcome|decision|failure|insight|success)\b")
_NOT_VALUES = re.compile(r"\(from [^)]*\)|\(id [^)]*\)|\b(?:session )?id \S+|\d{4}-\d\d-\d\d(?:[T ][\d:]+Z?)?")
_WORD = re.compile(r"[^\W\d_]{4,}|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{2,}")


@dataclass
class Line:
    text: str
    rank: tuple[int, int]  # lower is kept first when the budget is short
    when: str = ""  # when what it says was said (for changed values)
    source: str = ""  # the note id it comes from
    order: int = 0  # where it is shown


def session_context(hub: Any, project: str, cwd: str | None, budget: int, semantic: bool) -> str:
    """The SessionStart text for ``project``; empty when the vault is empty. A vault with nothing of
    the project yet still gets its index, so the agent learns the memory is there."""
    scope = {"context": project}
    sessions = _last_sessions(hub, scope)
    durable = _durable(hub, scope)
    shown = {m["id"] for m in durable} | {s["id"] for s in sessions}
    query = " ".join([project, *recent_files(cwd)])
    found = hub.call(
        "memorize",
        {"query": query[:1_000], "limit": RELEVANT + 8, "mode": "hybrid" if semantic else "keyword", **scope},
    )
    relevant = [
        h
        for h in found["results"]
        if h.get("type") != "session" and h["id"] not in shown and not str(h.get("path", "")).startswith("system/")
    ][:RELEVANT]
    index = hub.call("get_index", scope)
    if not sessions and not durable and not relevant and not index.get("total_notes"):
        return ""
    name = one_line(project, 120)
    lines = [
        Line(f"# Spellbook memory for project {name}", (0, 0)),
        Line(
            "From earlier sessions and memories, newest first; ids open with get_memories, a session's "
            "events with timeline. A value marked (changed ...) was replaced later: use the newer one.",
            (0, 1),
        ),
    ]
    lines += _open_lines(sessions)
    lines += _durable_lines(durable)
    lines += _session_lines(sessions, name)
    if relevant:
        lines.append(Line("## Related memories", (4, 0)))
        lines += [
            Line(f"- {one_line(h['title'], 120)} (id {h['id']}): {one_line(h.get('snippet', ''), 200)}", (4, n + 1))
            for n, h in enumerate(relevant)
        ]
    lines += [Line(text, (6, 0)) for text in _index_lines(index)]
    _mark_changed(lines)
    for n, line in enumerate(lines):
        line.order = n
    return quoted_block([line.text for line in _fit(lines, budget)], budget)


def _last_sessions(hub: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """The project's last sessions (part 1 of each, which holds the digest), newest first by when
    they happened: the list is by when they were captured, so the titles' dates choose which to read."""
    listed = hub.call("list_memories", {"filter": {"type": "session"}, "limit": 200, **scope})["memories"]
    firsts = [m for m in listed if not _PART.search(m["title"])]
    firsts.sort(key=lambda m: (m["title"][:10], m.get("updated") or ""), reverse=True)
    ids = [m["id"] for m in firsts[:SESSIONS]]
    if not ids:
        return []
    got = hub.call("get_memories", {"ids": ids, **scope})["memories"]
    out = []
    for memory in got:
        meta = memory.get("metadata") or {}
        started = str(meta.get("started") or meta.get("ended") or memory["title"][:10])
        out.append(
            {
                "id": memory["id"],
                "title": memory["title"],
                "started": started,
                "digest": digests.parse(memory.get("text") or ""),
            }
        )
    return sorted(out, key=lambda s: s["started"], reverse=True)


def _durable(hub: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """The project's decisions, failures, insights and successes, newest first, with their text."""
    rows: list[dict[str, Any]] = []
    for where in [{"type": kind} for kind in DURABLE_TYPES] + [{"tags": [CLAUDE_MEMORY_TAG]}]:
        rows += hub.call("list_memories", {"filter": where, "limit": DURABLE, **scope})["memories"]
    rows = list({r["id"]: r for r in rows if r.get("category") != "system"}.values())
    rows.sort(key=lambda r: str(r.get("updated") or ""), reverse=True)
    rows = rows[:DURABLE]
    if not rows:
        return []
    texts = {
        m["id"]: m.get("text") or ""
        for m in hub.call("get_memories", {"ids": [r["id"] for r in rows], **scope})["memories"]
    }
    return [{**r, "text": texts.get(r["id"], "")} for r in rows]


def _open_lines(sessions: list[dict[str, Any]]) -> list[Line]:
    """The open items of the sessions, newest first, less those a later session took up (it shares
    most of the item's words in what it asked, did, decided or fixed)."""
    out: list[Line] = []
    for n, session in enumerate(sessions):
        later = " ".join(
            " ".join(s["digest"].asked + s["digest"].outcome + s["digest"].fixed + s["digest"].decided)
            for s in sessions[:n]
        )
        for item in session["digest"].open:
            if not _taken_up(item, later):
                out.append(
                    Line(
                        f"- {one_line(item, 240)} (from {session['started'][:10]}, session id {session['id']})",
                        (1, len(out) + 1),
                        session["started"],
                        session["id"],
                    )
                )
    out = out[:OPEN_ITEMS]
    return [Line("## Left open", (1, 0)), *out] if out else []


def _taken_up(item: str, later: str) -> bool:
    words = {w.lower() for w in _WORD.findall(item)}
    if not words:
        return False
    after = {w.lower() for w in _WORD.findall(later)}
    shared = words & after
    return len(shared) >= 3 and len(shared) >= 0.4 * len(words)


def _durable_lines(durable: list[dict[str, Any]]) -> list[Line]:
    if not durable:
        return []
    out = [Line("## Decisions, fixes and gotchas", (2, 0))]
    for n, memory in enumerate(durable, 1):
        first = next(iter(digests.sentences(memory["text"])), "")
        when = str(memory.get("updated") or "")
        out.append(
            Line(
                f"- {memory.get('type') or 'memory'} {when[:10]}: "
                f"{one_line(memory['title'], 120)} (id {memory['id']}): "
                f"{one_line(first, 220)}",
                (2, n),
                when,
                memory["id"],
            )
        )
    return out


def _session_lines(sessions: list[dict[str, Any]], name: str) -> list[Line]:
    if not sessions:
        return []
    out = [Line(f"## Last sessions in {name}, newest first", (3, 0))]
    for n, session in enumerate(sessions):
        d, when = session["digest"], session["started"]
        title = one_line(_PART.sub("", session["title"])[10:].strip() or session["title"], 120)
        out.append(
            Line(f"### {when[:16].replace('T', ' ')} {title} (id {session['id']})", (3, 2 * n), "", session["id"])
        )
        said = " ".join(d.decided + d.fixed)
        items = [("Decided", x) for x in d.decided] + [("Fixed", x) for x in d.fixed]
        items += [("Outcome", x) for x in d.outcome if x not in said]
        out += [Line(f"- {label}: {one_line(x, 260)}", (3, 2 * n), when, session["id"]) for label, x in items]
        if d.ran:
            out.append(Line(f"- Ran: {one_line('; '.join(d.ran), 200)}", (5, n), when, session["id"]))
        if d.files:
            out.append(Line(f"- Files changed: {one_line(', '.join(d.files), 200)}", (5, n), when, session["id"]))
    return out


def _mark_changed(lines: list[Line]) -> None:
    """A line giving another value than a newer line for the same thing ("port 8000", then "port
    8080") says that it changed, when and to what. A session's heading (its first prompt) is older
    than the session's own outcome."""
    heads = [line for line in lines if line.text.startswith("### ")]
    facts = [line for line in lines if line.when and _FACT.match(line.text)]
    said = {id(line): numbers_of(_said(line.text)) for line in heads + facts}
    for old in heads + facts:
        heading = old.text.startswith("### ")
        for new in facts:
            if (
                not (new.when > old.when or (heading and new.source == old.source))
                or new.source == old.source
                and not heading
            ):
                continue
            change = changed_value(said[id(old)], said[id(new)])
            if change:
                old.text = f"{old.text} (changed {new.when[:10]}: {change}, id {new.source})"
                break


def _said(text: str) -> str:
    """A line's words without its dates, times and ids, which are not values."""
    return _NOT_VALUES.sub(" ", text)


def _fit(lines: list[Line], budget: int) -> list[Line]:
    """The lines to show: by rank while they fit (a session's details only under its heading), in order."""
    room = budget - estimate_tokens(quoted_block(["x"], 10**6)) - 2
    kept: list[Line] = []
    sessions = {line.source for line in lines if line.text.startswith("### ")}
    headed: set[str] = set()
    for line in sorted(lines, key=lambda item: item.rank):
        cost = estimate_tokens(line.text) + 1
        detail = line.source in sessions and not line.text.startswith("### ") and line.rank[0] != 1
        if cost > room or (detail and line.source not in headed):
            continue
        if line.text.startswith("### "):
            headed.add(line.source)
        kept.append(line)
        room -= cost
    return sorted(kept, key=lambda item: item.order)


def recent_files(cwd: str | None, limit: int = 8) -> list[str]:
    """Names of the files the repository's last commits changed (none outside git, or on error)."""
    if not cwd or not Path(cwd).is_dir():
        return []
    try:  # through Git: the repository is anyone's, and its config must run nothing (docs/security.md)
        paths = Git(Path(cwd)).recent_paths(5, timeout=1.0)
    except (GitFailed, OSError, subprocess.SubprocessError):
        return []
    return list(dict.fromkeys(Path(p).stem for p in paths))[:limit]


def _index_lines(index: dict[str, Any]) -> list[str]:
    categories = index.get("categories") or {}
    if not categories:
        return []
    parts = []
    for name, entry in sorted(categories.items(), key=lambda kv: -kv[1].get("notes", 0))[:8]:
        topics = sorted(entry.get("topics", {}).items(), key=lambda kv: -kv[1].get("notes", 0))[:4]
        inner = ", ".join(str(t) for t, _ in topics)
        parts.append(f"{one_line(name, 60)} ({entry.get('notes', 0)}{': ' + one_line(inner, 200) if inner else ''})")
    return [f"Vault: {index.get('total_notes', 0)} memories. Categories: " + "; ".join(parts) + "."]
