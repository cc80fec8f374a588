"""MCP resources (``memory://`` URIs) and prompts: thin adapters over the hub, like the tools."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError

from spellbook.errors import SpellbookError
from spellbook.server.hub import Hub
from spellbook.vault.note import parse_note
from spellbook.vault.template import template_dir

GUIDE_IDS = ["sys-chunking-guide", "sys-metadata-rules"]


def add_resources_and_prompts(server: MCPServer, hub: Hub) -> None:
    async def call(method: str, **params: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(lambda: hub.call(method, params))
        except SpellbookError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(
        "memory://index",
        name="index",
        mime_type="application/json",
        description="Table of contents: categories -> topics -> note counts.",
    )
    async def index() -> str:
        return json.dumps(await call("get_index"), ensure_ascii=False)

    @server.resource(
        "memory://recent",
        name="recent",
        mime_type="application/json",
        description="The 20 most recently updated memories.",
    )
    async def recent() -> str:
        return json.dumps(await call("list_memories", limit=20), ensure_ascii=False)

    @server.resource(
        "memory://notes/{id}",
        name="memory",
        mime_type="text/markdown",
        description="One memory's markdown file, by id.",
    )
    async def memory(id: str) -> str:
        return (await call("memory_file", id=id))["text"]  # scrubbed by the engine, as every answer

    @server.prompt(description="How to split knowledge into memories and fill their metadata.")
    async def chunking_guide() -> str:
        try:
            found = await anyio.to_thread.run_sync(lambda: hub.call("get_memories", {"ids": GUIDE_IDS}))
            texts = [m["text"] for m in found["memories"]]
        except SpellbookError:
            texts = []
        if not texts:  # the person removed the guides from the vault: use the shipped copies
            texts = [parse_note(f.read_text("utf-8")).body for f in sorted(template_dir().glob("system/guide/*.md"))]
        return "Follow this guide when you store memories with scribe.\n\n" + "\n\n---\n\n".join(texts)

    @server.prompt(description="Summarise what the memory holds about a subject.")
    async def summarize_memories(subject: str, limit: int = 8) -> str:
        hits = (await call("memorize", query=subject, limit=max(1, min(int(limit), 20))))["results"]
        if not hits:
            return f"There are no memories about {subject!r}. Say so, and offer to store what the user tells you."
        full = await call("get_memories", ids=[h["id"] for h in hits])
        blocks = [f"## {m['title']} (id {m['id']}, {m['path']})\n{m['text']}" for m in full["memories"]]
        return (
            f"Summarise what these memories say about {subject!r}. Cite memory ids, point out contradictions "
            "and anything that looks outdated.\n\n" + "\n\n".join(blocks)
        )
