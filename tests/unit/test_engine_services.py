"""The engine's shape: services that ask each other through public methods, in modules a reader
can hold in mind, and an ``Engine`` that exposes every method the hub forwards."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import spellbook.engine
from spellbook.engine import Engine
from spellbook.engine.operations import OPERATIONS

PACKAGE = Path(spellbook.engine.__file__).parent
MAX_LINES = 600


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_service_reaches_into_another_objects_private_names() -> None:
    """``self._x`` is a class's own business; ``self.search._x`` or ``other._x`` is not."""
    found = []
    for module in _modules():
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append(f"{module.name}:{node.lineno} .{node.attr}")
    assert found == []


def test_modules_stay_small() -> None:
    sizes = {m.name: len(m.read_text(encoding="utf-8").splitlines()) for m in _modules()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_engine_has_no_mixins_and_exposes_every_hub_method(tmp_path: Path) -> None:
    from spellbook.config import Settings
    from spellbook.embedders.hashing import HashingEmbedder

    assert Engine.__mro__ == (Engine, object)
    (tmp_path / "vault").mkdir()
    engine = Engine(
        Settings(vault=tmp_path / "vault", embedder="hashing", git_commit="false"), embedder=HashingEmbedder(64)
    )
    try:
        for name in OPERATIONS:
            assert inspect.ismethod(getattr(engine, name)), name
    finally:
        engine.close()
