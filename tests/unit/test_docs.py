"""The docs match the code: every MCP tool, CLI command, filter key and setting is documented, and
every link between the docs (and every benchmark file they name) resolves."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from spellbook.cli.main import _parser
from spellbook.config import REMOVED, Settings
from spellbook.index.filter_model import Filter
from spellbook.server.hub import Hub
from spellbook.server.tools import build_server

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ALL_DOCS = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
CLI = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
TOOLS = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def test_every_mcp_tool_is_in_the_readme_and_the_tools_page(tmp_path: Path) -> None:
    server = build_server(Hub(Settings(vault=tmp_path, embedder="hashing")))
    tools = anyio.run(server.list_tools)
    assert tools
    for tool in tools:
        assert f"`{tool.name}(" in README, f"tool {tool.name} is not listed in README.md"
        assert f"`{tool.name}(" in TOOLS, f"tool {tool.name} is not documented in docs/tools.md"
        assert tool.description and len(tool.description) < 200  # short: sent on every tools/list


def test_every_cli_command_and_flag_is_in_the_command_reference() -> None:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        assert f"spellbook {name}" in CLI, f"command {name} is not in docs/cli.md"
        for action in command._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--verbose"):
                    assert flag in CLI, f"flag {flag} of {name} is not in docs/cli.md"
                    assert flag in ALL_DOCS, f"flag {flag} of {name} is not documented"


def test_every_filter_key_is_documented() -> None:
    for key in Filter.model_fields:
        assert f"`{key}`" in TOOLS, f"filter key {key} is not documented in docs/tools.md"


def _table(section: str) -> list[list[str]]:
    """The cells of each row of the first table in ``section`` (a table row's ``|`` inside backticks is kept)."""
    rows = [re.split(r"(?<!\\)\|", line.strip())[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row] for row in rows[1:]]


def test_the_configuration_page_holds_every_setting_at_most_20_and_their_defaults() -> None:
    """docs/configuration.md: one row per setting a person sets (an endpoint's URL, model and key
    share a row), with its flag and default as Settings has them; the client's session id below it;
    every variable no longer read in the table of fixed values."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    settings_part, fixed_part = page.split("## Settings", 1)[1].split("## Fixed values", 1)
    rows = _table(settings_part)
    assert len(rows) <= 20, f"{len(rows)} settings a person sets: keep it at 20 at most"
    flags = {
        flag
        for command in _parser()._subparsers._group_actions[0].choices.values()  # type: ignore[union-attr]
        for action in command._actions
        for flag in action.option_strings
    }
    variables = {}
    for name, spec in Settings.fields.items():
        for key in spec.env or (f"SPELLBOOK_{name.upper()}",):
            variables[key] = spec
    for variable_cell, flag_cell, default_cell, _ in rows:
        names = re.findall(r"`(SPELLBOOK_[A-Z_]+)`", variable_cell)
        assert names, variable_cell
        for flag in re.findall(r"--[a-z-]+", flag_cell):
            assert flag in flags, f"{flag} ({variable_cell}) is no flag of the CLI"
        for key in names:
            spec = variables.get(key)
            assert spec is not None, f"{key} is in docs/configuration.md but Settings does not read it"
            default = spec.initial()
            if default is None:
                assert "unset" in default_cell, f"{key}: the default is unset, the page says {default_cell}"
            elif isinstance(default, bool | str | int | float | list):
                shown = str(default).lower() if isinstance(default, bool) else default
                assert f"`{shown}`" in default_cell, f"{key}: the default is {shown!r}, the page says {default_cell}"
    named = set(re.findall(r"`(SPELLBOOK_[A-Z_]+)`", settings_part))  # in the rows, and the client's below them
    assert named == {k for k in variables if k.startswith("SPELLBOOK_")}, "the page and Settings differ"
    fixed = {name for row in _table(fixed_part) for name in re.findall(r"`(SPELLBOOK_[A-Z_]+)`", row[0])}
    assert fixed == {f"SPELLBOOK_{name.upper()}" for name in REMOVED}


def test_no_page_names_a_variable_no_longer_read() -> None:
    gone = {f"SPELLBOOK_{name.upper()}" for name in REMOVED}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if page.name == "configuration.md":
            continue
        named = set(re.findall(r"SPELLBOOK_[A-Z_]+", page.read_text(encoding="utf-8"))) & gone
        assert not named, f"{page.name} names {sorted(named)}, no longer read (docs/configuration.md: fixed values)"


def _anchors(text: str) -> set[str]:
    """The heading anchors GitHub makes for a markdown page (duplicates get -1, -2...)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_links_between_the_docs_resolve() -> None:
    """Every relative link of the README, docs/ and bench/README.md names a file that exists and,
    with a #fragment, a heading of that file; every bench script or result file they name exists."""
    broken = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif fragment and file.suffix == ".md" and fragment not in _anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
        for named in re.findall(r"\bbench/[\w./-]+\.(?:py|txt)\b", page.read_text(encoding="utf-8")):
            if not (ROOT / named).is_file():
                broken.append(f"{page.relative_to(ROOT)}: {named}")
    assert not broken, broken


def test_the_anchor_rule_matches_github() -> None:
    text = (
        "# Spellbook\n## Scopes: projects and people\n## The web view's sign-in\n```\n## not a heading\n```\n"
        "## Relevance and `min_score`\n## Fields\n## Fields\n"
    )
    assert _anchors(text) == {
        "spellbook",
        "scopes-projects-and-people",
        "the-web-views-sign-in",
        "relevance-and-min_score",
        "fields",
        "fields-1",
    }


def test_every_benchmark_is_in_the_bench_readme_with_its_result_file() -> None:
    """bench/README.md lists each script in bench/ (a benchmark nobody can find is an experiment
    left behind) and each result file it names exists (checked with the links above)."""
    listed = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    missing = [s.name for s in sorted((ROOT / "bench").glob("*.py")) if f"`{s.name}`" not in listed]
    assert not missing, f"bench/README.md does not list {missing}"
    results = [f.name for f in sorted((ROOT / "bench" / "results").glob("*.txt")) if f"`{f.name}`" not in listed]
    assert not results, f"result files no benchmark in bench/README.md writes: {results}"
