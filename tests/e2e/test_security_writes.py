"""Writes and files on a shared machine and against a hostile vault (docs/security.md, "Writes and
files"): git config that runs commands, export targets, file permissions, long file names.
Real files, real git, the real engine; the MCP stdio client where the issue is what an agent sees."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from tests.helpers.git import git, head


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
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
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

    from tests.helpers.stdio import call, server

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
    from spellbook.text import cut_utf8

    for title in LONG_TITLES:
        for limit in range(1, 60):
            cut = cut_utf8(title, limit)
            assert len(cut.encode("utf-8")) <= limit and title.startswith(cut)
            rest = title[len(cut) :]
            assert not rest or not rest.startswith(("\u200d", "\u0301", "\ufe0f")), (limit, cut)
            assert not cut.endswith("\u200d")


# --- permissions: the index is no more readable than the notes, a rewrite keeps a file's mode ----


def umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def mode(file: Path) -> int:
    return stat.S_IMODE(file.stat().st_mode)


def test_rewrites_keep_a_files_mode_and_new_notes_follow_the_folder(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    vault.chmod(0o755)
    for name, wanted in (("open.md", 0o644), ("private.md", 0o600), ("group.md", 0o640)):
        (vault / name).write_text(f"# {name}\n\nbody\n")
        (vault / name).chmod(wanted)
    engine = open_engine(vault)
    try:
        for name, wanted in (("open.md", 0o644), ("private.md", 0o600), ("group.md", 0o640)):
            note_id = engine.catalog.note_at(name).note_id
            engine.revise(note_id, text="Revised by an agent.")
            assert "Revised by an agent." in (vault / name).read_text()
            assert mode(vault / name) == wanted, (name, oct(mode(vault / name)))
        stored = engine.scribe("A new note.", title="New", category="fresh")
        assert mode(vault / stored["path"]) == 0o644 & ~umask()
        assert mode(vault / "fresh") == 0o755 & ~umask()
    finally:
        engine.close()

    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0o700)
    engine = open_engine(private)
    try:
        stored = engine.scribe("A secret note.", title="Secret", category="mine", topic="deep")
        assert mode(private / stored["path"]) == 0o600
        assert mode(private / "mine") == 0o700 and mode(private / "mine" / "deep") == 0o700
    finally:
        engine.close()


def test_the_index_folder_and_its_files_are_owner_only(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    vault.chmod(0o755)
    (vault / "note.md").write_text("# Note\n\nsecret text\n")
    (vault / "note.md").chmod(0o600)
    engine = open_engine(vault)
    try:
        engine.scribe("Another secret.", title="Another")
        index = vault / ".spellbook"
        assert mode(index) == 0o700
        assert mode(index / "catalog.sqlite3") == 0o600
        for side in ("catalog.sqlite3-wal", "catalog.sqlite3-shm"):
            assert (index / side).exists() and mode(index / side) == 0o600, side
        assert mode(index / "chroma") == 0o700
    finally:
        engine.close()
    # An index made by an older version, readable by all, is closed up when opened.
    index.chmod(0o755)
    (index / "catalog.sqlite3").chmod(0o644)
    (index / "chroma").chmod(0o755)
    engine = open_engine(vault)
    try:
        assert mode(index) == 0o700 and mode(index / "catalog.sqlite3") == 0o600 and mode(index / "chroma") == 0o700
    finally:
        engine.close()


# --- export writes only where the rule allows ------------------------------------------------


def attacks(vault: Path, tmp_path: Path) -> dict[str, Path]:
    """Files an agent's export must never replace; each made as the issue showed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("a person's file\n")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    (vault / ".obsidian").mkdir(exist_ok=True)
    (vault / ".obsidian" / "app.json").write_text("{}\n")
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.parent.mkdir()
    bashrc.write_text("# shell\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return {
        "symlink": link,
        "victim": victim,
        "obsidian": vault / ".obsidian" / "app.json",
        "catalog": vault / ".spellbook" / "catalog.sqlite3",
        "bashrc": bashrc,
        "fifo": fifo,
        "device": Path("/dev/null"),
    }


def test_export_never_writes_outside_its_folders(tmp_path: Path) -> None:
    from spellbook.errors import InvalidInputError

    vault = tmp_path / "vault"
    vault.mkdir()
    engine = open_engine(vault)
    try:
        engine.scribe("Deploys go through CI.", title="Deploy", category="ops")
        targets = attacks(vault, tmp_path)
        before = {
            name: (os.lstat(f).st_mode, f.read_bytes() if f.is_file() and name != "fifo" else None)
            for name, f in targets.items()
        }
        for name, file in targets.items():
            with pytest.raises(InvalidInputError):
                engine.export(path=str(file), overwrite=True)
        for name, file in targets.items():
            assert os.lstat(file).st_mode == before[name][0], name
            if before[name][1] is not None:
                assert file.read_bytes() == before[name][1], name
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
        # Relative names stay in the exports folder; hidden names, the ledger and '..' are refused.
        exports = vault / ".spellbook" / "exports"
        for bad in ("../catalog.sqlite3", ".hidden.json", "../exports.ledger", "sub/../../x.json"):
            with pytest.raises(InvalidInputError):
                engine.export(path=bad, overwrite=True)
        (exports / "linked").symlink_to(tmp_path)
        with pytest.raises(InvalidInputError, match="symbolic link"):
            engine.export(path="linked/x.json")
        assert not (tmp_path / "x.json").exists()
        # Its own earlier export may be replaced; a file changed since, or put there by someone else, not.
        first = engine.export(path="backup.json")
        assert stat.S_IMODE(os.stat(first["path"]).st_mode) == 0o600
        with pytest.raises(InvalidInputError, match="exists; pass overwrite=true"):
            engine.export(path="backup.json")
        assert engine.export(path="backup.json", overwrite=True, filter={"category": "ops"})["count"] == 1
        Path(first["path"]).write_text("edited by a person\n")
        with pytest.raises(InvalidInputError, match="did not export it"):
            engine.export(path="backup.json", overwrite=True)
        assert Path(first["path"]).read_text() == "edited by a person\n"
        (exports / "planted.json").write_text("not ours\n")
        with pytest.raises(InvalidInputError, match="did not export it"):
            engine.export(path=str(exports / "planted.json"), overwrite=True)
    finally:
        engine.close()


def test_export_dirs_a_person_names(tmp_path: Path) -> None:
    from spellbook.errors import InvalidInputError

    vault, backups = tmp_path / "vault", tmp_path / "backups"
    vault.mkdir()
    backups.mkdir()
    engine = open_engine(vault, export_dirs=[backups, vault / "inside"])
    try:
        out = engine.export(path=str(backups / "all.json"))
        assert Path(out["path"]) == backups / "all.json" and (backups / "all.json").is_file()
        assert engine.export(path=str(backups / "all.json"), overwrite=True)["path"] == out["path"]
        (backups / "sub").symlink_to(tmp_path)
        with pytest.raises(InvalidInputError, match="symbolic link"):
            engine.export(path=str(backups / "sub" / "x.json"))
        with pytest.raises(InvalidInputError, match="only be written in"):
            engine.export(path=str(backups / ".." / "escape.json"))
        (vault / "inside").mkdir()
        with pytest.raises(InvalidInputError, match="inside the vault"):
            engine.export(path=str(vault / "inside" / "x.md"))
        assert not (tmp_path / "escape.json").exists() and not (tmp_path / "x.json").exists()
    finally:
        engine.close()


def test_import_refuses_devices_and_fifos(tmp_path: Path) -> None:
    from spellbook.errors import InvalidInputError

    vault = tmp_path / "vault"
    vault.mkdir()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    engine = open_engine(vault)
    try:
        for source in (fifo, Path("/dev/zero"), Path("/dev/null")):
            with pytest.raises(InvalidInputError, match="not a regular file"):
                engine.import_memories(str(source))
    finally:
        engine.close()


def test_an_agent_over_mcp_cannot_export_over_a_file(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from tests.helpers.stdio import call, error, server

    vault = tmp_path / "vault"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")

    async def main() -> None:
        async with Client(server(vault)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "exports folder" in tools["export"].description
            text = await error(client, "export", path=str(victim), overwrite=True)
            assert "only be written in" in text
            done = await call(client, "export", path="mine.json")
            assert Path(done["path"]).parent == vault / ".spellbook" / "exports"

    anyio.run(main)
    assert victim.read_text() == "keep me\n"


@pytest.mark.slow
def test_cli_export_out_is_the_persons_choice_but_never_a_link_device_or_clobber(tmp_path: Path) -> None:
    from tests.helpers.processes import run

    vault = tmp_path / "vault"
    run("init", str(vault))
    common = ["--vault", str(vault), "--embedder", "hashing"]
    out = tmp_path / "anywhere" / "all.json"
    out.parent.mkdir()
    run("export", *common, "--out", str(out))
    assert json.loads(out.read_text())["count"] >= 3 and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "pass --force" in run("export", *common, "--out", str(out), check=False).stderr
    out.chmod(0o640)
    run("export", *common, "--out", str(out), "--force")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # a replaced file keeps its mode
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused = ((link, "symbolic link"), (Path("/dev/null"), "not a regular file"), (fifo, "not a regular file"))
    for target, why in refused:
        result = run("export", *common, "--out", str(target), "--force", check=False)
        assert result.returncode == 1 and why in result.stderr, result.stderr
    assert victim.read_text() == "keep me\n" and link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [p for p in (vault / ".spellbook" / "exports").iterdir() if p.name.startswith("cli-")]


def test_the_http_token_file_is_private_and_replaced_when_it_is_not(tmp_path: Path) -> None:
    from spellbook.errors import SpellbookError
    from spellbook.server.http import ensure_token, read_token

    index = tmp_path / "index"
    token = ensure_token(index)
    assert len(token) >= 32 and ensure_token(index) == token == read_token(index)
    assert mode(index) == 0o700 and mode(index / "http.token") == 0o600
    (index / "http.token").chmod(0o644)  # others could have read it: no longer a secret
    assert read_token(index) is None
    fresh = ensure_token(index)
    assert fresh != token and mode(index / "http.token") == 0o600
    (index / "http.token").unlink()
    (index / "http.token").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SpellbookError, match="not a regular file"):
        ensure_token(index)
    assert not (tmp_path / "elsewhere").exists()


def test_install_http_makes_the_client_config_holding_the_token_private(tmp_path: Path) -> None:
    """``spellbook install --http`` wrote the token into an existing 0644 ~/.claude.json."""
    from tests.helpers.processes import SPELLBOOK, child_env

    home = tmp_path / "home"
    home.mkdir()
    config = home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}))
    config.chmod(0o644)
    env = child_env(HOME=str(home), CLAUDE_CONFIG_DIR="")

    def install(token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SPELLBOOK, "install", "claude-code", "--http", "http://127.0.0.1:8765/mcp", "--token", token],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )

    done = install("first-secret")
    assert mode(config) == 0o600
    assert f"{config} holds the token now: made it readable by you only (644 -> 600)" in done.stderr
    saved = json.loads(config.read_text())
    assert saved["numStartups"] == 3 and saved["mcpServers"]["spellbook"]["headers"] == {
        "Authorization": "Bearer first-secret"
    }
    # Already configured, but the file was opened up since: closed again.
    config.chmod(0o644)
    assert "(644 -> 600)" in install("first-secret").stderr and mode(config) == 0o600
    # A new token: the backup of the file holding the old one is private too.
    config.chmod(0o640)
    install("second-secret")
    backups = list(home.glob(".claude.json*.bak"))
    assert mode(config) == 0o600 and backups and all(mode(b) == 0o600 for b in backups)


def test_no_note_moves_through_a_symlinked_trash_or_folder_on_its_way(tmp_path: Path) -> None:
    """A .trash linked to a folder outside the vault: erase moved the note out of the vault, and a
    refused merge had already moved one of its notes there and made folders."""
    from spellbook.errors import VaultPathError

    vault, outside = tmp_path / "vault", tmp_path / "outside"
    vault.mkdir()
    outside.mkdir()
    engine = open_engine(vault)
    try:
        ids = [
            engine.scribe(f"Fact {n} about deploys.", title=f"Deploy {n}", category="ops", topic="ci")["id"]
            for n in range(3)
        ]
        notes = sorted(p.relative_to(vault) for p in vault.rglob("*.md"))
        (vault / ".trash").symlink_to(outside, target_is_directory=True)
        for call in (
            lambda: engine.erase(ids[0]),
            lambda: engine.merge(ids),
            lambda: engine.erase_topic("ci", category="ops", confirm=True),
        ):
            with pytest.raises(VaultPathError, match=r"\.trash in the vault is a symbolic link.*nothing was moved"):
                call()
            assert sorted(p.relative_to(vault) for p in vault.rglob("*.md")) == notes and not list(outside.iterdir())
        # A real .trash, but a folder on the way is a link (here to another folder of the vault).
        (vault / ".trash").unlink()
        (vault / ".trash").mkdir()
        (vault / ".trash" / "ops").symlink_to(vault / "ops", target_is_directory=True)
        with pytest.raises(VaultPathError, match=r"\.trash/ops in the vault is a symbolic link"):
            engine.erase(ids[1])
        assert sorted(p.relative_to(vault) for p in vault.rglob("*.md")) == notes
        (vault / ".trash" / "ops").unlink()
        assert engine.erase(ids[1])["trash_path"] == ".trash/ops/ci/Deploy 1.md"  # a real folder: as before
    finally:
        engine.close()
