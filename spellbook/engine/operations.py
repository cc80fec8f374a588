"""The operations: every call the MCP tools, the CLI, the web view and the hub make of the engine,
in one table.

A row names the operation, the ``Engine`` service and method that does it, whether it writes
(the vault, the index or an export file), the typed result its MCP tool publishes when it is
one, and that tool's name when it differs. Everything else reads it: ``Engine`` exposes each
operation under its name (engine.py), the hub forwards these and no other (server/hub.py; a name
not here is an ``UnknownOperationError``, which the web view catches by type), the tools take
their name and result model from it (server/tools_common.py), and tests/unit/test_operations.py
holds the four together. Plain data: the hook that forwards a call to a running owner imports
it, so the result models (pydantic, in server/models/) are named here, not imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from spellbook.errors import UnknownOperationError


@dataclass(frozen=True)
class Operation:
    name: str
    service: str  # the Engine attribute that holds the service
    method: str  # the service's method
    writes: bool = False  # changes the vault, the index or a file (a tool's read_only_hint is its opposite)
    result: str | None = None  # an MCP tool's: its result model, "module.Class" in spellbook/server/models/
    tool_name: str = ""  # the MCP tool's name when it is not the operation's
    creates: bool = False  # writes a new note: the hub gives it its id (a retry does not write it twice)

    @property
    def tool(self) -> str | None:
        """The MCP tool's name, or None for an operation no tool offers (CLI, web view, hooks)."""
        return (self.tool_name or self.name) if self.result else None


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        # memories (engine/memories.py)
        Operation("scribe", "memories", "scribe", writes=True, result="core.ScribeResult", creates=True),
        Operation("get_memories", "memories", "get_memories", result="core.GetMemoriesResult"),
        Operation("memory_file", "memories", "memory_file"),  # the memory://notes/{id} resource
        Operation("revise", "memories", "revise", writes=True, result="core.ReviseResult"),
        Operation("erase", "memories", "erase", writes=True, result="core.EraseResult"),
        Operation("list_memories", "memories", "list_memories", result="core.ListMemoriesResult"),
        Operation("get_topic", "memories", "get_topic", result="core.GetTopicResult"),
        Operation("timeline", "memories", "timeline", result="core.TimelineResult"),
        # search (engine/search.py)
        Operation("memorize", "search", "memorize", result="core.MemorizeResult"),
        Operation("related", "search", "related", result="core.RelatedResult"),
        Operation("recall", "search", "recall"),  # the prompt-recall hook
        # structure and lifecycle (engine/structure.py, lifecycle.py)
        Operation("get_index", "structure", "get_index", result="core.GetIndexResult"),
        Operation("describe", "structure", "describe", writes=True, result="structure.DescribeResult"),
        Operation("erase_topic", "lifecycle", "erase_topic", writes=True, result="structure.EraseTopicResult"),
        Operation("sweep_expired", "lifecycle", "sweep_expired", writes=True),
        # links, merging, health (engine/links.py, merging.py, health.py)
        Operation("link", "links", "link", writes=True, result="knowledge.LinkResult"),
        Operation("unlink", "links", "unlink", writes=True, result="knowledge.UnlinkResult"),
        Operation("get_links", "links", "get_links", result="knowledge.GetLinksResult"),
        Operation("explore_related", "links", "explore_related", result="knowledge.ExploreRelatedResult"),
        Operation("merge", "merging", "merge", writes=True, result="knowledge.MergeResult"),
        Operation("analyze_knowledge", "health", "analyze_knowledge", result="knowledge.AnalyzeKnowledgeResult"),
        # history (engine/history.py)
        Operation("history", "history_service", "history", result="history.HistoryResult"),
        Operation("restore", "history_service", "restore", writes=True, result="history.RestoreResult"),
        Operation("diff", "history_service", "diff"),
        # exchange (engine/exchange.py)
        Operation("export", "exchange", "export", writes=True, result="exchange.ExportResult"),
        Operation(
            "import_memories",
            "exchange",
            "import_memories",
            writes=True,
            result="exchange.ImportResult",
            tool_name="import",
        ),
        # the index's upkeep and status (engine/maintenance.py)
        Operation("stats", "maintenance", "stats", result="core.StatsResult"),
        Operation("rebuild_index", "maintenance", "rebuild_index", writes=True, result="core.RebuildResult"),
        Operation("reconcile", "maintenance", "reconcile", writes=True),
        Operation("check", "maintenance", "check"),
        Operation("repair", "maintenance", "repair", writes=True),
        Operation("fill_missing_vectors", "maintenance", "fill_missing_vectors", writes=True),
        Operation("probe_embedder", "maintenance", "probe_embedder"),
        # the web view's and the team's (engine/activity.py, graph.py, teamsync.py)
        Operation("activity", "activity_log", "read"),
        Operation("graph", "graph_service", "graph"),
        Operation("sync", "team", "sync", writes=True),
    )
}


def operation(name: object) -> Operation:
    """The operation called ``name``; ``UnknownOperationError`` when there is none."""
    found = OPERATIONS.get(name) if isinstance(name, str) else None
    if found is None:
        raise UnknownOperationError(str(name))
    return found
