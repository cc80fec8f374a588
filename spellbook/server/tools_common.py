"""What every group of MCP tools shares: the hub call, argument types, annotations, and the result.

The group modules (tools.py's core tools, tools_structure, tools_exchange, tools_history,
tools_knowledge) import from here and never from each other's registry, so ``tools.build_server``
can import them all at the top: the one place that registers every group.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

Call = Callable[..., Awaitable[Any]]

Importance = int | Literal["low", "medium", "high"]
NoteType = Literal["insight", "success", "failure", "decision", "note", "temporary"]
StrList = list[str] | None
ScopeContext = Annotated[
    str | None,
    Field(description="Project scope: see only this project's memories and shared ones; what you write is "
          "stamped with it. Default: the server's SPELLBOOK_CONTEXT."),
]
ScopeUser = Annotated[
    str | None,
    Field(description="Person scope: see only this person's memories and shared ones; what you write is "
          "stamped with it. Default: the server's SPELLBOOK_USER."),
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
