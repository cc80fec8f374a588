"""What every group of MCP tools shares: the hub call, argument types, annotations, the
registration of a tool from the table of operations (``tool``), and the result.

The group modules (tools.py's core tools, tools_structure, tools_exchange, tools_history,
tools_knowledge) import from here and never from each other's registry, so ``tools.build_server``
can import them all at the top: the one place that registers every group.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from spellbook.engine.operations import Operation, operation

Call = Callable[..., Awaitable[Any]]
Tool = TypeVar("Tool", bound=Callable[..., Awaitable[CallToolResult]])

Importance = int | Literal["low", "medium", "high"]
NoteType = Literal["insight", "success", "failure", "decision", "note", "temporary"]
StrList = list[str] | None
ScopeContext = Annotated[
    str | None,
    Field(
        description="Project scope: see only this project's memories and shared ones; what you write is "
        "stamped with it. Default: the server's SPELLBOOK_CONTEXT."
    ),
]
ScopeUser = Annotated[
    str | None,
    Field(
        description="Person scope: see only this person's memories and shared ones; what you write is "
        "stamped with it. Default: the server's SPELLBOOK_USER."
    ),
]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def tool_result(text: str, data: Any) -> CallToolResult:
    """The short ``text`` the model reads, and the engine's ``data`` as the structured content.

    A tool annotated ``-> Annotated[CallToolResult, Model]`` publishes ``Model``'s schema as its
    ``outputSchema``, and the SDK validates this structured content against ``Model`` before it
    leaves (spellbook/server/models/). The content is the engine's dict as JSON, key for key."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=json.loads(json.dumps(data, ensure_ascii=False, default=str)),
    )


def tool(server: MCPServer, name: str, annotations: ToolAnnotations) -> Callable[[Tool], Tool]:
    """Register the decorated function as the MCP tool of operation ``name`` (engine/operations.py):
    the tool's name and the result model its ``outputSchema`` publishes come from the table."""
    op = operation(name)
    model = result_model(op)

    def register(function: Tool) -> Tool:
        function.__annotations__["return"] = Annotated[CallToolResult, model]
        server.tool(name=op.tool, annotations=annotations)(function)
        return function

    return register


def result_model(op: Operation) -> type[BaseModel]:
    """The result model the table names for ``op`` (a class in spellbook/server/models/)."""
    if op.result is None:
        raise ValueError(f"{op.name} is no MCP tool: the table names no result model for it")
    module, _, cls = op.result.rpartition(".")
    return getattr(importlib.import_module(f"spellbook.server.models.{module}"), cls)
