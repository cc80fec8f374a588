"""The typed results of the MCP tools: each model's JSON schema is its tool's published ``outputSchema``.

They mirror the dicts the engine returns, key for key: a key the engine adds only sometimes (``note``,
``redacted``, ``unreadable``...) is an optional field, absent from the result when the engine left it
out. A tool returns ``Annotated[CallToolResult, Model]``: the SDK publishes the model's schema and
validates the structured content against it, while the tool keeps its short text for the model
(``tools.tool_result``). tests/test_tool_schemas.py checks, tool by tool over a real client, that
every key the engine returns is declared here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


def _compact_schema(schema: dict[str, Any]) -> None:
    """Drop what pydantic adds but says nothing here (a title per field, ``default: null`` beside
    ``required``) and write ``X | None`` as ``type: [X, null]``: the schemas go out on every tools/list."""
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        if prop.get("default", ...) is None:
            del prop["default"]
        arms = prop.get("anyOf", [])
        if len(arms) == 2 and arms[1] == {"type": "null"} and set(arms[0]) == {"type"}:
            del prop["anyOf"]
            prop["type"] = [arms[0]["type"], "null"]


class Out(BaseModel):
    model_config = ConfigDict(json_schema_extra=_compact_schema)

# --- pieces shared by several tools ---------------------------------------------------------------


class NoteRef(Out):
    id: str
    path: str
    title: str


class CompactNote(NoteRef):
    """How tools list memories: the reference plus the metadata worth filtering on."""

    category: str | None
    topic: str | None
    tags: list[str]
    type: str | None
    importance: int | None
    updated: str | None


class SimilarNote(NoteRef):
    similarity: float


class Section(Out):
    index: int
    heading: str


class FileProblem(Out):
    path: str
    problem: str


class SyncReport(Out):
    indexed: int
    unchanged: int
    removed: int
    skipped: int
    embedded_chunks: int
    reused_chunks: int
    problems: list[FileProblem]
    vectors_missing: int
    embedder_error: str | None


# --- core tools (tools.py) -----------------------------------------------------------------------


class ScribeSimilar(SimilarNote):
    near_duplicate: bool


class ScribeResult(Out):
    id: str
    path: str
    version: str
    title: str
    category: str | None
    topic: str | None
    created: str
    similar: list[ScribeSimilar]
    note: str | None = None  # saved but not embedded yet (the embedder was failing)
    redacted: str | None = None  # what the privacy filter replaced


class SearchHit(Out):
    id: str
    path: str
    title: str
    score: float
    snippet: str
    category: str | None
    topic: str | None
    tags: list[str]
    type: str | None
    updated: str | None
    heading: str | None = None
    similarity: float | None = None
    relevance: float


class MemorizeResult(Out):
    query: str
    mode: str
    results: list[SearchHit]
    note: str | None = None


class MemoryLink(Out):
    """A link in a memory: resolved (id, path, title of the target) or ``resolved: false``."""

    target: str
    id: str | None = None
    path: str | None = None
    title: str | None = None
    resolved: bool | None = None


class Memory(Out):
    id: str
    path: str
    version: str
    title: str
    metadata: dict[str, Any]
    text: str
    chunks: list[Section]
    links: list[MemoryLink]
    backlinks: list[NoteRef]


class GetMemoriesResult(Out):
    memories: list[Memory]
    not_found: list[str]


class RelatedResult(Out):
    id: str
    path: str
    related: list[SimilarNote]
    note: str | None = None


class TimelineResult(Out):
    id: str
    path: str
    title: str
    created: str | None
    before: list[CompactNote]
    after: list[CompactNote]
    sections: list[Section]


class ReviseResult(Out):
    id: str
    path: str
    version: str
    updated: str
    note: str | None = None  # saved but not embedded yet (the embedder was failing)
    redacted: str | None = None  # what the privacy filter replaced


class EraseResult(Out):
    id: str
    path: str
    erased: bool
    trash_path: str


class ListMemoriesResult(Out):
    memories: list[CompactNote]
    total: int
    offset: int
    next_offset: int | None


class IndexTopic(Out):
    title: str
    summary: str | None = None
    keywords: list[str]
    notes: int
    chunks: int
    updated: str | None


class IndexCategory(Out):
    title: str | None = None
    description: str | None = None
    keywords: list[str] | None = None
    notes: int
    chunks: int
    topic_count: int
    updated: str | None
    topics: dict[str, IndexTopic]


class GetIndexResult(Out):
    scope: str | None
    total_notes: int
    total_chunks: int
    total_categories: int
    total_topics: int
    updated: str | None
    categories: dict[str, IndexCategory]
    description: str | None = None  # the vault's own _about.md
    archived_notes: int | None = None  # without scope only
    note: str | None = None  # the index is still being built


class TopicAbout(Out):
    path: str
    title: str | None = None
    description: str | None = None
    summary: str | None = None
    keywords: list[str] | None = None
    text: str | None = None


class TopicMemory(CompactNote):
    text: str


class GetTopicResult(Out):
    about: TopicAbout | None = None
    topic: str
    total: int
    memories: list[TopicMemory]
    next_offset: int | None


class Progress(Out):
    done: int
    total: int


class GitCommit(Out):
    commit: str
    message: str
    paths: list[str]


class GitSkip(Out):
    tool: str
    paths: list[str]
    reason: str


class GitStats(Out):
    commit_mode: str
    installed: bool
    repository: bool
    committing: bool
    pending: int
    commits: int
    skipped: int
    failed: int
    last_commit: GitCommit | None
    last_skip: GitSkip | None


class StatsResult(Out):
    version: str
    owner_pid: int
    vault: str
    index: str
    embedder: str
    embedder_status: dict[str, Any]  # the embedder's own health report (endpoint, reachable, last_error...)
    state: str
    progress: Progress
    files: int
    notes: int
    chunks: int
    skipped: int
    warnings: int
    vectors: int
    vectors_missing: int
    problems: list[FileProblem]
    problems_total: int
    last_sync: SyncReport | None
    setup_warnings: list[str]
    git: GitStats


class RebuildResult(SyncReport):
    seconds: float


# --- structure (tools_structure.py) --------------------------------------------------------------


class DescribeResult(Out):
    """The written ``_about.md``: where, its version, and its frontmatter as the file holds it (a person
    may have written other keys, or other types: a number for a title, keywords as one string)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_compact_schema)

    path: str
    version: str
    created: bool
    category: str
    topic: str | None
    title: Any = None
    description: Any = None
    summary: Any = None
    keywords: Any = None
    redacted: str | None = None


class TrashedNote(NoteRef):
    trash_path: str


class EraseTopicResult(Out):
    topic: str
    category: str | None
    categories: list[str]
    count: int
    confirmed: bool
    would_remove: list[NoteRef] | None = None  # confirm=false
    removed: list[TrashedNote] | None = None  # confirm=true
    description_files: list[str]
    note: str | None = None


# --- links and knowledge (tools_knowledge.py) ----------------------------------------------------


class LinkResult(Out):
    source: str
    path: str
    target: str
    target_path: str
    target_title: str
    relation: str
    link: str
    reason: str | None
    changed: bool
    version: str


class RemovedLink(Out):
    relation: str
    link: str


class UnlinkResult(Out):
    source: str
    path: str
    target: str
    removed: list[RemovedLink]
    changed: bool
    version: str
    note: str | None = None


class OutgoingLink(Out):
    relation: str
    target: str
    resolved: bool
    id: str | None = None
    path: str | None = None
    title: str | None = None
    reason: str | None = None


class Backlink(NoteRef):
    relation: str
    reason: str | None = None


class GetLinksResult(NoteRef):
    links: list[OutgoingLink]
    backlinks: list[Backlink]


class RelatedReason(Out):
    kind: str  # links_to, linked_from, same_tags, same_context, similar
    relation: str | None = None
    tags: list[str] | None = None
    context: str | None = None
    similarity: float | None = None


class ExploredNote(NoteRef):
    score: float
    reasons: list[RelatedReason]
    why: str


class ExploreRelatedResult(NoteRef):
    related: list[ExploredNote]


class IssueNote(NoteRef):
    updated: str | None = None  # stale notes


class KnowledgeIssue(Out):
    kind: str  # untagged, isolated, stale, similar_tags, near_duplicate, broken_link
    notes: list[IssueNote]
    action: str
    count: int | None = None
    more: int | None = None
    similarity: float | None = None  # near_duplicate
    tags: dict[str, int] | None = None  # similar_tags: spelling -> notes
    suggested: str | None = None  # similar_tags
    target: str | None = None  # broken_link
    relation: str | None = None  # broken_link


class KnowledgeCounts(Out):
    untagged: int
    isolated: int
    stale: int
    similar_tag_groups: int
    near_duplicate_pairs: int
    broken_links: int
    links: int
    tags: int


class KnowledgeShares(Out):
    untagged: float
    isolated: float
    stale: float
    near_duplicate: float
    broken_link: float
    similar_tags: float


class DuplicatesChecked(Out):
    notes: int
    of: int
    threshold: float


class AnalyzeKnowledgeResult(Out):
    score: int
    notes: int
    counts: KnowledgeCounts
    shares: KnowledgeShares
    stale_days: int
    near_duplicates_checked: DuplicatesChecked
    issues: list[KnowledgeIssue]
    more_issues: dict[str, int]  # issue kind -> issues not listed


# --- history (tools_history.py) ------------------------------------------------------------------


class HistoryVersion(Out):
    version: str
    commit: str
    date: str
    author: str
    message: str
    path: str | None  # None: the file was deleted in this commit
    change: str  # added, modified, renamed, deleted
    content_version: str | None
    current: bool


class HistoryResult(Out):
    id: str
    path: str | None
    title: str
    erased: bool
    current_version: str | None
    uncommitted: bool
    versions: list[HistoryVersion]
    more: bool


class RestoreResult(Out):
    id: str
    path: str
    version: str
    restored: str
    unchanged: bool | None = None  # the file already held that version: nothing written
    erased_before: bool | None = None
    committing: bool | None = None


# --- export and import (tools_exchange.py) -------------------------------------------------------


class ExportedMemory(Out):
    id: str
    path: str
    title: str
    metadata: dict[str, Any]
    body: str


class ExportDocument(Out):
    spellbook_export: int
    exported: str
    spellbook_version: str
    filter: dict[str, Any] | None
    count: int
    memories: list[ExportedMemory]


class ExportResult(Out):
    format: str
    count: int
    exported: str
    path: str | None = None  # written to a file
    bytes: int | None = None
    content: ExportDocument | str | None = None  # inline: the JSON document, or the markdown text
    unreadable: list[str] | None = None
    note: str | None = None
    redacted: str | None = None


class ImportItem(Out):
    where: str
    id: str | None
    path: str
    title: str
    reason: str | None = None  # skipped
    error: str | None = None  # failed
    original_id: str | None = None  # created under a new id
    requested_path: str | None = None  # written at another path than the export's


class ImportCounts(Out):
    created: int
    overwritten: int
    unchanged: int
    skipped: int
    failed: int


class ImportResult(Out):
    file: str
    format: str
    on_conflict: str
    dry_run: bool
    total: int
    counts: ImportCounts
    created: list[ImportItem]
    overwritten: list[ImportItem]
    unchanged: list[ImportItem]
    skipped: list[ImportItem]
    failed: list[ImportItem]
    truncated: str | None = None
    warnings: list[str] | None = None
    redacted: str | None = None
