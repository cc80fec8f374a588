"""Client setup: real config files in tmp_path, every client, every Claude Desktop OS layout.

Everything is passed explicitly (platform, home, env, project), so nothing here reads or writes
the real home folder, and nothing starts a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spellbook.cli import clients
from spellbook.cli.clients import JSON_CLIENTS as CLIENTS
from spellbook.cli.clients import InstallResult, config_path, install, server_entry, uninstall
from spellbook.errors import InvalidInputError, SpellbookError

CMD = "/opt/spellbook/.venv/bin/spellbook"


@pytest.fixture
def where(tmp_path: Path) -> dict:
    """A fake machine: home and project folders under tmp_path, an empty environment, Linux."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return {"platform": "linux", "home": home, "env": {}, "project": project}


def stdio_entry(vault: str = "/notes") -> dict:
    return server_entry(command=CMD, vault=Path(vault), http_url=None, token=None)


def write_json(file: Path, data: object) -> str:
    file.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    file.write_text(text, encoding="utf-8")
    return text


def backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.bak"))


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("darwin", {}, "home/Library/Application Support/Claude/claude_desktop_config.json"),
        (
            "darwin",
            {"XDG_CONFIG_HOME": "{tmp}/xdg"},
            "home/Library/Application Support/Claude/claude_desktop_config.json",
        ),
        ("win32", {"APPDATA": "{tmp}/Roam"}, "Roam/Claude/claude_desktop_config.json"),
        ("win32", {}, "home/AppData/Roaming/Claude/claude_desktop_config.json"),
        ("linux", {}, "home/.config/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": "{tmp}/xdg"}, "xdg/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": "relative/xdg"}, "home/.config/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": ""}, "home/.config/Claude/claude_desktop_config.json"),
    ],
)
def test_claude_desktop_path_per_os(tmp_path: Path, platform: str, env: dict, expected: str) -> None:
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    got = config_path("claude-desktop", platform=platform, home=tmp_path / "home", env=env, project=tmp_path)
    assert got == tmp_path / expected


@pytest.mark.parametrize(
    ("client", "scope", "expected"),
    [
        ("claude-code", "user", "home/.claude.json"),
        ("claude-code", "project", "project/.mcp.json"),
        ("cursor", "user", "home/.cursor/mcp.json"),
        ("cursor", "project", "project/.cursor/mcp.json"),
    ],
)
def test_code_and_cursor_paths(tmp_path: Path, where: dict, client: str, scope: str, expected: str) -> None:
    assert config_path(client, scope, **where) == tmp_path / expected


def test_claude_code_honours_claude_config_dir(tmp_path: Path, where: dict) -> None:
    where["env"] = {"CLAUDE_CONFIG_DIR": str(tmp_path / "alt")}
    assert config_path("claude-code", **where) == tmp_path / "alt" / ".claude.json"


def test_defaults_are_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_path("claude-code", "project", home=tmp_path) == tmp_path / ".mcp.json"


@pytest.mark.parametrize(
    ("client", "scope", "needle"),
    [
        ("vscode", "user", "claude-code, claude-desktop, cursor"),
        ("cursor", "global", "user, project"),
        ("claude-desktop", "project", "scope 'user'"),
    ],
)
def test_unknown_client_or_scope_names_the_choices(where: dict, client: str, scope: str, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle) as info:
        config_path(client, scope, **where)
    assert isinstance(info.value, SpellbookError)


# ---------------------------------------------------------------- entries


def test_server_entry_stdio() -> None:
    assert server_entry(command=CMD, vault=Path("/notes"), http_url=None, token=None) == {
        "command": CMD,
        "args": ["serve", "--vault", str(Path("/notes").absolute())],
    }
    assert server_entry(command=CMD, vault=None, http_url=None, token=None) == {"command": CMD, "args": ["serve"]}


def test_server_entry_makes_the_vault_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    entry = server_entry(command=CMD, vault=Path("notes"), http_url=None, token=None)
    assert entry["args"] == ["serve", "--vault", str(tmp_path / "notes")]


def test_server_entry_legacy_sse() -> None:
    url = "http://127.0.0.1:8765/sse"
    assert server_entry(command=CMD, vault=None, http_url=url, token=None) == {"type": "sse", "url": url}
    assert server_entry(command=CMD, vault=None, http_url=url + "/", token=None)["type"] == "sse"
    assert server_entry(command=CMD, vault=None, http_url="http://h/sse-proxy/mcp", token=None)["type"] == "http"


def test_server_entry_http() -> None:
    url = "http://127.0.0.1:8765/mcp"
    assert server_entry(command=CMD, vault=None, http_url=url, token=None) == {"type": "http", "url": url}
    assert server_entry(command=CMD, vault=None, http_url=url, token="s3cret") == {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer s3cret"},
    }


def test_server_entry_refuses_nonsense() -> None:
    with pytest.raises(InvalidInputError, match="full URL"):
        server_entry(command=CMD, vault=None, http_url="127.0.0.1:8765", token=None)
    with pytest.raises(InvalidInputError, match="only used with --http"):
        server_entry(command=CMD, vault=None, http_url=None, token="s3cret")


# ---------------------------------------------------------------- install / uninstall, every client


ALL_LAYOUTS = [(c, "user") for c in CLIENTS] + [("claude-code", "project"), ("cursor", "project")]


@pytest.mark.parametrize(("client", "scope"), ALL_LAYOUTS)
def test_install_into_missing_file_creates_folders(where: dict, client: str, scope: str) -> None:
    file = config_path(client, scope, **where)
    assert not file.parent.exists() or not file.exists()
    result = install(client, scope=scope, entry=stdio_entry(), **where)
    assert result == InstallResult(path=file, changed=True, backup=None)
    text = file.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text.startswith('{\n  "mcpServers": {\n    "spellbook": {\n')
    assert json.loads(text) == {"mcpServers": {"spellbook": stdio_entry()}}
    assert backups(file.parent) == []
    assert [p.name for p in file.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("client", CLIENTS)
def test_install_keeps_other_servers_and_keys_in_order(where: dict, client: str) -> None:
    file = config_path(client, **where)
    original = {
        "numStartups": 42,
        "mcpServers": {
            "github": {"command": "npx", "args": ["-y", "@github/mcp"], "env": {"TOKEN": "x"}},
            "spellbook": {"command": "/old/spellbook", "args": ["serve"]},
            "zeta": {"type": "http", "url": "https://example.com/mcp"},
        },
        "projects": {"/src/app": {"allowedTools": [], "mcpServers": {}}},
        "theme": "dark ☾",
    }
    before = write_json(file, original)

    result = install(client, entry=stdio_entry(), **where)

    assert result.changed and result.path == file
    assert result.backup == file.with_name(file.name + ".bak")
    assert result.backup.read_text(encoding="utf-8") == before
    after = json.loads(file.read_text(encoding="utf-8"))
    assert list(after) == ["numStartups", "mcpServers", "projects", "theme"]
    assert list(after["mcpServers"]) == ["github", "spellbook", "zeta"]
    assert after["mcpServers"]["spellbook"] == stdio_entry()
    for key in ("numStartups", "projects", "theme"):
        assert after[key] == original[key]
    for other in ("github", "zeta"):
        assert after["mcpServers"][other] == original["mcpServers"][other]
    assert "dark ☾" in file.read_text(encoding="utf-8")  # not \\u-escaped


def test_install_adds_servers_key_after_existing_keys(where: dict) -> None:
    file = config_path("claude-code", **where)
    write_json(file, {"numStartups": 3, "userID": "abc"})
    install("claude-code", entry=stdio_entry(), **where)
    after = json.loads(file.read_text(encoding="utf-8"))
    assert list(after) == ["numStartups", "userID", "mcpServers"]


@pytest.mark.parametrize("client", CLIENTS)
def test_install_is_idempotent_and_backs_up_once(where: dict, client: str) -> None:
    file = config_path(client, **where)
    write_json(file, {"mcpServers": {"other": {"command": "x"}}})

    first = install(client, entry=stdio_entry(), **where)
    written = file.read_bytes()
    mtime = file.stat().st_mtime_ns
    second = install(client, entry=stdio_entry(), **where)

    assert first.changed and first.backup is not None
    assert second == InstallResult(path=file, changed=False, backup=None)
    assert file.read_bytes() == written and file.stat().st_mtime_ns == mtime
    assert backups(file.parent) == [first.backup]


def test_already_installed_file_is_left_byte_for_byte(where: dict) -> None:
    file = config_path("cursor", **where)
    file.parent.mkdir(parents=True)
    hand_written = '{"mcpServers":{"spellbook":{"command":"' + CMD + '","args":["serve","--vault","/notes"]}}}'
    file.write_text(hand_written, encoding="utf-8")
    result = install("cursor", entry=stdio_entry(), **where)
    assert not result.changed
    assert file.read_text(encoding="utf-8") == hand_written
    assert backups(file.parent) == []


def test_second_backup_is_timestamped_and_first_is_kept(where: dict) -> None:
    file = config_path("cursor", **where)
    v0 = write_json(file, {"mcpServers": {}})
    r1 = install("cursor", entry=stdio_entry("/a"), **where)
    v1 = file.read_text(encoding="utf-8")
    r2 = install("cursor", entry=stdio_entry("/b"), **where)

    assert r1.backup.name == "mcp.json.bak" and r1.backup.read_text(encoding="utf-8") == v0
    assert r2.backup is not None and r2.backup != r1.backup
    assert r2.backup.name.startswith("mcp.json.") and r2.backup.name.endswith(".bak")
    stamp = r2.backup.name[len("mcp.json.") : -len(".bak")]
    assert len(stamp) == len("20240101-120000") and stamp[8] == "-" and stamp.replace("-", "").isdigit()
    assert r2.backup.read_text(encoding="utf-8") == v1
    r3 = install("cursor", entry=stdio_entry("/c"), **where)  # same second: still a fresh name
    assert len({r1.backup, r2.backup, r3.backup}) == 3
    assert r1.backup.read_text(encoding="utf-8") == v0


@pytest.mark.parametrize("client", CLIENTS)
def test_uninstall_reverses_install(where: dict, client: str) -> None:
    file = config_path(client, **where)
    original = {"mcpServers": {"github": {"command": "npx"}}, "other": [1, 2]}
    write_json(file, original)

    install(client, entry=stdio_entry(), **where)
    result = uninstall(client, **where)

    assert result.changed and result.backup is not None
    assert json.loads(result.backup.read_text(encoding="utf-8"))["mcpServers"]["spellbook"] == stdio_entry()
    assert json.loads(file.read_text(encoding="utf-8")) == original

    again = uninstall(client, **where)
    assert again == InstallResult(path=file, changed=False, backup=None)


def test_uninstall_when_absent_writes_nothing(where: dict) -> None:
    missing = uninstall("cursor", **where)
    assert missing.changed is False and not missing.path.exists()

    file = config_path("claude-code", **where)
    before = write_json(file, {"numStartups": 1})
    assert uninstall("claude-code", **where).changed is False
    assert file.read_text(encoding="utf-8") == before
    assert backups(file.parent) == []


def test_uninstall_keeps_an_empty_servers_object(where: dict) -> None:
    file = config_path("cursor", **where)
    write_json(file, {"mcpServers": {"spellbook": stdio_entry()}})
    uninstall("cursor", **where)
    assert json.loads(file.read_text(encoding="utf-8")) == {"mcpServers": {}}


def test_custom_name(where: dict) -> None:
    file = config_path("cursor", **where)
    install("cursor", name="notes", entry=stdio_entry(), **where)
    install("cursor", entry=stdio_entry("/other"), **where)
    assert list(json.loads(file.read_text(encoding="utf-8"))["mcpServers"]) == ["notes", "spellbook"]
    uninstall("cursor", name="notes", **where)
    assert list(json.loads(file.read_text(encoding="utf-8"))["mcpServers"]) == ["spellbook"]


def test_claude_code_project_scope_mcp_json(where: dict) -> None:
    project_file = where["project"] / ".mcp.json"
    user_file = where["home"] / ".claude.json"
    url = "http://127.0.0.1:8765/mcp"

    entry = server_entry(command=CMD, vault=None, http_url=url, token=None)
    result = install("claude-code", scope="project", entry=entry, **where)

    assert result.path == project_file and result.changed
    assert json.loads(project_file.read_text(encoding="utf-8")) == {
        "mcpServers": {"spellbook": {"type": "http", "url": url}}
    }
    assert not user_file.exists()
    assert uninstall("claude-code", scope="project", **where).changed
    assert json.loads(project_file.read_text(encoding="utf-8")) == {"mcpServers": {}}


def test_explicit_path_overrides_the_client_layout(tmp_path: Path, where: dict) -> None:
    file = tmp_path / "elsewhere" / "custom.json"
    result = install("cursor", entry=stdio_entry(), path=file, **where)
    assert result.path == file and file.exists()
    assert not config_path("cursor", **where).exists()


@pytest.mark.parametrize("client", ["claude-code", "cursor"])
def test_http_entry_with_token(where: dict, client: str) -> None:
    entry = server_entry(command=CMD, vault=None, http_url="https://mem.example/mcp", token="t0k")
    file = install(client, entry=entry, **where).path
    assert json.loads(file.read_text(encoding="utf-8"))["mcpServers"]["spellbook"] == {
        "type": "http",
        "url": "https://mem.example/mcp",
        "headers": {"Authorization": "Bearer t0k"},
    }


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "bad",
    ['{"mcpServers": {', "// comment\n{}", '{"a": 1,}', "[1, 2]", '{"mcpServers": []}', '"text"'],
)
@pytest.mark.parametrize("operation", ["install", "uninstall"])
def test_bad_config_is_refused_and_untouched(where: dict, bad: str, operation: str) -> None:
    file = config_path("cursor", **where)
    file.parent.mkdir(parents=True)
    file.write_text(bad, encoding="utf-8")
    with pytest.raises(SpellbookError, match=r"nothing was written") as info:
        if operation == "install":
            install("cursor", entry=stdio_entry(), **where)
        else:
            uninstall("cursor", **where)
    assert str(file) in str(info.value)
    assert file.read_text(encoding="utf-8") == bad
    assert sorted(p.name for p in file.parent.iterdir()) == ["mcp.json"]


def test_invalid_json_message_points_at_the_line(where: dict) -> None:
    file = config_path("claude-code", **where)
    file.write_text('{\n  "a": 1\n  "b": 2\n}\n', encoding="utf-8")
    with pytest.raises(SpellbookError, match=r"not valid JSON \(line 3.*Fix the file"):
        install("claude-code", entry=stdio_entry(), **where)


def test_claude_desktop_refuses_http_and_suggests_stdio(where: dict) -> None:
    entry = server_entry(command=CMD, vault=None, http_url="http://127.0.0.1:8765/mcp", token="t")
    file = config_path("claude-desktop", **where)
    with pytest.raises(InvalidInputError, match=r"drop --http") as info:
        install("claude-desktop", entry=entry, **where)
    assert "stdio" in str(info.value)
    assert not file.exists() and not file.parent.exists()


def test_empty_or_bom_file_is_read(where: dict) -> None:
    file = config_path("claude-desktop", **where)
    file.parent.mkdir(parents=True)
    file.write_text("", encoding="utf-8")
    result = install("claude-desktop", entry=stdio_entry(), **where)
    assert result.changed and result.backup is not None
    assert json.loads(file.read_text(encoding="utf-8")) == {"mcpServers": {"spellbook": stdio_entry()}}

    file.write_bytes(b"\xef\xbb\xbf" + b'{"globalShortcut": "Ctrl+Space"}')
    install("claude-desktop", entry=stdio_entry(), **where)
    assert json.loads(file.read_text(encoding="utf-8")) == {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"spellbook": stdio_entry()},
    }


def test_bad_arguments(where: dict) -> None:
    with pytest.raises(InvalidInputError, match="choose one of"):
        install("vscode", entry=stdio_entry(), **where)
    with pytest.raises(InvalidInputError, match="choose one of"):
        install("vscode", entry=stdio_entry(), path=where["home"] / "x.json")
    with pytest.raises(InvalidInputError, match="non-empty"):
        install("cursor", name="", entry=stdio_entry(), **where)
    with pytest.raises(InvalidInputError, match="server_entry"):
        install("cursor", entry={}, **where)
    assert list(where["home"].iterdir()) == []


def test_tuple_args_compare_equal_to_what_was_written(where: dict) -> None:
    entry = {"command": CMD, "args": ("serve",)}
    assert install("cursor", entry=entry, **where).changed
    assert not install("cursor", entry=entry, **where).changed


# ---------------------------------------------------------------- file system details


@pytest.mark.skipif(sys.platform.startswith("win"), reason="POSIX permissions and symlinks")
def test_permissions_kept_and_new_files_private(where: dict) -> None:
    file = config_path("claude-code", **where)
    write_json(file, {})
    os.chmod(file, 0o640)
    result = install("claude-code", entry=stdio_entry(), **where)
    assert file.stat().st_mode & 0o777 == 0o640
    assert result.backup.stat().st_mode & 0o777 == 0o640

    fresh = install("cursor", entry=stdio_entry(), **where).path
    assert fresh.stat().st_mode & 0o777 == 0o600


@pytest.mark.skipif(sys.platform.startswith("win"), reason="POSIX permissions and symlinks")
def test_symlinked_config_is_written_through(tmp_path: Path, where: dict) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    write_json(real, {"mcpServers": {}})
    link = config_path("cursor", **where)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)

    result = install("cursor", entry=stdio_entry(), **where)

    assert link.is_symlink()
    assert json.loads(real.read_text(encoding="utf-8"))["mcpServers"]["spellbook"] == stdio_entry()
    assert result.backup == real.with_name("mcp.json.bak")


def test_failed_write_leaves_the_file_and_no_temp(where: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    file = config_path("cursor", **where)
    before = write_json(file, {"mcpServers": {}})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(clients.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        install("cursor", entry=stdio_entry(), **where)
    assert file.read_text(encoding="utf-8") == before
    assert [p.name for p in file.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_no_process_and_no_real_home(where: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermetic: nothing shells out, and with every location passed in the real home is never consulted."""

    def forbidden(*args, **kwargs):
        raise AssertionError("clients must not start processes or look at the real home")

    monkeypatch.setattr(Path, "home", staticmethod(forbidden))
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    for client in CLIENTS:
        install(client, entry=stdio_entry(), **where)
        uninstall(client, **where)


def test_default_command_sits_next_to_python() -> None:
    command = Path(clients.default_command())
    assert command.is_absolute()
    assert command.parent == Path(sys.executable).absolute().parent
    assert command.stem == "spellbook"


def test_a_scoped_stdio_entry_and_no_scope_for_http() -> None:
    from spellbook.cli.clients import server_entry

    entry = server_entry(command="/bin/spellbook", vault=Path("/v"), context="shop", user="ana")
    assert entry["args"] == ["serve", "--vault", "/v", "--context", "shop", "--user", "ana"]
    with pytest.raises(InvalidInputError, match="scoped per call"):
        server_entry(command="/bin/spellbook", http_url="http://127.0.0.1:8765/mcp", context="shop")
