"""What a prompt is given (UserPromptSubmit), when enabled: plain text, which Claude Code adds to
the model's context (the SessionStart briefing is briefing.py). Everything comes from the index
owner through ``Hub.call``; nothing here opens the index.
"""

from __future__ import annotations

from typing import Any

from spellbook.sessions.quoting import one_line, quoted_block

PROMPT_BUDGET = 600


def prompt_context(hub: Any, project: str, prompt: str, min_relevance: float) -> str:
    """The memories most relevant to one prompt, above ``min_relevance``; empty when none is."""
    found = hub.call("memorize", {"query": prompt[:2_000], "limit": 3, "min_score": min_relevance,
                                  "context": project})
    hits = found["results"]
    if not hits:
        return ""
    lines = ["Spellbook memories related to this prompt (get_memories for full text):"]
    lines += [f"- {one_line(h['title'], 120)} (id {h['id']}, relevance {h.get('relevance', 0):.2f}): "
              f"{one_line(h.get('snippet', ''), 200)}" for h in hits]
    return quoted_block(lines, PROMPT_BUDGET)
