"""Results of the link and knowledge-health tools (tools_knowledge.py)."""

from __future__ import annotations

from spellbook.server.models.base import NoteRef, Out


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
    merged_into: NoteRef | None = None  # unresolved: a merge moved the note to .trash/ (survivor the call sees)


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
    kind: str  # untagged, isolated, stale, similar_tags, near_duplicate, broken_link, contradiction
    notes: list[IssueNote]
    action: str
    count: int | None = None
    more: int | None = None
    similarity: float | None = None  # near_duplicate
    tags: dict[str, int] | None = None  # similar_tags: spelling -> notes
    suggested: str | None = None  # similar_tags
    target: str | None = None  # broken_link
    relation: str | None = None  # broken_link
    evidence: str | None = None  # contradiction: "linked 'contradicts'", or the numbers that differ


class KnowledgeCounts(Out):
    untagged: int
    isolated: int
    stale: int
    similar_tag_groups: int
    near_duplicate_pairs: int
    broken_links: int
    contradictions: int
    links: int
    tags: int


class KnowledgeShares(Out):
    untagged: float
    isolated: float
    stale: float
    near_duplicate: float
    broken_link: float
    similar_tags: float
    contradiction: float


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
    stale_seconds: float | None = None  # only for the web pages' stale_ok reads: the answer's age


class MergedNote(NoteRef):
    trash_path: str


class RelinkedNote(NoteRef):
    links: int  # links in it that now point at the survivor


class NotRelinkedNote(NoteRef):
    reason: str


class MergeResult(NoteRef):
    version: str
    updated: str
    merged: list[MergedNote]
    relinked: list[RelinkedNote]
    committing: bool
    not_relinked: list[NotRelinkedNote] | None = None  # notes that still link to a merged one
    note: str | None = None
    redacted: str | None = None  # what the privacy filter replaced in the text passed
