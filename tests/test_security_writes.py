"""Writes and files on a shared machine and against a hostile vault (docs/security.md, "Writes and
files"): git config that runs commands, export targets, file permissions, long file names.
Real files, real git, the real engine; the MCP stdio client where the issue is what an agent sees."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine

from .test_gitlayer import git, head


def open_engine(vault: Path, **settings) -> Engine:
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False, **settings), embedder=HashingEmbedder())
    engine.start()
    return engine


# --- git config and hooks in the vault never run ------------------------------------------------


def hostile_repo(root: Path, marker: Path) -> None:
    """A vault whose repository runs ``marker``-writing commands from every place git offers."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".spellbook/\n.trash/\n")
    (root / "seed.md").write_text("# Seed\n\nbase\n")
    (root / ".gitattributes").write_text("*.md filter=evil diff=evil\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    script = root.parent / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    script.chmod(0o755)
    for key, value in (
        ("core.fsmonitor", str(script)),
        ("filter.evil.clean", str(script)),
        ("filter.evil.smudge", str(script)),
        ("diff.evil.textconv", str(script)),
        ("diff.external", str(script)),
        ("core.sshCommand", str(script)),
    ):
        git(root, "config", key, value)
    hooks = root / ".git" / "hooks"
    for hook in ("pre-commit", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)


def test_git_config_and_hooks_of_the_vault_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    vault = tmp_path / "vault"
    hostile_repo(vault, marker)
    assert not marker.exists()
    engine = open_engine(vault, git_commit="true")
    try:
        stored = engine.scribe("Deploys go through CI.", title="Deploy pipeline", category="ops")
        engine.revise(stored["id"], text="Deploys go through ArgoCD.")
        engine.git.flush()
        assert head(vault).startswith('spellbook: revise "Deploy pipeline"')
        engine.history(stored["id"])
        engine.erase(stored["id"])
        engine.git.flush()
        assert head(vault).startswith('spellbook: erase "Deploy pipeline"')
    finally:
        engine.close()
    assert not marker.exists(), marker.read_text()
    # The attack is real: plain git in the same vault runs the command.
    subprocess.run(["git", "status"], cwd=vault, capture_output=True, check=True)
    assert marker.exists()


# --- long titles: file names are cut by UTF-8 bytes --------------------------------------------

LONG_TITLES = [
    "가나다라마바사아자차카타파하" * 6,  # 84 Korean syllables, 3 bytes each
    "日本語のとても長いタイトルです" * 6,  # Japanese, 3 bytes each
    "🧙‍♂️📚✨" * 20,  # emoji with a zero-width joiner and variation selectors, 4 bytes each
    "é" * 40 + "e\u0301" * 40,  # precomposed and combining accents
]


def test_long_titles_in_any_script_are_stored_and_revised_over_mcp(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from .test_mcp_stdio import call, server

    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as client:
            for title in LONG_TITLES:
                first = await call(client, "scribe", text="A note with a long title.", title=title, category="long")
                second = await call(client, "scribe", text="Another, same title.", title=title, category="long")
                assert first["path"] != second["path"]
                await call(client, "revise", id=first["id"], text="Revised text.")
                got = await call(client, "get_memories", ids=[first["id"], second["id"]])
                assert [m["title"] for m in got["memories"]] == [title, title]
                assert got["memories"][0]["text"].strip().endswith("Revised text.")
                for stored in (first, second):
                    name = Path(stored["path"]).name
                    assert len(name.encode("utf-8")) <= 230
                    assert "\ufffd" not in name
                    assert not name.startswith(("\u200d", "\u0301")) and not name[:-3].endswith(("\u200d",))

    anyio.run(main)
    names = [p.name for p in (vault / "long").iterdir()]
    assert len(names) == 2 * len(LONG_TITLES) and not [n for n in names if n.endswith(".tmp")]


def test_cut_by_bytes_never_splits_a_character() -> None:
    from spellbook.vault.paths import cut_utf8

    for title in LONG_TITLES:
        for limit in range(1, 60):
            cut = cut_utf8(title, limit)
            assert len(cut.encode("utf-8")) <= limit and title.startswith(cut)
            rest = title[len(cut):]
            assert not rest or not rest.startswith(("\u200d", "\u0301", "\ufe0f")), (limit, cut)
            assert not cut.endswith("\u200d")
