"""The plain subset of YAML that Spellbook writes for its own fields, written and read without
PyYAML (spellbook/vault/note.py uses PyYAML for everything else): one field a line, ``key: value``
or ``key:`` then ``  - item`` lines; plain strings, decimal integers, booleans, timestamps.
PyYAML's emitter costs 0.05 ms a field, and parse_note takes 86 us a note through its loader
against 29 us through ``read_plain``; tests/unit/test_note.py holds both sides equal to PyYAML's
on generated values."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import yaml
import yaml.constructor
import yaml.resolver


def plain_field(key: str, value: Any) -> str | None:
    """The bytes PyYAML's emitter (``note._yaml_field``) writes for a word key with a plain string,
    an integer, a boolean, a timestamp or a list of plain strings; None for anything else."""
    if not _plain_key(key):
        return None
    if isinstance(value, list):
        if value and all(isinstance(v, str) and _plain_str(v) for v in value):
            return f"{key}:\n" + "".join(f"  - {v}\n" for v in value)
        return None
    if isinstance(value, bool):
        return f"{key}: {'true' if value else 'false'}\n"
    if isinstance(value, int):
        return f"{key}: {value}\n"
    if isinstance(value, str) and (_plain_str(value) or (TIMESTAMP.match(value) and valid_time(value))):
        return f"{key}: {value}\n"
    return None


_PLAIN_PUNCTUATION = frozenset(" _.,-()/'")

# Numbers YAML 1.2 (and js-yaml) read that PyYAML's YAML 1.1 resolver does not: 123e4567, 1e-5,
# .5e3, 1., 0o17. JavaScript's YAML readers (js-yaml, yaml: Obsidian's world) and ruamel.yaml
# follow YAML 1.2, so a string like these is written quoted, or it comes back a number there (an
# id 123e4567 reads as Infinity, and a tool that writes the properties back writes that over it).
YAML12_NUMBER = re.compile(
    r"^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?0o[0-7_]+|[-+]?0b[01_]+|[-+]?0x[0-9a-fA-F_]+)$"
)
NUMBER_STARTS = list("-+.0123456789")


class WriteResolver(yaml.resolver.Resolver):
    """What a plain scalar Spellbook writes may be read as: PyYAML's YAML 1.1 types, and YAML 1.2's
    numbers (``YAML12_NUMBER``). Only for writing: reading stays YAML 1.1 (a hand-written
    ``id: 123e4567`` is the string it always was)."""


WriteResolver.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_NUMBER, NUMBER_STARTS)
_RESOLVER = WriteResolver()  # what the dumper's resolver makes of a plain scalar


# Letters and digits (``\w`` is ``str.isalnum()`` or ``_``, character by character) and the
# punctuation above: one regex call instead of a Python test a character (tests/unit/test_note.py
# holds the two equal on every code point).
_PLAIN_CHARS = re.compile(r"[\w .,\-()/']*")


def _plain_key(key: str) -> bool:
    return key.isidentifier() and key.isascii() and _resolves_to_str(key)


def _plain_str(value: str) -> bool:
    """Written plain (unquoted) by the dumper: starts with a letter or digit, holds only those and
    a few punctuation marks, and does not read back as anything but a string (yes, null, 12)."""
    return (
        0 < len(value) <= 1_000
        and value[0].isalnum()
        and value[-1] != " "
        and _PLAIN_CHARS.fullmatch(value) is not None
        and _resolves_to_str(value)
    )


def read_plain(raw: str) -> dict[str, Any] | None:
    """What PyYAML's safe loader reads from frontmatter written by ``plain_field`` alone; None for
    anything else (a comment, a quote, a nested value, CRLF...), which PyYAML reads."""
    meta: dict[str, Any] = {}
    items: list[str] | None = None  # the list being read
    lines = raw.split("\n")
    if lines.pop():  # no final newline
        return None
    for line in lines:
        if line.startswith("  - "):
            if items is None or not _plain_str(line[4:]):
                return None
            items.append(line[4:])
            continue
        if items == []:  # a key with no value and no items (null)
            return None
        key, colon, value = line.partition(":")
        if not colon or not _plain_key(key) or key in meta:
            return None
        if not value:  # its list items follow
            items = meta[key] = []
            continue
        if not value.startswith(" ") or (scalar := _plain_scalar(value[1:])) is None:
            return None
        meta[key] = scalar
        items = None
    return meta if items != [] else None


def _plain_scalar(value: str) -> Any:
    """A one-line plain value as PyYAML's safe loader reads it, for the kinds ``plain_field``
    writes; None for any other (quoted, flow, 1_000, 0o7, yes, ~...)."""
    if _plain_str(value):
        return value
    tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == "tag:yaml.org,2002:int" and _DECIMAL.match(value):
        return int(value)
    if tag == "tag:yaml.org,2002:bool" and value in ("true", "false"):
        return value == "true"
    if tag == "tag:yaml.org,2002:timestamp" and TIMESTAMP.match(value):
        try:
            return _CONSTRUCTOR.construct_yaml_timestamp(yaml.ScalarNode(tag, value))
        except ValueError:  # 2024-13-01: PyYAML raises the same, and parse_note reports it
            return None
    return None


_DECIMAL = re.compile(r"^(?:0|-?[1-9][0-9]*)\Z")
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


# The first characters some implicit resolver looks at: a plain scalar that starts with none of
# them is a string without asking the resolver (what ``resolve`` itself does, in Python, per value).
_RESOLVED_FIRST = frozenset(WriteResolver.yaml_implicit_resolvers)


def _resolves_to_str(value: str) -> bool:
    if value and value[0] not in _RESOLVED_FIRST and None not in _RESOLVED_FIRST:
        return True
    return _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == "tag:yaml.org,2002:str"


TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))?$")


def valid_time(value: str) -> bool:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:  # e.g. month 13: written quoted, as a string, or YAML could not read it back
        return False
    return True
