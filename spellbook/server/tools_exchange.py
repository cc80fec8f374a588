"""The ``export`` and ``import`` MCP tools: thin adapters over the engine's Exchange methods."""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from spellbook.engine.formats.spellbook_export import ExportFormat, ImportFormat, OnConflict, import_summary
from spellbook.index.filter_model import Filter
from spellbook.server.tools_common import Call, ScopeContext, ScopeUser, tool, tool_result

_EXPORT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_IMPORT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

FilePath = Annotated[
    str | None,
    Field(
        description="A file name, kept in the exports folder <vault>/.spellbook/exports/ (or an absolute path in a "
        "folder the person listed in SPELLBOOK_EXPORT_DIRS). Omit to get the export inline."
    ),
]


def add_exchange_tools(server: MCPServer, call: Call) -> None:
    @tool(server, "export", _EXPORT)
    async def export(
        format: ExportFormat = "json",
        path: FilePath = None,
        filter: Filter | None = None,
        overwrite: Annotated[
            bool, Field(description="Replace the file at path if Spellbook exported it earlier (nothing else).")
        ] = False,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Export memories (all, or a filter) as JSON for import, or one markdown document. Files go only to
        the exports folder or SPELLBOOK_EXPORT_DIRS, never over a file Spellbook did not export."""
        data = await call(
            "export", context=context, user=user, format=format, path=path, filter=filter, overwrite=overwrite
        )
        if "path" in data:
            text = f"Exported {data['count']} memories as {format} to {data['path']} ({data['bytes']:,} bytes)."
        elif format == "json":
            text = json.dumps(data["content"], ensure_ascii=False)
        else:
            text = data["content"]
        if data.get("redacted"):
            text += f"\n(Privacy filter: {data['redacted']}.)"
        return tool_result(text, data)

    @tool(server, "import_memories", _IMPORT)
    async def import_memories(
        path: Annotated[str, Field(description="The file: absolute, or a name in <vault>/.spellbook/exports/.")],
        format: Annotated[
            ImportFormat,
            Field(description="json = a Spellbook export; mcp-memory = the MCP memory server's memory.jsonl."),
        ] = "auto",
        on_conflict: Annotated[
            OnConflict, Field(description="When the vault has a memory with the same id: skip, overwrite, new_id.")
        ] = "skip",
        dry_run: Annotated[bool, Field(description="Report what would happen; write nothing.")] = False,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Import memories from a Spellbook JSON export or an MCP memory server memory.jsonl."""
        data = await call(
            "import_memories",
            context=context,
            user=user,
            path=path,
            format=format,
            on_conflict=on_conflict,
            dry_run=dry_run,
        )
        return tool_result(import_summary(data), data)
