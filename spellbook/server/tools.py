"""The MCP tools: thin typed adapters over the hub. No business logic lives here.

Each tool returns structured content (the full data) plus a short text for the model, and raises
``ToolError`` with Spellbook's own message when something is wrong, which the SDK sends as an
``is_error`` result the model can act on.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult
from pydantic import Field

from spellbook.errors import SpellbookError
from spellbook.index.filter_model import Filter
from spellbook.scope import Actor, acting
from spellbook.server.hub import Hub
from spellbook.server.models.base import inline_defs
from spellbook.server.resources import add_resources_and_prompts
from spellbook.server.tools_common import DELETE as _DELETE
from spellbook.server.tools_common import READ as _READ
from spellbook.server.tools_common import WRITE as _WRITE
from spellbook.server.tools_common import (
    Call,
    Importance,
    NoteType,
    ScopeContext,
    ScopeUser,
    StrList,
    tool,
    tool_result,
)
from spellbook.server.tools_exchange import add_exchange_tools
from spellbook.server.tools_history import add_history_tools
from spellbook.server.tools_knowledge import add_knowledge_tools
from spellbook.server.tools_structure import about_text, add_structure_tools, index_text
from spellbook.startup.front import Front
from spellbook.version import __version__

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Spellbook is your long-term memory: a markdown vault the user also reads and edits.\n"
    "- At the start of a task, call get_index (what exists), then memorize with what you are about to work on.\n"
    '- Before your first scribe in a vault, read the guide: memorize("how to chunk memories", '
    'filter={"category": "system"}).\n'
    "- Store one idea per memory (scribe) with a clear title, category, topic, tags and the questions it answers.\n"
    "- memorize returns short hits; call get_memories with their ids for the full text and a version.\n"
    "- To change a memory, revise it with the version you read; "
    "if the person edited it since, you get the current text to merge.\n"
    "- When scribe reports a near-duplicate, merge the two (its answer names the call) or revise that memory instead; "
    'when a memory replaces another, link(new, old, "supersedes").\n'
    "- Working for one project or person in a shared vault: pass context (project) and/or user on every call."
)

Expires = Annotated[
    str | None, Field(description="ISO date or date-time when it stops being relevant; then hidden and archived.")
]
TtlDays = Annotated[float | None, Field(gt=0, description="Expire this many days from now (instead of expires).")]


def hub_caller(hub: Hub) -> Call:
    """``await call(method, **params)``: run an engine method through the hub off the event loop,
    turning Spellbook's errors into ``ToolError`` (an ``is_error`` result the model can act on)."""

    async def call(method: str, **params: Any) -> Any:
        params = {k: v for k, v in params.items() if v is not None}
        if isinstance(params.get("filter"), Filter):
            params["filter"] = params["filter"].model_dump(exclude_none=True)
        try:
            return await anyio.to_thread.run_sync(lambda: hub.call(method, params))
        except SpellbookError as exc:
            raise ToolError(str(exc)) from exc
        except Exception as exc:  # a bug: say so plainly instead of the SDK's bare "Error executing tool"
            log.exception("tool %s failed unexpectedly (arguments: %s)", method, sorted(params))
            raise ToolError(internal_error_text(method, params, exc)) from exc

    return call


def merge_call(survivor: str, other: str) -> str:
    """The merge that folds a new near-duplicate into the memory that was there first."""
    return f'merge(ids=["{survivor}", "{other}"])'


def internal_error_text(method: str, params: dict[str, Any], exc: BaseException) -> str:
    """The tool error for an unexpected exception: which tool, on what (the id or path it was
    given), what went wrong, and what to do; the traceback is in the server log."""
    about = [f"{key} {params[key]!r}" for key in ("id", "path", "source", "target", "topic") if key in params]
    on = f" on {', '.join(about)}" if about else ""
    return (
        f"Internal error in {method}{on}: {type(exc).__name__}: {exc}. This is a Spellbook bug, not a "
        "problem with your arguments; the server log has the traceback. Other tools still work; tell "
        "the person if this keeps failing."
    )


class _Server(MCPServer):
    """The SDK's server, telling the hub which client and session each tool call comes from (the
    activity log records them with every write)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        with acting(_caller(context)):  # anyio's worker threads copy the context: hub.call sees it
            return await super().call_tool(name, arguments, context)

    async def list_tools(self) -> list[Any]:
        """The SDK's list, each output schema with its definitions written in place (models/base.py)."""
        return [
            t.model_copy(update={"output_schema": inline_defs(t.output_schema)}) if t.output_schema else t
            for t in await super().list_tools()
        ]

    def run_stdio(self, wire: Front) -> None:
        """``run("stdio")`` over the wire the front took at start (spellbook/startup/front.py): the
        SDK's own stdio transport, reading the client's lines from the front (those it answered
        early under the front's ids) and writing through it."""

        async def serve() -> None:
            async with stdio_server(stdin=wire.lines(), stdout=wire.writer()) as (read, write):  # type: ignore[arg-type]
                lowlevel = self._lowlevel_server  # what MCPServer.run_stdio_async runs
                await lowlevel.run(read, write, lowlevel.create_initialization_options())

        anyio.run(serve)


class NoRequestState:
    """The request-state codec of a server that mints none: no Spellbook tool answers
    ``input_required`` (a question to the client in the middle of a call), so there is no state to
    seal, and a ``requestState`` a client sends is refused like a forged one (the SDK answers
    "Invalid or expired requestState"). The SDK's default would derive an AES-GCM key at start,
    which imports ``cryptography`` (a 14 MB native library) into every server for nothing
    (startup/deferred.py)."""

    def seal(self, payload: bytes) -> str:
        raise RuntimeError("Spellbook's tools mint no request state; give the server a real codec first")

    def unseal(self, token: str) -> bytes:
        raise InvalidRequestState("this server issues no request state")


def _caller(context: Any) -> Actor:
    try:
        request = context.request_context
        params = request.session.client_params
        info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
        client = getattr(info, "name", None)
        headers = getattr(request.request, "headers", None) or {}
        session = headers.get("mcp-session-id")
    except Exception:  # noqa: BLE001 - no request context (a direct call): the hub's own label
        return Actor()
    return Actor(client[:100] if isinstance(client, str) else None, session[:100] if isinstance(session, str) else None)


def build_server(hub: Hub) -> MCPServer:
    server = _Server(
        "spellbook",
        version=__version__,
        instructions=INSTRUCTIONS,
        request_state_security=RequestStateSecurity(codec=NoRequestState()),
    )
    call = hub_caller(hub)
    for add_tools in (add_core_tools, add_structure_tools, add_exchange_tools, add_history_tools, add_knowledge_tools):
        add_tools(server, call)
    add_resources_and_prompts(server, hub)
    return server


def add_core_tools(server: MCPServer, call: Call) -> None:
    @tool(server, "scribe", _WRITE)
    async def scribe(
        text: Annotated[str, Field(description="The memory's content, markdown. Stored byte for byte.")],
        title: Annotated[str | None, Field(description="Short title; also the file name.")] = None,
        category: Annotated[str | None, Field(description="Top-level folder, e.g. 'projects'.")] = None,
        topic: Annotated[str | None, Field(description="Subfolder within the category.")] = None,
        tags: StrList = None,
        keywords: StrList = None,
        questions: Annotated[StrList, Field(description="Questions this memory answers.")] = None,
        entities: StrList = None,
        importance: Annotated[Importance | None, Field(description="1-5 or low/medium/high.")] = None,
        type: NoteType | None = None,
        context: ScopeContext = None,
        source: str | None = None,
        expires: Expires = None,
        ttl_days: TtlDays = None,
    ) -> CallToolResult:
        """Store a new memory as a markdown note in the vault."""
        data = await call(
            "scribe",
            text=text,
            title=title,
            category=category,
            topic=topic,
            tags=tags,
            keywords=keywords,
            questions=questions,
            entities=entities,
            importance=importance,
            type=type,
            context=context,
            source=source,
            expires=expires,
            ttl_days=ttl_days,
        )
        text = f"Stored memory {data['id']} at {data['path']} (version {data['version']})."
        if data.get("redacted"):
            text += f" Privacy filter: {data['redacted']}."
        dupes = [s for s in data["similar"] if s["near_duplicate"]]
        if dupes:
            text += " Near-duplicates: " + "; ".join(
                f"{d['title']} (id {d['id']}, similarity {d['similarity']:.2f})" for d in dupes
            )
            text += f". To keep one memory, call {merge_call(dupes[0]['id'], data['id'])}, or revise {dupes[0]['id']}."
        elif data["similar"]:
            text += " Related: " + "; ".join(f"{s['title']} (id {s['id']})" for s in data["similar"])
        return tool_result(text, data)

    @tool(server, "memorize", _READ)
    async def memorize(
        query: Annotated[str, Field(description="What to remember, in any language.")],
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        filter: Filter | None = None,
        mode: Literal["hybrid", "semantic", "keyword"] = "hybrid",
        min_score: Annotated[
            float | None, Field(ge=0, le=1, description="Drop hits whose relevance is lower (0.5 = clearly related).")
        ] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Search memories by meaning and keywords. Returns compact hits; use get_memories for full text."""
        data = await call(
            "memorize",
            context=context,
            user=user,
            query=query,
            limit=limit,
            filter=filter,
            mode=mode,
            min_score=min_score,
        )
        lines = [f"{len(data['results'])} result(s) for {data['query']!r}:"]
        for n, hit in enumerate(data["results"], 1):
            where = hit["path"] + (f" › {hit['heading']}" if hit.get("heading") else "")
            lines.append(f"{n}. [{hit['score']:.2f}] {hit['title']} (id {hit['id']}, {where})\n   {hit['snippet']}")
        return tool_result("\n".join(lines), data)

    @tool(server, "get_memories", _READ)
    async def get_memories(
        ids: Annotated[list[str], Field(min_length=1, max_length=20, description="Ids from memorize/list_memories.")],
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Full text, metadata and version of memories by id."""
        data = await call("get_memories", context=context, user=user, ids=ids)
        parts = [
            f"# {m['title']} (id {m['id']}, {m['path']}, version {m['version']})\n{m['text']}" for m in data["memories"]
        ]
        if data["not_found"]:
            parts.append(f"Not found: {', '.join(data['not_found'])}")
        return tool_result("\n\n".join(parts), data)

    @tool(server, "related", _READ)
    async def related(
        id: str,
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Memories semantically closest to this one (itself excluded)."""
        data = await call("related", context=context, user=user, id=id, limit=limit)
        lines = [f"Related to {data['path']}:"] + [
            f"- {r['title']} (id {r['id']}, {r['path']}, similarity {r['similarity']:.2f})" for r in data["related"]
        ]
        return tool_result("\n".join(lines), data)

    @tool(server, "timeline", _READ)
    async def timeline(
        id: str,
        window: Annotated[int, Field(ge=1, le=20)] = 3,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Memories written just before and after this one, and its sections."""
        data = await call("timeline", context=context, user=user, id=id, window=window)
        lines = [f"Before {data['title']}:"] + [f"- {m['title']} (id {m['id']})" for m in data["before"]]
        lines += ["After:"] + [f"- {m['title']} (id {m['id']})" for m in data["after"]]
        return tool_result("\n".join(lines), data)

    @tool(server, "revise", _WRITE)
    async def revise(
        id: str,
        text: Annotated[str | None, Field(description="New body; omit to keep it.")] = None,
        version: Annotated[
            str | None, Field(description="The version you read (get_memories); refuses if the file changed since.")
        ] = None,
        title: str | None = None,
        category: str | None = None,
        topic: str | None = None,
        tags: StrList = None,
        keywords: StrList = None,
        questions: StrList = None,
        entities: StrList = None,
        importance: Importance | None = None,
        type: NoteType | None = None,
        context: ScopeContext = None,
        source: str | None = None,
        expires: Expires = None,
        ttl_days: TtlDays = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Change a memory's text and/or metadata. Empty string or [] removes a field."""
        data = await call(
            "revise",
            id=id,
            text=text,
            version=version,
            title=title,
            category=category,
            topic=topic,
            tags=tags,
            keywords=keywords,
            questions=questions,
            entities=entities,
            importance=importance,
            type=type,
            context=context,
            user=user,
            source=source,
            expires=expires,
            ttl_days=ttl_days,
        )
        text = f"Revised {data['id']} ({data['path']}), now version {data['version']}."
        if data.get("redacted"):
            text += f" Privacy filter: {data['redacted']}."
        return tool_result(text, data)

    @tool(server, "erase", _DELETE)
    async def erase(
        id: str,
        version: Annotated[str | None, Field(description="Refuse if the file changed since this version.")] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Remove a memory from search; its file moves to the vault's .trash/ folder."""
        data = await call("erase", context=context, user=user, id=id, version=version)
        return tool_result(f"Erased {data['id']}; the file moved to {data['trash_path']}.", data)

    @tool(server, "list_memories", _READ)
    async def list_memories(
        filter: Filter | None = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """List memories, newest first, with optional filters and paging."""
        data = await call("list_memories", context=context, user=user, filter=filter, limit=limit, offset=offset)
        lines = [f"{len(data['memories'])} of {data['total']} memories (offset {data['offset']}):"]
        lines += [f"- {m['title']} (id {m['id']}, {m['path']})" for m in data["memories"]]
        if data["next_offset"] is not None:
            lines.append(f"More: call again with offset={data['next_offset']}.")
        return tool_result("\n".join(lines), data)

    @tool(server, "get_index", _READ)
    async def get_index(
        scope: Annotated[str | None, Field(description="One category's name, to list only its topics.")] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Table of contents: categories and topics with descriptions, keywords and counts. Read it first."""
        data = await call("get_index", context=context, user=user, scope=scope)
        return tool_result(index_text(data), data)

    @tool(server, "get_topic", _READ)
    async def get_topic(
        topic: str,
        category: str | None = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """All memories of a topic, oldest first, with full text (paged)."""
        data = await call("get_topic", context=context, user=user, topic=topic, category=category, offset=offset)
        parts = [about_text(data["about"])] if data.get("about") else []
        parts += [f"# {m['title']} (id {m['id']})\n{m['text']}" for m in data["memories"]]
        if data["next_offset"] is not None:
            parts.append(f"More: call again with offset={data['next_offset']}.")
        return tool_result("\n\n".join(parts), data)

    @tool(server, "stats", _READ)
    async def stats() -> CallToolResult:
        """Index health: counts, embedder, progress, and files skipped with the reason."""
        data = await call("stats")
        text = (
            f"{data['notes']} notes, {data['chunks']} chunks, {data['vectors']} vectors; state {data['state']}; "
            f"embedder {data['embedder']}; {data['problems_total']} file problem(s)."
        )
        for warning in data.get("setup_warnings", []):
            text += f"\nWarning: {warning}"
        return tool_result(text, data)

    @tool(server, "rebuild_index", _WRITE)
    async def rebuild_index() -> CallToolResult:
        """Throw the derived index away and rebuild it from the vault (the vault is untouched)."""
        data = await call("rebuild_index")
        return tool_result(f"Rebuilt: {data['indexed']} files indexed in {data['seconds']} s.", data)
