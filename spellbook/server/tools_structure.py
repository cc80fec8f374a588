"""MCP tools for the vault's structure and lifecycle: ``describe`` and ``erase_topic``.

Thin typed adapters over the hub, like ``tools.add_core_tools``; also the text the model reads
for ``get_index`` and a topic's description header in ``get_topic``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from spellbook.server.tools_common import DELETE as _DELETE
from spellbook.server.tools_common import WRITE as _WRITE
from spellbook.server.tools_common import Call, ScopeContext, ScopeUser, tool, tool_result


def add_structure_tools(server: MCPServer, call: Call) -> None:
    @tool(server, "describe", _WRITE)
    async def describe(
        category: Annotated[str, Field(description="The category to describe (a name from get_index).")],
        topic: Annotated[str | None, Field(description="A topic within it; omit to describe the category.")] = None,
        description: Annotated[str | None, Field(description="What belongs here, a few sentences.")] = None,
        summary: Annotated[str | None, Field(description="One line, shown in get_index.")] = None,
        keywords: list[str] | None = None,
        title: str | None = None,
    ) -> CallToolResult:
        """Write a category's or topic's description (its _about.md), shown by get_index and get_topic."""
        data = await call(
            "describe",
            category=category,
            topic=topic,
            description=description,
            summary=summary,
            keywords=keywords,
            title=title,
        )
        verb = "Created" if data["created"] else "Updated"
        return tool_result(f"{verb} {data['path']} (version {data['version']}).", data)

    @tool(server, "erase_topic", _DELETE)
    async def erase_topic(
        topic: Annotated[str, Field(description="The topic to remove (a name from get_index).")],
        category: Annotated[str | None, Field(description="Its category; needed when several have it.")] = None,
        confirm: Annotated[
            bool, Field(description="false: only list what would go. true: move it to .trash/.")
        ] = False,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Remove every memory of a topic (to .trash/). Without confirm=true it only lists what it would remove."""
        data = await call("erase_topic", context=context, user=user, topic=topic, category=category, confirm=confirm)
        if data["confirmed"]:
            lines = [f"Moved {data['count']} memories of topic {data['topic']!r} to .trash/:"]
            lines += [f"- {m['title']} ({m['path']} -> {m['trash_path']})" for m in data["removed"]]
        else:
            where = ", ".join(data["categories"])
            lines = [f"Would remove {data['count']} memories of topic {data['topic']!r} (categories: {where}):"]
            lines += [f"- {m['title']} (id {m['id']}, {m['path']})" for m in data["would_remove"]]
            lines.append(data["note"])
        lines += [f"Description file: {p}" for p in data["description_files"]]
        return tool_result("\n".join(lines), data)


def index_text(data: dict[str, Any]) -> str:
    """get_index for the model: one line per category and per topic."""
    head = f"{data['total_notes']} memories in {data['total_categories']} categories, {data['total_topics']} topics"
    lines = [head + (f"; last update {data['updated']}." if data.get("updated") else ".")]
    if data.get("description"):
        lines.append(data["description"])
    for name, cat in data["categories"].items():
        lines.append(
            f"\n## {name} ({cat['notes']} memories)" + (f": {cat['description']}" if cat.get("description") else "")
        )
        for topic, entry in cat["topics"].items():
            label = topic if entry["title"] == topic else f"{topic} ({entry['title']})"
            line = f"- {label}: {entry['notes']} memories, {entry['chunks']} chunks"
            if entry.get("summary"):
                line += f". {entry['summary']}"
            if entry["keywords"]:
                line += f" [{', '.join(entry['keywords'])}]"
            lines.append(line)
    if data.get("archived_notes"):
        lines.append(f"\n{data['archived_notes']} expired memories are archived (filter folder '_archive').")
    if data.get("note"):
        lines.append(data["note"])
    return "\n".join(lines)


def about_text(about: dict[str, Any]) -> str:
    """A topic's description header, for get_topic."""
    lines = [f"# About: {about.get('title') or about['path']}"]
    if about.get("description"):
        lines.append(about["description"])
    if about.get("text") and about["text"] != about.get("description"):
        lines.append(about["text"])
    if about.get("keywords"):
        lines.append("Keywords: " + ", ".join(about["keywords"]))
    return "\n".join(lines)
