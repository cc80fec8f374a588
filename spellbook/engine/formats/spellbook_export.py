"""Export and import formats: build, render and validate them. Pure functions, no I/O.

A Spellbook export (docs/export.md), version 1::

    {
      "spellbook_export": 1,
      "exported": "2026-11-22T13:27:54+09:00",
      "spellbook_version": "0.1.0",
      "filter": {"category": "ops"} | null,
      "count": 1,
      "memories": [
        {"id": "3f9c2a7b1d4e8f60", "path": "ops/deploy/Deploy pipeline.md", "title": "Deploy pipeline",
         "metadata": {...the whole frontmatter: created, updated, links, unknown keys...},
         "body": "...the text after the frontmatter, byte for byte..."}
      ]
    }

The official MCP memory server's knowledge graph (``memory.jsonl`` of
``@modelcontextprotocol/server-memory``) is read too: one JSON object a line, entities
``{"type": "entity", "name", "entityType", "observations": [...]}`` and relations
``{"type": "relation", "from", "to", "relationType"}``; ``mcp_memory.py`` turns it into the
same entries a Spellbook export holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any, Literal

from spellbook.errors import InvalidInputError
from spellbook.vault.note import dump_field
from spellbook.vault.paths import MAX_FILE_BYTES, NOTE_SUFFIX, is_ignored

ExportFormat = Literal["json", "markdown"]
ImportFormat = Literal["auto", "json", "mcp-memory"]
OnConflict = Literal["skip", "overwrite", "new_id"]
EXPORT_VERSION = 1
TOP_KEYS = frozenset({"spellbook_export", "exported", "spellbook_version", "filter", "count", "memories"})
ENTRY_KEYS = frozenset({"id", "path", "title", "metadata", "body"})
REQUIRED_ENTRY_KEYS = ("id", "path", "metadata", "body")
MAX_PROBLEMS_SHOWN = 20
MAX_ID_CHARS = 200
MAX_IMPORT_ENTRIES = 100_000  # memories (or JSONL lines) in one import file; split bigger ones
MAX_IMPORT_DEPTH = 32  # lists/objects inside an entry's metadata (frontmatter is held to 32 too)


@dataclass(frozen=True)
class Entry:
    """One memory to import, validated. ``where`` names it in messages (``memories[3]``, ``line 7``)."""

    where: str
    id: str
    path: str
    title: str
    meta: dict[str, Any]
    body: str
    stamped: bool = False  # created/updated were made up at import (no timestamps in the source)


# --- export -----------------------------------------------------------------------------------
def export_document(entries: list[Entry], exported: str, version: str, filter: dict | None) -> dict[str, Any]:
    return {
        "spellbook_export": EXPORT_VERSION,
        "exported": exported,
        "spellbook_version": version,
        "filter": filter,
        "count": len(entries),
        "memories": [
            {"id": e.id, "path": e.path, "title": e.title, "metadata": e.meta, "body": e.body} for e in entries
        ],
    }


def markdown_document(entries: list[Entry], exported: str, filter: dict | None) -> str:
    """Every memory in one readable markdown file: a section per memory (its title as a heading,
    id and path, the frontmatter as a YAML block), then the body as it is."""
    scope = f" matching {json.dumps(filter, ensure_ascii=False)}" if filter else ""
    parts = [f"# Spellbook export\n\nExported {exported}: {len(entries)} memories{scope}.\n"]
    for e in entries:
        head = f"## {' '.join(e.title.split()) or e.path}\n\n- id: `{e.id}`\n- path: `{e.path}`\n"
        if e.meta:
            yaml_text = "".join(dump_field(key, value) for key, value in e.meta.items())
            fence = "`" * max(3, _longest_run(yaml_text, "`") + 1)
            head += f"\n{fence}yaml\n{yaml_text}{fence}\n"
        body = e.body if e.body.endswith("\n") or not e.body else e.body + "\n"
        parts.append(f"{head}\n{body}")
    return "\n---\n\n".join(parts)


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return longest


# --- import: a Spellbook export -----------------------------------------------------------------
def parse_export(data: Any) -> list[Entry]:
    """Validate a parsed Spellbook export; every problem is named (``memories[3]: ...``) and the
    whole file is refused if any entry is wrong, so nothing is half-imported."""
    if not isinstance(data, dict) or "spellbook_export" not in data:
        raise InvalidInputError(
            'Not a Spellbook export: expected a JSON object with "spellbook_export": 1 and "memories" '
            "(docs/export.md), or an MCP memory server memory.jsonl."
        )
    version = data["spellbook_export"]
    if version != EXPORT_VERSION:
        raise InvalidInputError(
            f"Unsupported export version {version!r}: this Spellbook reads version {EXPORT_VERSION}."
        )
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise InvalidInputError(f"Unknown top-level key(s) {', '.join(map(repr, unknown))} in the export.")
    memories = data.get("memories")
    if not isinstance(memories, list):
        raise InvalidInputError('"memories" must be a list of memory objects.')
    entries: list[Entry] = []
    problems: list[str] = []
    for n, item in enumerate(memories):
        where = f"memories[{n}]"
        try:
            entries.append(_entry(where, item))
        except InvalidInputError as exc:
            problems.append(str(exc))
    refuse_if(problems, len(memories))
    return entries


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def read_export(text: str, name: str) -> list[Entry]:
    """Read a Spellbook export one memory at a time (validating each as it comes), so that memory
    stays bounded by the entries kept, not by the objects a huge file would build; refuse more
    than ``MAX_IMPORT_ENTRIES`` memories and nesting deeper than ``MAX_IMPORT_DEPTH``."""
    not_json = (
        f"{name} is not JSON ({{}}). "
        "Import a Spellbook export (export format json) or an MCP memory server memory.jsonl."
    )
    top: dict[str, Any] = {}
    entries: list[Entry] = []
    problems: list[str] = []
    count = 0

    def value(pos: int) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(text, pos)
        except RecursionError:
            raise InvalidInputError(
                f"{name} is nested deeper than {MAX_IMPORT_DEPTH} levels; nothing was imported."
            ) from None
        except ValueError as exc:
            raise InvalidInputError(not_json.format(exc)) from None

    def expect(pos: int, char: str) -> int:
        pos = _WS.match(text, pos).end()
        if not text.startswith(char, pos):
            raise InvalidInputError(not_json.format(f"expected {char!r} at character {pos}"))
        return _WS.match(text, pos + 1).end()

    pos = _WS.match(text).end()
    if not text.startswith("{", pos):
        parse_export(value(pos)[0])  # not an object: parse_export names the problem
    pos = expect(pos, "{")
    while not text.startswith("}", pos):
        key, pos = value(pos)
        pos = expect(pos, ":")
        if key == "memories" and text.startswith("[", pos):
            pos = _WS.match(text, pos + 1).end()
            while not text.startswith("]", pos):
                item, pos = value(pos)
                count += 1
                if count > MAX_IMPORT_ENTRIES:
                    raise InvalidInputError(
                        f"{name} has more than {MAX_IMPORT_ENTRIES:,} memories, the most one import takes; "
                        "split it (export with a filter) and import the parts."
                    )
                try:
                    entries.append(_entry(f"memories[{count - 1}]", item))
                except InvalidInputError as exc:
                    if len(problems) < MAX_PROBLEMS_SHOWN:
                        problems.append(str(exc))
                    else:
                        problems.append("")
                pos = _WS.match(text, pos).end()
                if text.startswith(",", pos):
                    pos = _WS.match(text, pos + 1).end()
                elif not text.startswith("]", pos):
                    raise InvalidInputError(not_json.format(f"expected ',' or ']' at character {pos}"))
            top[key] = []
            pos += 1
        else:
            top[key], pos = value(pos)
        pos = _WS.match(text, pos).end()
        if text.startswith(",", pos):
            pos = _WS.match(text, pos + 1).end()
        elif not text.startswith("}", pos):
            raise InvalidInputError(not_json.format(f"expected ',' or '}}' at character {pos}"))
    if text[pos + 1 :].strip():
        raise InvalidInputError(not_json.format(f"extra data at character {pos + 1}"))
    parse_export(top)  # the top level: version, unknown keys, memories a list
    if problems:
        shown = [p for p in problems if p]
        refuse_if(shown + [""] * (len(problems) - len(shown)), count)
    return entries


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and objects, counted up to ``limit + 1``."""
    if not isinstance(value, dict | list) or limit < 0:
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in items), default=0)


def _entry(where: str, item: Any) -> Entry:
    if not isinstance(item, dict):
        raise InvalidInputError(f"{where}: must be an object, got {type(item).__name__}.")
    label = f"{where} (id {item['id']!r})" if isinstance(item.get("id"), str) else where
    missing = [k for k in REQUIRED_ENTRY_KEYS if k not in item]
    if missing:
        raise InvalidInputError(f"{label}: missing {', '.join(missing)}.")
    unknown = sorted(set(item) - ENTRY_KEYS)
    if unknown:
        raise InvalidInputError(f"{label}: unknown key(s) {', '.join(unknown)}.")
    note_id, path, meta, body = item["id"], item["path"], item["metadata"], item["body"]
    title = item.get("title", "")
    if not isinstance(note_id, str) or not note_id.strip() or len(note_id) > MAX_ID_CHARS or not note_id.isprintable():
        raise InvalidInputError(
            f"{label}: id must be a non-empty string of printable characters (at most {MAX_ID_CHARS})."
        )
    if not isinstance(meta, dict):
        raise InvalidInputError(
            f"{label}: metadata must be an object (the note's frontmatter), got {type(meta).__name__}."
        )
    if _depth(meta, MAX_IMPORT_DEPTH) > MAX_IMPORT_DEPTH:
        raise InvalidInputError(f"{label}: metadata is nested deeper than {MAX_IMPORT_DEPTH} levels.")
    if own_id(meta) not in (None, note_id):
        raise InvalidInputError(f"{label}: metadata.id {meta['id']!r} differs from id {note_id!r}.")
    if any(not key.strip() for key in meta):
        raise InvalidInputError(f"{label}: metadata has an empty key.")
    if not isinstance(body, str):
        raise InvalidInputError(f"{label}: body must be a string, got {type(body).__name__}.")
    if "\x00" in body:
        raise InvalidInputError(f"{label}: body contains NUL characters.")
    if len(body.encode("utf-8")) > MAX_FILE_BYTES:
        raise InvalidInputError(
            f"{label}: body is over {MAX_FILE_BYTES // 2**20} MB, the largest note Spellbook indexes."
        )
    if not isinstance(title, str):
        raise InvalidInputError(f"{label}: title must be a string.")
    check_note_path(label, path)
    return Entry(where, note_id, path, title, meta, body)


def own_id(meta: dict[str, Any]) -> str | None:
    """The id a note's frontmatter gives it, if usable (as the indexer reads it)."""
    value = meta.get("id")
    return str(value).strip() if isinstance(value, str | int) and str(value).strip() else None


def check_note_path(label: str, path: Any) -> None:
    """A vault-relative note path (the vault's own guard, ``resolve_path``, runs on it too)."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidInputError(f"{label}: path must be a vault-relative path like 'topic/Note.md'.")
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (len(path) > 1 and path[1] == ":"):
        raise InvalidInputError(f"{label}: path {path!r} is not inside the vault (absolute, or has '..').")
    if not path.endswith(NOTE_SUFFIX) or is_ignored(pure.as_posix()):
        raise InvalidInputError(
            f"{label}: path {path!r} is not a note path (a .md file outside hidden folders, .trash/ and .obsidian/)."
        )


def refuse_if(problems: list[str], total: int) -> None:
    if not problems:
        return
    shown = [p for p in problems[:MAX_PROBLEMS_SHOWN] if p]
    more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    raise InvalidInputError(
        f"The import file has {len(problems)} invalid entr{'y' if len(problems) == 1 else 'ies'} of {total}; "
        "nothing was imported. Fix them and import again:\n- " + "\n- ".join(shown) + more
    )


_MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")


def scrub_entries(
    entries: list[Entry], scrub: Callable[[str], tuple[str, list]], may_hold: Callable[[str], bool]
) -> tuple[list[Entry], list[str]]:
    """Secrets out of each entry's id, path and title (its metadata and body are scrubbed when
    written). In a path the marker becomes ``REDACTED-<kind>``: a file name with no brackets or colon.
    ``may_hold(text)`` is False when nothing in ``text`` could be redacted: one look at the three."""
    out: list[Entry] = []
    kinds: list[str] = []
    for entry in entries:
        if not may_hold(f"{entry.id}\n{entry.path}\n{entry.title}"):
            out.append(entry)
            continue
        changes: dict[str, str] = {}
        for name in ("id", "path", "title"):
            value, found = scrub(getattr(entry, name))
            if found:
                kinds += [r.kind for r in found]
                changes[name] = _MARKER.sub(r"REDACTED-\1", value) if name == "path" else value
        out.append(replace(entry, **changes) if changes else entry)
    return out, kinds


def lines_of(text: str) -> Iterator[str]:
    """The lines of ``text`` one at a time (``str.splitlines`` would copy them all at once)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end].rstrip("\r")
        start = end + 1


def import_summary(data: dict[str, Any]) -> str:
    """One paragraph for the model (and the CLI): counts, then every failure."""
    counts = data["counts"]
    verb = "Would import" if data["dry_run"] else "Imported"
    text = (
        f"{verb} {data['total']} memories from {data['file']} ({data['format']}): "
        + ", ".join(f"{n} {name}" for name, n in counts.items() if n or name == "created")
        + "."
    )
    if data.get("redacted"):
        text += f" Privacy filter: {data['redacted']}."
    for item in data["failed"]:
        text += f"\nFailed {item['where']} (id {item['id']}): {item['error']}"
    for warning in data.get("warnings", []):
        text += f"\nWarning: {warning}"
    return text
