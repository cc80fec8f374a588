"""The note format: parse and render markdown files with YAML frontmatter. Pure functions, no I/O.

Contract (see docs/note-format.md):

* A file is ``---\\n<yaml mapping>---\\n<body>``; the body is kept byte for byte.
* Spellbook owns a fixed set of keys (``OWNED_KEYS``). When it revises a note it rewrites only
  the top-level blocks of the keys it changes; every other line of the frontmatter (keys a
  person added, comments, their formatting) stays exactly where and how it was.
* Rendering is deterministic: the same fields and body always give the same bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from spellbook.vault.fields import LINK_REASONS, RELATIONS

# Field order for new notes; also the set of keys Spellbook may rewrite.
OWNED_KEYS: tuple[str, ...] = (
    "id",
    "title",
    "category",
    "topic",
    "tags",
    "keywords",
    "questions",
    "entities",
    "importance",
    "type",
    "context",
    "source",
    "links",
    *RELATIONS,
    LINK_REASONS,
    "expires",
    "created",
    "updated",
)
NOTE_TYPES: tuple[str, ...] = ("insight", "success", "failure", "decision", "note", "temporary", "session")

_OPEN_FENCE = re.compile(r"---[ \t]*\r?\n")
_CLOSE_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
# A top-level key line: not indented, not a comment, not a list item.
_KEY_LINE = re.compile(r"""^(?P<key>"[^"]*"|'[^']*'|[^\s#\-'"][^:]*?)[ \t]*:(?:[ \t]|\r?$)""")


@dataclass(frozen=True)
class ParsedNote:
    """A note file split into its parts. ``meta`` is empty when there is no usable frontmatter."""

    meta: dict[str, Any]
    body: str
    frontmatter: str | None = None  # raw YAML text between the fences, if any
    newline: str = "\n"
    bom: bool = False
    problem: str | None = None  # why the frontmatter was not used, if it was not
    blocks: list[tuple[str | None, str]] = field(default_factory=list)


def content_version(data: bytes | str) -> str:
    """The version of a file as callers see it: a short hash of its exact bytes."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:16]


def parse_note(text: str) -> ParsedNote:
    """Split ``text`` into frontmatter and body. Never raises on bad YAML: it reports a problem."""
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    opening = _OPEN_FENCE.match(text)
    first_line = text.split("\n", 1)[0]
    newline = "\r\n" if first_line.endswith("\r") else "\n"
    if not opening:
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom)
    closing = _CLOSE_FENCE.search(text, opening.end())
    if closing is None:
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom)
    raw = text[opening.end() : closing.start()]
    end = closing.end()
    if text.startswith("\r\n", end):
        end += 2
    elif text.startswith("\n", end):
        end += 1
    body = text[end:]
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date YAML cannot build (2026-02-30)
        reason = str(exc).replace("\n", " ")
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom, problem=f"malformed YAML frontmatter: {reason}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problem = f"frontmatter is a {type(data).__name__}, not a mapping of keys to values"
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom, problem=problem)
    meta = {str(k): _plain(v) for k, v in data.items()}
    return ParsedNote(
        meta=meta, body=body, frontmatter=raw, newline=newline, bom=bom, blocks=_split_blocks(raw)
    )


def render_note(
    meta: dict[str, Any], body: str, original: ParsedNote | None = None, remove: tuple[str, ...] = ()
) -> str:
    """The file text for ``meta`` + ``body``.

    With ``original``, only the blocks of keys whose value changed are rewritten (in place);
    new keys are appended in ``OWNED_KEYS`` order; every other byte of the frontmatter is kept.
    """
    newline = original.newline if original else "\n"
    blocks = list(original.blocks) if original and original.frontmatter is not None else []
    old = original.meta if original else {}
    index = {key: i for i, (key, _) in enumerate(blocks) if key is not None}
    for key in remove:
        if key in index:
            blocks[index[key]] = (None, "")
    ordered = sorted(meta, key=lambda k: OWNED_KEYS.index(k) if k in OWNED_KEYS else len(OWNED_KEYS))
    for key in ordered:
        value = meta[key]
        if key in index and old.get(key) == value:
            continue  # unchanged: keep the person's bytes
        rendered = dump_field(key, value, newline)
        if key in index:
            blocks[index[key]] = (key, rendered)
        else:
            if blocks and not blocks[-1][1].endswith(("\n", "\r")):
                blocks[-1] = (blocks[-1][0], blocks[-1][1] + newline)
            blocks.append((key, rendered))
    front = "".join(text for _, text in blocks)
    text = f"---{newline}{front}---{newline}{body}"
    return ("\ufeff" + text) if original and original.bom else text


def dump_field(key: str, value: Any, newline: str = "\n") -> str:
    text = yaml.dump(
        {key: value}, Dumper=_Dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=10_000
    )
    return text.replace("\n", newline) if newline != "\n" else text


def now_iso() -> str:
    """The current time, ISO 8601 with timezone, to the second."""
    return dt.datetime.now(dt.timezone.utc).astimezone().replace(microsecond=0).isoformat()


def _split_blocks(raw: str) -> list[tuple[str | None, str]]:
    """Split frontmatter text into (top-level key, its exact lines); comments stay with the key above."""
    blocks: list[tuple[str | None, str]] = []
    for line in raw.splitlines(keepends=True):
        match = _KEY_LINE.match(line)
        if match:
            key = match.group("key").strip("\"'")
            blocks.append((key, line))
        elif blocks:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + line)
        else:
            blocks.append((None, line))
    return blocks


def _plain(value: Any) -> Any:
    """YAML values as JSON-friendly Python: dates become ISO strings."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class _Dumper(yaml.SafeDumper):
    """Obsidian-style YAML: lists indented under their key, timestamps unquoted."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))?$")


def _valid_time(value: str) -> bool:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:  # e.g. month 13: written quoted, as a string, or YAML could not read it back
        return False
    return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _TIMESTAMP.match(value) and _valid_time(value):
        # Plain style: YAML reads it back as a timestamp, which parse_note turns into this string.
        return dumper.represent_scalar("tag:yaml.org,2002:timestamp", value)
    if value.startswith("[[") and value.endswith("]]") and "\n" not in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')  # as Obsidian writes links
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)
