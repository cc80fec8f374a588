"""The package tree is the architecture: imports point one way, and no module or class grows past
a size a reader can hold.

    cli -> sessions -> server -> engine -> index -> config -> embedders, git -> vault
        -> scope, startup -> errors, defaults

A module may import its own part of the package and any part below it, never one above. ``config``
sits above embedders because it checks the embedder's name against their one registry of names;
what lies below config is handed a ``Settings`` and imports it for type checking alone, which this
test does not count (``if TYPE_CHECKING:`` blocks never run). ``startup`` (the start-up and memory
tricks) is near the ground: the command line, the server, the engine and the index use its tricks,
and it imports only ``defaults`` (standard library only), which config reads too. The checker
reads every other ``import`` in ``spellbook/`` (top-level and inside functions) with ``ast``; the
last test plants back-edges to show that it catches them.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spellbook"

# Rank of each top-level part of the package: a module may import parts of a lower rank (or its own).
RANKS = {
    "__main__": 10,
    "cli": 9,
    "sessions": 8,
    "server": 7,
    "engine": 6,
    "index": 5,
    "config": 4,
    "embedders": 3, "git": 3,
    "vault": 2,
    "scope": 1, "startup": 1,
    "errors": 0, "defaults": 0, "__init__": 0,
}
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 450


def part_of(module: str) -> str:
    """``spellbook.index.catalog`` -> ``index``; ``spellbook`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(file: Path) -> str:
    rel = file.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> list[tuple[int, str, list[str]]]:
    """(line, module imported from, names imported) for each spellbook import that can run."""
    found: list[tuple[int, str, list[str]]] = []
    tree = ast.parse(source)
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] == "spellbook"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "spellbook":
                found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


def back_edges(module: str, source: str, is_package: bool = False) -> list[str]:
    own = part_of(module)
    if own not in RANKS:
        return [f"{module}: spellbook/{own} has no place in RANKS (tests/unit/test_architecture.py); give it one"]
    errors = []
    for line, target, _ in imports_of(source, module, is_package):
        other = part_of(target)
        if other == own:
            continue
        if other not in RANKS:
            errors.append(f"{module}:{line} imports {target}, which has no place in RANKS")
        elif RANKS[other] >= RANKS[own]:
            errors.append(f"{module}:{line} imports {target}: {own} (rank {RANKS[own]}) may not import {other} (rank {RANKS[other]})")
    return errors


def modules() -> list[tuple[str, Path]]:
    return sorted((module_name(f), f) for f in PACKAGE.rglob("*.py"))


def test_imports_point_down_the_layers() -> None:
    errors = []
    for module, file in modules():
        errors += back_edges(module, file.read_text(encoding="utf-8"), file.name == "__init__.py")
    assert not errors, "imports against the layering:\n" + "\n".join(errors)


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    names = {m for m, _ in modules()}
    for module, file in modules():
        edges = set()
        for _, source, imported in imports_of(file.read_text(encoding="utf-8"), module, file.name == "__init__.py"):
            # `from spellbook.cli import clients` depends on the module clients, not on the package
            for target in [f"{source}.{name}" for name in imported if f"{source}.{name}" in names] or [source]:
                while target and target not in names:  # `from spellbook.x import y` where y is a name
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.add(target)
        graph[module] = edges
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_modules_and_classes_stay_small() -> None:
    big = []
    for module, file in modules():
        source = file.read_text(encoding="utf-8")
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            big.append(f"{module}: {lines} lines (> {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno > MAX_CLASS_LINES:
                big.append(f"{module}.{node.name}: {node.end_lineno - node.lineno} lines (> {MAX_CLASS_LINES})")
    assert not big, "split these:\n" + "\n".join(big)


def test_a_planted_back_edge_is_caught() -> None:
    planted = "from spellbook.engine import Engine\n"
    assert back_edges("spellbook.vault.note", planted)
    assert back_edges("spellbook.index.catalog", "def f():\n    from spellbook.server.hub import Hub\n")
    assert back_edges("spellbook.vault.note", "from ..engine import Engine\n")
    assert back_edges("spellbook.vault.store", "import spellbook.index.catalog\n")
    assert not back_edges("spellbook.engine.search", "from spellbook.index.catalog import Catalog\n")
    assert not back_edges("spellbook.embedders.base", "if TYPE_CHECKING:\n    from spellbook.config import Settings\n")



TESTS = Path(__file__).resolve().parents[1]


def imports_reaching_into(source: str) -> list[str]:
    """The test modules (``test_*``, ``conftest``) an import in ``source`` names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [n for n in names if any(part.startswith("test_") or part == "conftest" for part in n.split(".") if part)]
    return found


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in tests/helpers/; a test module never imports another (or conftest)."""
    reaching = []
    for file in sorted(TESTS.rglob("*.py")):
        for name in imports_reaching_into(file.read_text(encoding="utf-8")):
            reaching.append(f"{file.relative_to(TESTS)} imports {name}")
    assert not reaching, "move what they share into tests/helpers/:\n" + "\n".join(reaching)
    assert imports_reaching_into("from .test_mcp_stdio import call\n")  # a planted one is caught
    assert imports_reaching_into("from tests.conftest import open_engine\n")
    assert not imports_reaching_into("from tests.helpers.stdio import call\n")
