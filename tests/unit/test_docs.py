"""The docs match the code: every MCP tool, CLI command, filter key and setting is documented."""

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


def test_every_mcp_tool_is_in_the_readme(tmp_path: Path) -> None:
    server = build_server(Hub(Settings(vault=tmp_path, embedder="hashing")))
    tools = anyio.run(server.list_tools)
    assert tools
    for tool in tools:
        assert f"`{tool.name}(" in README, f"tool {tool.name} is not documented in README.md"
        assert tool.description and len(tool.description) < 200  # short: sent on every tools/list


def test_every_cli_command_and_flag_is_in_the_readme() -> None:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        assert f"spellbook {name}" in README, f"command {name} is not documented"
        for action in command._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--verbose"):
                    assert flag in README, f"flag {flag} of {name} is not documented"


def test_every_filter_key_and_setting_is_documented() -> None:
    for key in Filter.model_fields:
        assert f"`{key}`" in README, f"filter key {key} is not documented"
    documented = set(re.findall(r"`SPELLBOOK_([A-Z_]+)`", README))
    for name in Settings.fields:
        if name in ("log_level", "debounce_seconds"):
            continue
        assert name.upper() in documented, f"setting SPELLBOOK_{name.upper()} is not documented"


def test_docs_links_resolve() -> None:
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).is_file(), target
