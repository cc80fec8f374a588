"""The rows the catalog stores and returns (a file's ledger entry, a note, a folder note, a chunk), and
whether a file is still what its ledger row says (``file_changed``)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spellbook.errors import VaultPathError

if TYPE_CHECKING:
    from spellbook.vault.store import Vault


@dataclass(frozen=True)
class FileRow:
    path: str
    version: str | None
    mtime_ns: int
    size: int
    problem: str | None


@dataclass(frozen=True)
class NoteRow:
    path: str
    note_id: str
    title: str
    category: str | None
    topic: str | None
    type: str | None
    context: str | None
    importance: int | None
    tags: list[str]
    created: str | None
    updated: str | None
    folder: str
    managed: bool
    meta: dict[str, Any]
    links: tuple[str, ...] = ()  # wikilink targets written in the note, as written
    relations: tuple[tuple[str, str], ...] = ()  # (relation, target) from frontmatter relation keys
    expires: str | None = None  # UTC, YYYY-MM-DDTHH:MM:SSZ (vault.fields.expires_key)
    archived: bool = False  # under _archive/
    user: str | None = None  # whose memory (spellbook/scope.py); None: shared

    def ref(self) -> dict[str, Any]:
        return {"id": self.note_id, "path": self.path, "title": self.title}

    def live(self, now: str) -> bool:
        """Not archived, and not expired at ``now`` (UTC, in the format of ``expires``)."""
        return not self.archived and (self.expires is None or self.expires > now)

    def compact(self) -> dict[str, Any]:
        """The short form tools list memories in."""
        return {
            "id": self.note_id,
            "path": self.path,
            "title": self.title,
            "category": self.category,
            "topic": self.topic,
            "tags": self.tags,
            "type": self.type,
            "importance": self.importance,
            "updated": self.updated or self.created,
        }


@dataclass(frozen=True)
class FolderRow:
    """A folder note (``_about.md``, ``_overview.md``): recorded in place of a note, never searched."""

    path: str
    folder: str  # '' for the vault root
    meta: dict[str, Any]
    body: str


@dataclass(frozen=True)
class ChunkRow:
    chunk_id: str
    path: str
    idx: int
    heading: str
    text: str
    digest: str


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk as the indexer hands it over: its row, plus its keyword-index text."""

    row: ChunkRow
    fts_title: str
    fts_meta: str


NOTE_COLS = (
    "path, note_id, title, category, topic, type, context, importance, tags, created, updated, folder, managed, meta, "
    "expires, archived, user"
)


NOTE_COUNT = NOTE_COLS.count(",") + 1


def note_row(row: tuple) -> NoteRow:
    return NoteRow(
        path=row[0],
        note_id=row[1],
        title=row[2] or "",
        category=row[3],
        topic=row[4],
        type=row[5],
        context=row[6],
        importance=row[7],
        tags=json.loads(row[8] or "[]"),
        created=row[9],
        updated=row[10],
        folder=row[11] or "",
        managed=bool(row[12]),
        meta=json.loads(row[13] or "{}"),
        expires=row[14],
        archived=bool(row[15]),
        user=row[16],
    )


NOTE_CACHE = 2048  # note rows kept between writes (a few MB)


class KeptRows:
    """Rows kept until the catalog's next write (``get`` with the catalog's write count drops them
    all when it moved; ``None``: rows that ``drop`` keeps current instead). The caller holds the
    catalog's lock (writes take it too)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: OrderedDict[str, Any] = OrderedDict()
        self.generation = -1  # the write count the rows were read at

    def get(self, generation: int | None, keys: Iterable[str]) -> dict[str, Any]:
        if generation is not None and generation != self.generation:
            self._rows.clear()
            self.generation = generation
        return {k: self._rows[k] for k in keys if k in self._rows}

    def put(self, items: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
        added = list(items)
        self._rows.update(added)
        while len(self._rows) > self.size:
            self._rows.popitem(last=False)
        return added

    def drop(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._rows.pop(key, None)

    def clear(self) -> None:
        self._rows.clear()


def meta_json(meta: dict[str, Any]) -> str:
    """Frontmatter as JSON that SQLite's JSON functions accept: YAML's ``.nan``/``.inf`` (which
    ``json.dumps`` writes as NaN/Infinity, invalid JSON) become strings; anything else not JSON
    (a set, bytes) becomes its ``str``."""
    return json.dumps(_finite(meta), ensure_ascii=False, default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    return value


def file_changed(vault: Vault, row: FileRow | None, path: str) -> bool:
    """True when the file at ``path`` is no longer what the catalog indexed (or is gone)."""
    try:
        st = vault.stat(path)
    except (OSError, VaultPathError):
        return True
    return row is None or row.mtime_ns != st.st_mtime_ns or row.size != st.st_size
