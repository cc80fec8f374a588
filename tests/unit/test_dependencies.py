"""pyproject.toml declares every package the code imports, and nothing it does not import.

The package's own imports (top-level and inside functions) must come from [project.dependencies] or,
for an optional embedder, an extra; the tests' from the dependencies or the `test` extra. An import
that works only because another package happens to pull it in breaks the day that one drops it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement ("PyYAML>=6" -> "pyyaml")."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def imported_distributions(folder: Path) -> dict[str, set[str]]:
    """Distribution -> the files under ``folder`` importing it (the standard library and our own code aside)."""
    owners = packages_distributions()
    out: dict[str, set[str]] = {}
    for file in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("spellbook", "tests", "__future__"):
                    continue
                assert top in owners, f"{file.relative_to(ROOT)} imports {top}, which no installed package provides"
                for dist in owners[top]:
                    out.setdefault(_name(dist), set()).add(str(file.relative_to(ROOT)))
    return out


# Declared because a dependency's feature we use loads it, though our code never imports it: the
# distribution, and the file whose text shows the use.
LOADED_BY_ANOTHER = {"python-multipart": ("spellbook/server/web/app.py", ".form(")}  # starlette's form parser


def test_every_package_spellbook_imports_is_declared_and_every_dependency_is_used() -> None:
    core = {_name(r) for r in PROJECT["dependencies"]}
    extras = {_name(r) for name, reqs in PROJECT["optional-dependencies"].items() if name != "test" for r in reqs}
    used = imported_distributions(ROOT / "spellbook")
    missing = {dist: sorted(files) for dist, files in used.items() if dist not in core | extras}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    for dist, (file, use) in LOADED_BY_ANOTHER.items():
        if use in (ROOT / file).read_text(encoding="utf-8"):
            used.setdefault(dist, {file})
    assert not core - set(used), f"declared but never imported by spellbook/: {sorted(core - set(used))}"


def test_every_package_the_tests_import_is_declared() -> None:
    declared = {_name(r) for r in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]}
    used = imported_distributions(ROOT / "tests")
    missing = {dist: sorted(files) for dist, files in used.items() if dist not in declared}
    assert not missing, f"imported by tests but not in the test extra: {missing}"
