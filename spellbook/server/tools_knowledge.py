"""MCP tools for links between memories, merging them and knowledge health: thin adapters over the
engine's ``Links``, ``Merging`` and ``Health`` services (spellbook/engine/links.py, merging.py,
health.py). ``build_server`` registers them."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from spellbook.server.tools_common import Call, ScopeContext, ScopeUser, tool, tool_result

Relation = Literal["related", "supersedes", "contradicts", "extends", "depends_on"]

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_LINK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_UNLINK = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
_MERGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

SHOWN_ISSUE_NOTES = 5  # notes named per issue in the text; all listed ones are in the structured content


def add_knowledge_tools(server: MCPServer, call: Call) -> None:
    @tool(server, "link", _LINK)
    async def link(
        source: Annotated[str, Field(description="Id of the memory that links; the link is written into its file.")],
        target: Annotated[str, Field(description="Id of the memory it links to.")],
        relation: Annotated[Relation, Field(description="'supersedes' ranks the target down in search.")] = "related",
        reason: Annotated[str | None, Field(max_length=500, description="Why they are linked.")] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Link two memories with a relation, written as a [[wikilink]] in the source note's frontmatter."""
        data = await call(
            "link", context=context, user=user, source=source, target=target, relation=relation, reason=reason
        )
        if data["changed"]:
            text = (
                f"Linked {data['path']} -[{data['relation']}]-> {data['target_path']} as {data['link']} "
                f"(version {data['version']})."
            )
        else:
            text = f"Already linked: {data['path']} -[{data['relation']}]-> {data['target_path']}; nothing changed."
        return tool_result(text, data)

    @tool(server, "unlink", _UNLINK)
    async def unlink(
        source: Annotated[str, Field(description="Id of the memory whose link to remove.")],
        target: Annotated[str, Field(description="Id of the linked memory (or the text of a broken link).")],
        relation: Annotated[Relation | None, Field(description="Only this relation; omit for all.")] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Remove links from a memory's frontmatter to another memory."""
        data = await call("unlink", context=context, user=user, source=source, target=target, relation=relation)
        if data["changed"]:
            links = ", ".join(f"{r['link']} ({r['relation']})" for r in data["removed"])
            text = f"Removed from {data['path']}: {links} (version {data['version']})."
        else:
            text = data.get("note", "Nothing to remove.")
        return tool_result(text, data)

    @tool(server, "get_links", _READ)
    async def get_links(id: str, context: ScopeContext = None, user: ScopeUser = None) -> CallToolResult:
        """A memory's links (relation, reason, resolved target) and the memories linking to it."""
        data = await call("get_links", context=context, user=user, id=id)
        lines = [f"Links of {data['title']} ({data['path']}):"]
        for item in data["links"]:
            where = f"{item['title']} (id {item['id']})" if item["resolved"] else "NOT FOUND"
            if item.get("merged_into"):
                where += f" (merged into {item['merged_into']['title']}, id {item['merged_into']['id']})"
            why = f": {item['reason']}" if item.get("reason") else ""
            lines.append(f"- {item['relation']} [[{item['target']}]] -> {where}{why}")
        lines.append("Backlinks:")
        lines += [f"- {b['title']} (id {b['id']}) {b['relation']} this" for b in data["backlinks"]] or ["- none"]
        return tool_result("\n".join(lines), data)

    @tool(server, "explore_related", _READ)
    async def explore_related(
        id: str,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Memories related to this one by links, shared tags, same context and meaning, each saying why."""
        data = await call("explore_related", context=context, user=user, id=id, limit=limit)
        lines = [f"Related to {data['title']} ({data['path']}):"]
        lines += [f"{n}. {r['title']} (id {r['id']}): {r['why']}" for n, r in enumerate(data["related"], 1)]
        return tool_result("\n".join(lines), data)

    @tool(server, "merge", _MERGE)
    async def merge(
        ids: Annotated[list[str], Field(min_length=2, max_length=50, description="The memories to merge, in order.")],
        into: Annotated[
            str | None, Field(description="Id of the memory that keeps its id and file (default: the first of ids).")
        ] = None,
        version: Annotated[
            str | None,
            Field(description="The survivor's version you read (get_memories); refuses if it changed since."),
        ] = None,
        text: Annotated[
            str | None, Field(description="The merged body; omit to append the others' text under their titles.")
        ] = None,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Merge near-duplicate memories into one: it gets their text, tags, keywords, questions and links; the
        others go to .trash/ and every link to them in your scope points at it."""
        data = await call("merge", context=context, user=user, ids=ids, into=into, version=version, text=text)
        names = ", ".join(f"{n['title']} (id {n['id']})" for n in data["merged"])
        text = (
            f"Merged {names} into {data['title']} (id {data['id']}, {data['path']}), now version "
            f"{data['version']}; {len(data['relinked'])} note(s) relinked to it."
        )
        for extra in (data.get("note"), data.get("redacted") and f"Privacy filter: {data['redacted']}."):
            text += f" {extra}" if extra else ""
        return tool_result(text, data)

    @tool(server, "analyze_knowledge", _READ)
    async def analyze_knowledge(
        stale_days: Annotated[int, Field(ge=1, le=36_500, description="Notes not updated this long are stale.")] = 180,
        context: ScopeContext = None,
        user: ScopeUser = None,
    ) -> CallToolResult:
        """Knowledge health: a 0-100 score and issues (untagged, unlinked, stale, duplicates, broken links)."""
        data = await call("analyze_knowledge", context=context, user=user, stale_days=stale_days)
        lines = [f"Health {data['score']}/100 over {data['notes']} notes; {len(data['issues'])} issue(s)."]
        for issue in data["issues"]:
            names = ", ".join(f"{n['title']} (id {n['id']})" for n in issue["notes"][:SHOWN_ISSUE_NOTES])
            extra = len(issue["notes"]) - SHOWN_ISSUE_NOTES + issue.get("more", 0)
            names += f" and {extra} more" if extra > 0 else ""
            lines.append(f"- {issue['kind']}: {names}. {issue['action']}")
        if data["more_issues"]:
            lines.append("Not listed: " + ", ".join(f"{n} more {k}" for k, n in data["more_issues"].items()) + ".")
        return tool_result("\n".join(lines), data)
