"""Results of the core tools (tools.py): scribe, memorize, get_memories, revise, erase, stats..."""

from __future__ import annotations

from typing import Any

from spellbook.server.models.base import CompactNote, FileProblem, NoteRef, Out, Section, SimilarNote, SyncReportOut


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
    found_by: list[str] = []  # noqa: RUF012 - pydantic copies a default; which side found it: "keywords", "meaning"


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


class SummariserSpend(Out):
    """The opt-in session summariser's spend today (a UTC day): tokens against its cap."""

    model: str | None  # ollama:<model> or openai:<model>; None: off
    day: str
    tokens: int
    daily_tokens: int
    calls: int
    refused: int  # calls not made: they could have passed the cap
    fallbacks: int  # calls that failed or timed out: the extractive digest stayed


class TeamSyncStats(Out):
    """The vault's sync with its git remote (docs/sync.md); ``last`` is the last round's answer."""

    remote: str
    every_seconds: float | None
    running: bool
    phase: str | None  # committing, fetching, merging, pushing while a round runs
    rounds: int
    failures: int
    last: dict[str, Any] | None
    last_success_at: str | None


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
    last_sync: SyncReportOut | None
    setup_warnings: list[str]
    git: GitStats
    summariser: SummariserSpend
    sync: TeamSyncStats | None = None


class RebuildResult(SyncReportOut):
    seconds: float
