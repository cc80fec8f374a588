"""The package tree is the architecture: imports point one way, and no module or class grows past
a size a reader can hold.

    cli -> sessions -> server -> engine -> index -> embedders, git -> vault -> scope, files, startup
      -> config -> errors, defaults, text, crashpoints, version

A module may import its own part of the package and any part below it, never one above. The
package's ``__init__`` is the public face: it re-exports from above, so nothing inside imports it.
``config`` is the ground floor: it imports nothing but the errors and ``defaults`` (the embedder
names it checks are its own list, which the embedders' registry must match), so anything may read a
setting or a name from it. ``startup`` (the start-up and memory tricks) is near the ground: the
command line, the server, the engine and the index use its tricks, and it imports only ``defaults``
(standard library only), which config reads too. Type-only imports (``if TYPE_CHECKING:`` blocks
never run) are not counted here (the cycle test below counts them). The checker reads every other
``import`` in ``spellbook/`` (top-level and inside functions) with ``ast``; the last test plants
back-edges to show that it catches them.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spellbook"

# Rank of each top-level part of the package: a module may import parts of a lower rank (or its own).
RANKS = {
    "__init__": 11,  # the public face re-exports from above: nothing in the package imports it
    "__main__": 10,
    "cli": 9,
    "sessions": 8,
    "server": 7,
    "engine": 6,
    "index": 5,
    "embedders": 4,
    "git": 4,
    "vault": 3,
    "scope": 2,
    "files": 2,
    "startup": 2,
    "config": 1,
    "errors": 0,
    "defaults": 0,
    "text": 0,
    "crashpoints": 0,
    "version": 0,
}
MAX_MODULE_LINES = 600  # a module as long as its concept needs; a class past 450 is usually two
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


def imports_of(
    source: str, module: str, is_package: bool, type_only_too: bool = False
) -> list[tuple[int, str, list[str]]]:
    """(line, module imported from, names imported) for each spellbook import that can run, and with
    ``type_only_too`` those under ``if TYPE_CHECKING:`` as well."""
    found: list[tuple[int, str, list[str]]] = []
    tree = ast.parse(source)
    type_only = (
        set()
        if type_only_too
        else {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
    )
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
            errors.append(
                f"{module}:{line} imports {target}: {own} (rank {RANKS[own]}) "
                f"may not import {other} (rank {RANKS[other]})"
            )
    return errors


def modules() -> list[tuple[str, Path]]:
    return sorted((module_name(f), f) for f in PACKAGE.rglob("*.py"))


def test_imports_point_down_the_layers() -> None:
    errors = []
    for module, file in modules():
        errors += back_edges(module, file.read_text(encoding="utf-8"), file.name == "__init__.py")
    assert not errors, "imports against the layering:\n" + "\n".join(errors)


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules it imports, type-only imports included; ``sources`` maps each module
    to its source and whether it is a package's ``__init__``."""
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        edges = set()
        for _, imported_from, imported in imports_of(source, module, is_package, type_only_too=True):
            # `from spellbook.cli import clients` depends on the module clients, not on the package
            for target in [f"{imported_from}.{name}" for name in imported if f"{imported_from}.{name}" in sources] or [
                imported_from
            ]:
                while target and target not in sources:  # `from spellbook.x import y` where y is a name
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.add(target)
        graph[module] = edges
    return graph


def cycles_in(graph: dict[str, set[str]]) -> list[str]:
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


# The one circle left, broken by the settings rework (config stops checking the embedder's name
# against the embedders' registry); the assertion below fails once it is gone, to empty this.
BEING_BROKEN: set[str] = set()  # a circle known and being broken, named as the test prints it


def test_no_import_cycles_type_only_imports_included() -> None:
    """No circle among the package's modules, counting ``if TYPE_CHECKING:`` imports too: a circle
    that only the type checker walks still means two modules that cannot be read apart."""
    sources = {m: (f.read_text(encoding="utf-8"), f.name == "__init__.py") for m, f in modules()}
    cycles = cycles_in(import_graph(sources))
    assert not set(cycles) - BEING_BROKEN, "import cycles:\n" + "\n".join(cycles)
    assert not BEING_BROKEN - set(cycles), (
        f"no longer a cycle, take it out of BEING_BROKEN: {BEING_BROKEN - set(cycles)}"
    )


def test_a_planted_type_only_cycle_is_caught() -> None:
    planted = {
        "spellbook.engine.search": ("from spellbook.engine.ranking import rank\n", False),
        "spellbook.engine.ranking": ("if TYPE_CHECKING:\n    from spellbook.engine.search import Search\n", False),
        "spellbook.engine.links": ("from spellbook.engine import ranking\n", False),
        "spellbook.engine": ("", True),
    }
    assert cycles_in(import_graph(planted)) == [
        "spellbook.engine.ranking -> spellbook.engine.search -> spellbook.engine.ranking"
    ]
    del planted["spellbook.engine.ranking"]
    assert not cycles_in(import_graph(planted))


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


# Who reads a SPELLBOOK_* variable itself: config, and the start-up tricks that run before it can
# be imported (the model's name and the cache folder, read before argv is parsed); a test hook.
READS_THE_ENVIRONMENT = {
    "spellbook.config",
    "spellbook.embedders.ahead",
    "spellbook.server.front",
    "spellbook.crashpoints",
}


def environment_reads(source: str) -> list[str]:
    """The SPELLBOOK_* variables ``source`` reads from the environment (``os.environ.get``,
    ``os.getenv``, ``environ[...]``), as ``line: NAME``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith(("environ.get", "getenv")):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            key = node.slice
        if isinstance(key, ast.Constant) and str(key.value).upper().startswith("SPELLBOOK_"):
            found.append(f"{node.lineno}: {key.value}")
    return found


def test_only_config_reads_the_settings_from_the_environment() -> None:
    readers = {
        f"{module}:{read}"
        for module, file in modules()
        if module not in READS_THE_ENVIRONMENT and not module.startswith("spellbook.startup")
        for read in environment_reads(file.read_text(encoding="utf-8"))
    }
    assert not readers, "read these through Settings (spellbook/config.py):\n" + "\n".join(sorted(readers))
    assert environment_reads(
        'import os\nx = os.environ.get("SPELLBOOK_RECALL", "")\ny = os.getenv("SPELLBOOK_VAULT")\n'
        'z = os.environ["SPELLBOOK_TOKEN"]\nw = dict(os.environ, SPELLBOOK_VAULT="v")\n'
    ) == ["2: SPELLBOOK_RECALL", "3: SPELLBOOK_VAULT", "4: SPELLBOOK_TOKEN"]


def test_a_planted_back_edge_is_caught() -> None:
    planted = "from spellbook.engine import Engine\n"
    assert back_edges("spellbook.vault.note", planted)
    assert back_edges("spellbook.index.catalog", "def f():\n    from spellbook.server.hub import Hub\n")
    assert back_edges("spellbook.vault.note", "from ..engine import Engine\n")
    assert back_edges("spellbook.vault.store", "import spellbook.index.catalog\n")
    assert not back_edges("spellbook.engine.search", "from spellbook.index.catalog import Catalog\n")
    assert not back_edges("spellbook.embedders.base", "if TYPE_CHECKING:\n    from spellbook.config import Settings\n")
    assert back_edges("spellbook.config", "def f():\n    from spellbook.embedders.registry import REGISTRY\n")


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
        found += [
            n for n in names if any(part.startswith("test_") or part == "conftest" for part in n.split(".") if part)
        ]
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


def test_the_public_face_names_engine_settings_and_the_errors_and_loads_nothing_first() -> None:
    """``from spellbook import Engine, Settings, SpellbookError``; a bare ``import spellbook`` (every
    command and agent hook starts with it) imports no module of the package but its version."""
    import subprocess
    import sys

    code = (
        "import sys; import spellbook; print(sorted(m for m in sys.modules if m.startswith('spellbook')))\n"
        "from spellbook import Engine, Settings, SpellbookError\n"
        "print(Engine.__module__, Settings.__module__, SpellbookError.__module__, spellbook.__all__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    ).stdout.splitlines()
    assert out[0] == "['spellbook', 'spellbook.version']"
    assert out[1] == (
        "spellbook.engine.engine spellbook.config spellbook.errors "
        "['Engine', 'Settings', 'SpellbookError', '__version__']"
    )
