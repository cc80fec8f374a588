"""MCP tools over the vault's git history: ``history`` and ``restore`` (thin adapters, as in tools.py)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from spellbook.server.tools_common import Call, ScopeContext, ScopeUser, tool, tool_result

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)


def add_history_tools(server: MCPServer, call: Call) -> None:
    @tool(server, "history", _READ)
    async def history(
        id: Annotated[str, Field(description="A memory's id; an erased memory's id works too.")],
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """A memory's versions from the vault's git history, newest first (pass one to restore)."""
        data = await call("history", context=context, user=user, id=id, limit=limit)
        state = "erased" if data["erased"] else data["path"]
        lines = [f"History of {data['title']} (id {data['id']}, {state}):"]
        if data["uncommitted"]:
            lines.append("- working copy: changes not committed yet (in no version below)")
        for v in data["versions"]:
            mark = " [current]" if v["current"] else ""
            lines.append(f"- {v['version']} {v['date'][:16]} {v['author']}: {v['message']} ({v['change']}){mark}")
        if not data["versions"]:
            lines.append("No committed versions yet.")
        if data["more"]:
            lines.append(f"Older versions exist: call again with a limit above {len(data['versions'])}.")
        return tool_result("\n".join(lines), data)

    @tool(server, "restore", _WRITE)
    async def restore(
        id: str,
        version: Annotated[str, Field(description="The version (commit) to bring back, from history.")],
        current_version: Annotated[
            str | None, Field(description="The version you read (get_memories); refuses if the file changed since.")
        ] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Bring back an earlier version of a memory (also an erased one); keeps its id and path."""
        data = await call(
            "restore", context=context, user=user, id=id, version=version, current_version=current_version
        )
        if data.get("unchanged"):
            text = f"{data['id']} ({data['path']}) already holds version {data['restored']}; nothing written."
        else:
            text = (
                f"Restored {data['id']} ({data['path']}) to version {data['restored']}; now version {data['version']}."
            )
        return tool_result(text, data)
