"""The note format: parse and render markdown files with YAML frontmatter. Pure functions, no I/O.

Contract (see docs/note-format.md):

* A file is ``---\\n<yaml mapping>---\\n<body>``; the body is kept byte for byte.
* Spellbook owns a fixed set of keys (``OWNED_KEYS``). When it revises a note it rewrites only
  the top-level blocks of the keys it changes; every other line of the frontmatter (keys a
  person added, comments, their formatting) stays exactly where and how it was.
* Rendering is deterministic: the same fields and body always give the same bytes.
* Parsing has budgets (docs/security.md, "Hostile notes and imports"): frontmatter size, nesting
  depth, aliases, and nodes after aliases are expanded. A note over a budget is read like one
  with malformed YAML: no metadata, the whole text as its body, and a ``problem``; never an
  exception, never slow.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import time
from dataclasses import dataclass, field
from typing import Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.resolver

from spellbook.errors import InvalidInputError
from spellbook.vault.fields import LINK_REASONS, RELATIONS
from spellbook.vault.plain_yaml import NUMBER_STARTS, TIMESTAMP, YAML12_NUMBER, plain_field, read_plain, valid_time

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

# Parsing budgets (docs/security.md). Real frontmatter is a few hundred bytes, a few levels deep.
MAX_FRONTMATTER_BYTES = 32 * 1024  # the YAML between the fences
MAX_DEPTH = 32  # lists/mappings inside one another (the top-level mapping is 1)
MAX_ALIASES = 100  # *alias references
MAX_NODES = 10_000  # values after every alias is expanded (a "billion laughs" bomb stops here)
MAX_PARSE_SECONDS = 2.0  # a safety net: the budgets above keep the worst case near 0.2 s

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
    # Over a parsing budget: the text after the frontmatter, which is what the index reads (body
    # stays the whole text, so that nothing that writes or exports the note can lose a byte).
    plain_body: str | None = None


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
        data = load_yaml(raw) if raw.strip() else {}
    except (OverBudgetError, RecursionError) as exc:  # RecursionError: a last line of defence
        problem = f"frontmatter over Spellbook's parsing budget ({exc}); the note is indexed as plain text"
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom, problem=problem, plain_body=body)
    except Exception as exc:  # noqa: BLE001 - YAMLError, ValueError (2026-02-30), and PyYAML's own slips:
        # AttributeError for `!!timestamp x`, found by the fuzz test; a note must never stop the index
        reason = " ".join(str(exc).split())[:300]
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom, problem=f"malformed YAML frontmatter: {reason}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problem = f"frontmatter is a {type(data).__name__}, not a mapping of keys to values"
        return ParsedNote(meta={}, body=text, newline=newline, bom=bom, problem=problem)
    meta = {str(k): _plain(v) for k, v in data.items()}
    return ParsedNote(meta=meta, body=body, frontmatter=raw, newline=newline, bom=bom, blocks=_split_blocks(raw))


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


ID_KEYS = ("id", "merged_into")  # the fields that name a memory: a tool that reads them as numbers loses it


def quote_number_ids(text: str) -> str | None:
    """``text`` with its ``ID_KEYS`` quoted where they are plain strings YAML 1.2 reads as numbers
    (``id: 123e4567``, written so before Spellbook quoted them: Obsidian shows Infinity, and a
    property edit there writes it back); only the value changes, every other byte is kept. None
    when there is nothing to quote."""
    note = parse_note(text)
    if note.frontmatter is None:
        return None
    bom = 1 if text.startswith("\ufeff") else 0
    offset = _OPEN_FENCE.match(text, bom).end()  # where the frontmatter's first block starts
    cuts: list[tuple[int, int, str]] = []
    for key, block in note.blocks:
        value = note.meta.get(key) if key in ID_KEYS else None
        plain = _PLAIN_VALUE.match(block)
        if isinstance(value, str) and YAML12_NUMBER.match(value) and plain and plain.group("value") == value:
            cuts.append((offset + plain.start("value"), offset + plain.end("value"), f"'{value}'"))
        offset += len(block)
    for start, end, quoted in reversed(cuts):
        text = text[:start] + quoted + text[end:]
    return text if cuts else None


_PLAIN_VALUE = re.compile(r"[^:]*:[ \t]*(?P<value>[^\s'\"#][^\s#]*)[ \t]*(?:#.*)?\r?(?:\n|$)")


def dump_field(key: str, value: Any, newline: str = "\n") -> str:
    text = plain_field(key, value)
    if text is None:
        text = _yaml_field(key, value)
    return text.replace("\n", newline) if newline != "\n" else text


def _yaml_field(key: str, value: Any) -> str:
    if _nesting(value, MAX_DEPTH) >= MAX_DEPTH:  # the note could not be read back within its budget
        raise InvalidInputError(
            f"Field {key!r} is nested deeper than {MAX_DEPTH - 1} levels of lists/objects; flatten it."
        )
    return yaml.dump(
        {key: value}, Dumper=_Dumper, allow_unicode=True, sort_keys=False, default_flow_style=False, width=10_000
    )


def _nesting(value: Any, limit: int) -> int:
    """Levels of lists/mappings in ``value``, counted up to ``limit + 1``."""
    if not isinstance(value, dict | list | tuple | set) or limit < 0:
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_nesting(v, limit - 1) for v in items), default=0)


def now_iso() -> str:
    """The current time, ISO 8601 with timezone, to the second."""
    return dt.datetime.now(dt.UTC).astimezone().replace(microsecond=0).isoformat()


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
    """YAML values as JSON-friendly Python: dates become ISO strings, sets and pairs lists,
    binary text. (Depth and size are bounded by the loader's budgets.)"""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [_plain(v) for v in sorted(value, key=str)]
    if isinstance(value, bytes):  # !!binary
        return value.decode("utf-8", "replace")
    return value


class OverBudgetError(ValueError):
    """Frontmatter over a parsing budget; the message says which one."""


def load_yaml(raw: str) -> Any:
    """``yaml.safe_load`` within the parsing budgets; raises ``OverBudgetError`` past one."""
    if len(raw) > MAX_FRONTMATTER_BYTES or len(raw.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise OverBudgetError(f"over {MAX_FRONTMATTER_BYTES // 1024} KB")
    plain = read_plain(raw)
    if plain is not None:
        return plain
    loader = _BudgetLoader(raw)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


try:  # libyaml parses about 8x faster; the composer stays Python so that it can count
    from yaml._yaml import CParser as _Parser

    _READER: tuple[type, ...] = ()
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    _READER = (Reader, Scanner)


class _BudgetLoader(
    yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver, *_READER, _Parser
):
    """``yaml.SafeLoader`` that counts depth, aliases and nodes while it composes the document."""

    def __init__(self, stream: str) -> None:
        if _READER:  # pure Python: Reader takes the stream, Scanner and Parser read from it
            _READER[0].__init__(self, stream)
            _READER[1].__init__(self)
            _Parser.__init__(self)
        else:
            _Parser.__init__(self, stream)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        yaml.composer.Composer.__init__(self)
        self._deadline = time.monotonic() + MAX_PARSE_SECONDS
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise OverBudgetError(f"more than {MAX_ALIASES} aliases")
            return super().compose_node(parent, index)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise OverBudgetError(f"more than {MAX_NODES:,} values")
        if self._nodes % 256 == 0 and time.monotonic() > self._deadline:
            raise OverBudgetError(f"took over {MAX_PARSE_SECONDS:g} s to read")
        nests = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        self._depth += nests
        try:
            if self._depth > MAX_DEPTH:
                raise OverBudgetError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= nests

    def compose_document(self) -> Any:
        node = super().compose_document()
        if self._aliases:
            _check_expansion(node)
        return node


def _check_expansion(root: yaml.Node) -> None:
    """Count the values ``root`` stands for once every alias is expanded; refuse cycles."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise OverBudgetError("an alias refers to the value that contains it")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise OverBudgetError(f"more than {MAX_NODES:,} values once aliases are expanded")
        open_nodes.discard(key)
        sizes[key] = total
        return total

    size(root)


class _Dumper(yaml.SafeDumper):
    """Obsidian-style YAML: lists indented under their key, timestamps unquoted, and a string that
    YAML 1.2 would read as a number quoted (plain_yaml.YAML12_NUMBER)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if TIMESTAMP.match(value) and valid_time(value):
        # Plain style: YAML reads it back as a timestamp, which parse_note turns into this string.
        return dumper.represent_scalar("tag:yaml.org,2002:timestamp", value)
    if value.startswith("[[") and value.endswith("]]") and "\n" not in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')  # as Obsidian writes links
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_NUMBER, NUMBER_STARTS)
