"""Privacy and scope each have one door, and the source keeps it so.

* A conflict's text leaves the owner scrubbed because one place builds the ``ConflictError`` a
  caller gets (``Access.conflict``, which the hub calls): the store and the services raise a
  ``FileChangedError``, whose message holds no file text. A module that builds a
  ``ConflictError`` itself would hand its text out past the door; this test fails on it.
* The MCP adapters (server/) scrub nothing themselves: resources, like tools, get what the
  engine answers, which Access scrubbed.
* The running call's scope is a context variable that only the access layer reads
  (spellbook/engine/access.py); every other module asks it (``Access.scope``, ``Access.where``)
  or is given the scope as an argument.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spellbook"
CONFLICT_DOOR = {"engine/access.py"}  # Access.conflict
SCOPE_READERS = {"engine/access.py", "scope.py"}


def conflicts_built(source: str) -> list[int]:
    """Lines where ``source`` builds or raises a ``ConflictError`` (a call, or the bare class raised)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        target = node.func if isinstance(node, ast.Call) else node.exc if isinstance(node, ast.Raise) else None
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
        if name == "ConflictError":
            lines.append(node.lineno)
    return lines


def scope_reads(source: str) -> list[int]:
    """Lines where ``source`` takes the running call's scope from spellbook.scope's context variable."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "spellbook.scope":
            lines += [node.lineno for alias in node.names if alias.name in ("current", "_CURRENT")]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("current", "_CURRENT")
            and isinstance(node.value, ast.Name)
            and node.value.id == "scope"
        ):
            lines.append(node.lineno)
    return lines


def _sources() -> list[tuple[str, str]]:
    return [(f.relative_to(PACKAGE).as_posix(), f.read_text(encoding="utf-8")) for f in sorted(PACKAGE.rglob("*.py"))]


def test_only_the_door_builds_a_conflict_error() -> None:
    built = [
        f"{name}:{line}" for name, source in _sources() if name not in CONFLICT_DOOR for line in conflicts_built(source)
    ]
    assert not built, (
        "raise FileChangedError (the hub turns it into a scrubbed ConflictError at the door), "
        "never a ConflictError: " + ", ".join(built)
    )


def test_the_server_adapters_scrub_nothing_themselves() -> None:
    scrubbing = [
        f"{name}:{node.lineno}"
        for name, source in _sources()
        if name.startswith("server/")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spellbook.vault.privacy")
    ]
    assert not scrubbing, "ask the engine (Access scrubs every answer): " + ", ".join(scrubbing)


def test_only_the_access_layer_reads_the_scope() -> None:
    reading = [
        f"{name}:{line}" for name, source in _sources() if name not in SCOPE_READERS for line in scope_reads(source)
    ]
    assert not reading, "ask Access.scope() / Access.where(), or take the scope as an argument: " + ", ".join(reading)


def test_the_checks_catch_what_they_look_for() -> None:
    assert conflicts_built("raise ConflictError(path, v, w, text)\n") == [1]
    assert conflicts_built("x = 1\nerr = errors.ConflictError(p, v, w, scrub(text))\n") == [2]
    assert conflicts_built("raise ConflictError\n") == [1]
    assert not conflicts_built("raise FileChangedError(path, v, w, text)\nexcept_ = ConflictError\n")
    assert scope_reads("from spellbook.scope import Scope, current as now\n") == [1]
    assert scope_reads("from spellbook import scope\nx = scope.current()\n") == [2]
    assert not scope_reads("from spellbook.scope import Scope, scoped\n")
