"""What a vault file becomes in the index: its catalog rows and the texts to embed. Pure (the
indexer passes in the one lookup it needs), so the indexer is only about when and in what order."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spellbook.index.catalog import ChunkRow, FileRow, FolderRow, IndexedChunk, NoteRow
from spellbook.index.chunker import chunk_body
from spellbook.index.keyword import index_text
from spellbook.vault.fields import (
    derived_id,
    expires_key,
    field_text,
    inline_tags,
    normalize_importance,
    normalize_tags,
    note_id_of,
    place_of,
    relation_links,
    scope_of,
    title_of,
    wikilinks,
)
from spellbook.vault.note import parse_note
from spellbook.vault.paths import is_archived, is_folder_note


@dataclass
class Prepared:
    """One file, analysed: its ledger row, its note (or folder note) row, its chunks and what to embed."""

    file: FileRow
    note: NoteRow | FolderRow | None
    chunks: list[IndexedChunk]
    embed_texts: list[str]


def analyse_note(
    path: str,
    text: str,
    version: str,
    mtime_ns: int,
    size: int,
    max_chunk_chars: int,
    holder_of: Callable[[str, str], str | None],
) -> Prepared:
    """A file's rows for the catalog and the texts to embed: pure, but for ``holder_of(note_id, path)``,
    which names another existing file that already has this note's id (or None)."""
    parsed = parse_note(text)
    meta = parsed.meta
    problem = parsed.problem
    body = parsed.body if parsed.plain_body is None else parsed.plain_body  # over a parsing budget
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    if is_folder_note(path):  # a folder's description or generated overview: recorded, not searchable
        return Prepared(
            FileRow(path, version, mtime_ns, size, problem), FolderRow(path, folder, meta, parsed.body), [], []
        )
    expires = expires_key(meta.get("expires"))
    if expires is None and meta.get("expires") not in (None, ""):
        problem = problem or f"expires {meta['expires']!r} is not an ISO date or date-time; the note never expires"
    note_id = note_id_of(meta, path)
    other = holder_of(note_id, path)
    if other is not None:
        problem = f"duplicate id {note_id!r}: {other} has it too; give one of them a new id"
        note_id = derived_id(path)
    title = title_of(meta, path)
    category, topic = place_of(meta, path)
    context, user = scope_of(meta)
    tags = normalize_tags(meta.get("tags"))
    tags = list(dict.fromkeys(tags + normalize_tags(meta.get("tag")) + inline_tags(body)))
    note = NoteRow(
        path=path,
        note_id=note_id,
        title=title,
        category=category,
        topic=topic,
        type=field_text(meta.get("type")),
        context=context,
        importance=normalize_importance(meta.get("importance")),
        tags=tags,
        created=field_text(meta.get("created")),
        updated=field_text(meta.get("updated")),
        folder=folder,
        managed="id" in meta,
        meta=meta,
        links=tuple(wikilinks(body, meta.get("links"))),
        relations=tuple(relation_links(meta)),
        expires=expires,
        archived=is_archived(path),
        user=user,
    )
    key = hashlib.sha1(path.encode("utf-8")).hexdigest()[:16]
    fts_meta = index_text(
        " ".join(_flatten(meta.get(k)) for k in ("keywords", "questions", "entities", "aliases")) + " " + " ".join(tags)
    )
    chunks: list[IndexedChunk] = []
    embed_texts: list[str] = []
    for chunk in chunk_body(body, max_chunk_chars):
        heading = chunk.heading
        text = embed_text(title, heading, chunk.text)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        row = ChunkRow(f"{key}:{chunk.index}", path, chunk.index, heading, chunk.text, digest)
        chunks.append(IndexedChunk(row, index_text(f"{title} {heading}"), fts_meta))
        embed_texts.append(text)
    return Prepared(FileRow(path, version, mtime_ns, size, problem), note, chunks, embed_texts)


def embed_texts(path: str, text: str, max_chunk_chars: int) -> list[tuple[str, str]]:
    """(digest, text to embed) of each chunk ``text`` would be indexed as at ``path``."""
    prepared = analyse_note(path, text, "", 0, len(text), max_chunk_chars, lambda _id, _path: None)
    return [(chunk.row.digest, embedded) for chunk, embedded in zip(prepared.chunks, prepared.embed_texts)]


def embed_text(title: str, heading: str | None, text: str) -> str:
    """What a chunk's vector is made from: the note's title, the section heading, the text."""
    lead = title if not heading or heading == title else f"{title}\n{heading}"
    return f"{lead}\n{text}"


def _flatten(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(_flatten(v) for v in value)
    return str(value)
