"""Spellbook's ``[mcp_servers.<name>]`` table in Codex CLI's ``config.toml``.

Codex keeps its MCP servers in TOML: user scope ``$CODEX_HOME/config.toml`` (default
``~/.codex/config.toml``), project scope ``<project>/.codex/config.toml`` (read only once the
person trusts the project in Codex). Python reads TOML (tomllib) but has no writer that keeps a
file as it is, so the edit is textual: the table ``[mcp_servers.<name>]`` and its sub-tables are
cut out line by line and the new table is appended; every other line stays byte for byte. The
result is parsed again before it is written, and must hold exactly the wanted entry, so a layout
this cannot edit safely (the entry written inline, or as dotted keys elsewhere) is refused with
nothing written. Backups and the atomic write are clients.py's.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spellbook.errors import InvalidInputError

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


class CodexConfigError(Exception):
    """Raised as clients.ClientConfigError by the caller (kept here to avoid an import cycle)."""


def codex_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Claude Code's entry shape -> Codex's: stdio keeps command/args/env; HTTP is ``url`` plus
    ``http_headers`` (Codex speaks streamable HTTP, not the legacy SSE transport)."""
    if entry.get("type") == "sse":
        raise InvalidInputError("Codex cannot use the legacy SSE transport; give the server's /mcp URL instead.")
    if "url" in entry:
        out: dict[str, Any] = {"url": entry["url"]}
        if entry.get("headers"):
            out["http_headers"] = dict(entry["headers"])
        return out
    return {k: entry[k] for k in ("command", "args", "env") if k in entry}


def read(file: Path) -> tuple[str, dict[str, Any], bool]:
    """(text, parsed, existed). Missing: ``("", {}, False)``."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}, False
    except (OSError, UnicodeDecodeError) as exc:
        raise CodexConfigError(f"Cannot read {file} ({exc}); fix the file or its permissions and try again.")
    try:
        return text, tomllib.loads(text), True
    except tomllib.TOMLDecodeError as exc:
        raise CodexConfigError(
            f"{file} is not valid TOML ({exc}); nothing was written. Fix it by hand (or restore "
            "a .bak copy next to it) and run the command again."
        )


def servers(config: Mapping[str, Any], file: Path) -> dict[str, Any]:
    found = config.get("mcp_servers", {})
    if not isinstance(found, dict):
        raise CodexConfigError(f"mcp_servers in {file} is not a table; nothing was written. Fix it by hand.")
    return found


def with_entry(text: str, name: str, entry: Mapping[str, Any] | None, file: Path) -> str:
    """``text`` with table ``mcp_servers.<name>`` replaced by ``entry`` (removed when None)."""
    key = name if _BARE.match(name) else json.dumps(name)
    kept = _without_table(text, key)
    if entry is not None:
        kept = kept.rstrip("\n") + ("\n\n" if kept.strip() else "") + render_table(f"mcp_servers.{key}", entry)
    try:  # what we wrote must read back as exactly what was asked
        got = servers(tomllib.loads(kept), file).get(name)
    except tomllib.TOMLDecodeError:
        got = ...
    if got != (None if entry is None else json.loads(json.dumps(entry))):
        raise CodexConfigError(
            f"{file} defines mcp_servers.{key} in a form this command cannot edit safely (inline, or as dotted "
            f"keys); nothing was written. Remove that entry by hand, or edit it yourself."
        )
    return kept


def _without_table(text: str, key: str) -> str:
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skipping = False
    own = {f"mcp_servers.{key}", f'"mcp_servers".{key}'}
    for line in lines:
        match = _HEADER.match(line)
        if match:
            header = re.sub(r"\s*\.\s*", ".", match.group(1))
            skipping = header in own or any(header.startswith(o + ".") for o in own)
        if not skipping:
            out.append(line)
    return "".join(out)


def render_table(header: str, entry: Mapping[str, Any]) -> str:
    """``[header]`` with scalar and list keys, then one ``[header.key]`` sub-table per mapping value."""
    plain = [f"{_key(k)} = {_value(v)}" for k, v in entry.items() if not isinstance(v, Mapping)]
    out = f"[{header}]\n" + "".join(line + "\n" for line in plain)
    for k, v in entry.items():
        if isinstance(v, Mapping):
            out += f"\n[{header}.{_key(k)}]\n" + "".join(f"{_key(a)} = {_value(b)}\n" for a, b in v.items())
    return out


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise InvalidInputError(f"Cannot write {value!r} into Codex's config.toml; use strings, numbers and lists.")
