"""The docs match the code: every MCP tool, CLI command, filter key and setting is documented, and
every link between the docs (and every benchmark file they name) resolves."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from spellbook.cli.main import _parser
from spellbook.config import Settings
from spellbook.index.filter_model import Filter
from spellbook.server.hub import Hub
from spellbook.server.tools import build_server

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ALL_DOCS = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
CLI = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
TOOLS = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


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


def test_every_filter_key_and_setting_is_documented() -> None:
    for key in Filter.model_fields:
        assert f"`{key}`" in TOOLS, f"filter key {key} is not documented in docs/tools.md"
    documented = set(re.findall(r"`SPELLBOOK_([A-Z_]+)`", ALL_DOCS))
    for name in Settings.fields:
        if name in ("log_level", "debounce_seconds"):
            continue
        assert name.upper() in documented, f"setting SPELLBOOK_{name.upper()} is not documented"


def _anchors(text: str) -> set[str]:
    """The heading anchors GitHub makes for a markdown page (duplicates get -1, -2...)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", text), re.M):
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
    text = "# Spellbook\n## Scopes: projects and people\n## The web view's sign-in\n```\n## not a heading\n```\n## Relevance and `min_score`\n## Fields\n## Fields\n"
    assert _anchors(text) == {"spellbook", "scopes-projects-and-people", "the-web-views-sign-in",
                              "relevance-and-min_score", "fields", "fields-1"}
