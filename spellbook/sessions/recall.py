"""What a new session is told (SessionStart) and, when enabled, what a prompt is given
(UserPromptSubmit): plain text, which Claude Code adds to the model's context.

Within a token budget (``session_context_tokens``, about 1,500): the vault's index in a few lines,
the memories most relevant to this project (its ``context``, found by the project's name and its
recently changed files), and the project's last sessions, one line each. Everything comes from
the index owner through ``Hub.call``; nothing here opens the index.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from spellbook.git.repo import Git, GitFailed

LAST_SESSIONS = 5
RELEVANT = 6


def estimate_tokens(text: str) -> int:
    """A cautious token count: about 4 ASCII characters a token, one token for any other character."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return ascii_chars // 4 + (len(text) - ascii_chars) + 1


def session_context(hub: Any, project: str, cwd: str | None, budget: int, semantic: bool) -> str:
    """The SessionStart text for ``project``; empty when the vault has nothing to say."""
    scope = {"context": project}
    index = hub.call("get_index", scope)
    sessions = hub.call("list_memories", {"filter": {"type": "session"}, "limit": LAST_SESSIONS, **scope})
    query = " ".join([project, *recent_files(cwd)])
    found = hub.call("memorize", {"query": query[:1_000], "limit": RELEVANT + LAST_SESSIONS,
                                  "mode": "hybrid" if semantic else "keyword", **scope})
    relevant = [h for h in found["results"] if h.get("type") != "session"][:RELEVANT]
    lines = [f"# Spellbook memory for project {project}",
             ("Memories from earlier work (Spellbook MCP: memorize to search, get_memories for full text, "
              "timeline for a session's events).")]
    lines += _index_lines(index)
    if relevant:
        lines.append("## Relevant memories")
        lines += [f"- {h['title']} (id {h['id']}): {_one_line(h.get('snippet', ''), 160)}" for h in relevant]
    if sessions["memories"]:
        lines.append(f"## Last sessions in {project}")
        lines += [f"- {m['title']} (id {m['id']}, updated {str(m.get('updated') or '')[:16]})"
                  for m in sessions["memories"]]
    if not relevant and not sessions["memories"] and not index.get("total_notes"):
        return ""
    return fit(lines, budget)


def prompt_context(hub: Any, project: str, prompt: str, min_relevance: float) -> str:
    """The memories most relevant to one prompt, above ``min_relevance``; empty when none is."""
    found = hub.call("memorize", {"query": prompt[:2_000], "limit": 3, "min_score": min_relevance,
                                  "context": project})
    hits = found["results"]
    if not hits:
        return ""
    lines = ["Spellbook memories related to this prompt (get_memories for full text):"]
    lines += [f"- {h['title']} (id {h['id']}, relevance {h.get('relevance', 0):.2f}): "
              f"{_one_line(h.get('snippet', ''), 200)}" for h in hits]
    return "\n".join(lines)


def fit(lines: list[str], budget: int) -> str:
    """The lines that fit in ``budget`` tokens, in order; a line that does not fit is left out."""
    out: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            continue
        out.append(line)
        used += cost
    return "\n".join(out)


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
        parts.append(f"{name} ({entry.get('notes', 0)}{': ' + inner if inner else ''})")
    return [f"Vault: {index.get('total_notes', 0)} memories. Categories: " + "; ".join(parts) + "."]


def _one_line(text: str, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
