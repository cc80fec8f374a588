"""Register Spellbook in an MCP client's config: Claude Code, Claude Desktop, Cursor, Gemini CLI, Codex CLI.

Each JSON client keeps its servers under a top-level ``"mcpServers"`` object in a JSON file:

    claude-code     user: ~/.claude.json (or $CLAUDE_CONFIG_DIR/.claude.json)   project: <project>/.mcp.json
    claude-desktop  user: macOS ~/Library/Application Support/Claude/claude_desktop_config.json
                          Windows %APPDATA%\\Claude\\claude_desktop_config.json
                          Linux $XDG_CONFIG_HOME/Claude/claude_desktop_config.json (default ~/.config)
    cursor          user: ~/.cursor/mcp.json                                      project: <project>/.cursor/mcp.json
    gemini          user: ~/.gemini/settings.json                        project: <project>/.gemini/settings.json
    codex (TOML)    user: $CODEX_HOME/config.toml (default ~/.codex)     project: <project>/.codex/config.toml

Codex keeps ``[mcp_servers.<name>]`` tables in TOML instead (codex_config.py edits them).

``install`` and ``uninstall`` touch only ``mcpServers[name]``: every other server and every other
key stays as it was, in order. A file that would not change is not written. Before changing an
existing file they copy it next to itself (``<file>.bak``, or ``<file>.<YYYYmmdd-HHMMSS>.bak``
when that is taken), then write atomically. A file that is not valid JSON is never overwritten.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spellbook.cli import codex_config
from spellbook.errors import InvalidInputError, SpellbookError
from spellbook.files import atomic_write, backup_copy

JSON_CLIENTS = ("claude-code", "claude-desktop", "cursor", "gemini")
CLIENTS = (*JSON_CLIENTS, "codex")
SCOPES = ("user", "project")

_SERVERS_KEY = "mcpServers"


class ClientConfigError(SpellbookError):
    """A client's config file cannot be read or updated safely; nothing was written."""


@dataclass(frozen=True)
class InstallResult:
    path: Path  # the config file
    changed: bool  # False: the file already said this, and was not touched
    backup: Path | None  # copy of the file as it was before this change, if it existed
    private_from: int | None = None  # the mode the file had before it was made 0600 (it holds a token)


# ---------------------------------------------------------------- where each client keeps its config


def config_path(
    client: str,
    scope: str = "user",
    *,
    platform: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> Path:
    """The JSON file ``client`` reads its MCP servers from, for ``scope`` ("user" or "project").

    ``platform``, ``home``, ``env`` and ``project`` default to this machine (``sys.platform``,
    ``Path.home()``, ``os.environ``, ``Path.cwd()``), read at call time.
    """
    _check_client(client)
    _check_scope(scope)
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else Path(home)
    env = os.environ if env is None else env
    project = Path.cwd() if project is None else Path(project)

    if client == "claude-desktop":
        if scope != "user":
            raise InvalidInputError(
                "Claude Desktop has no project config, only one per user; use scope 'user' (drop --scope project)."
            )
        return _desktop_dir(platform, home, env) / "claude_desktop_config.json"
    if client == "claude-code":
        if scope == "project":
            return project / ".mcp.json"
        return Path(env.get("CLAUDE_CONFIG_DIR") or home) / ".claude.json"
    if client == "gemini":
        return (project if scope == "project" else home) / ".gemini" / "settings.json"
    if client == "codex":
        if scope == "project":
            return project / ".codex" / "config.toml"
        return Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml"
    # cursor
    return (project if scope == "project" else home) / ".cursor" / "mcp.json"


def _desktop_dir(platform: str, home: Path, env: Mapping[str, str]) -> Path:
    # Not platformdirs: its macOS user_config_dir follows $XDG_CONFIG_HOME when set (4.x), while
    # Claude Desktop (Electron) always reads ~/Library/Application Support/Claude on macOS.
    if platform == "darwin":
        return home / "Library" / "Application Support" / "Claude"
    if platform.startswith(("win", "cygwin", "msys")):
        appdata = env.get("APPDATA")
        return (Path(appdata) if appdata else home / "AppData" / "Roaming") / "Claude"
    xdg = env.get("XDG_CONFIG_HOME")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return base / "Claude"


def _check_client(client: str) -> None:
    if client not in CLIENTS:
        raise InvalidInputError(f"Unknown client {client!r}; choose one of: {', '.join(CLIENTS)}.")


def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InvalidInputError(f"Unknown scope {scope!r}; choose one of: {', '.join(SCOPES)}.")


# ---------------------------------------------------------------- what to write


def default_command() -> str:
    """Absolute path of the ``spellbook`` script installed next to this Python (a venv's bin/ or Scripts/)."""
    name = "spellbook.exe" if sys.platform.startswith("win") else "spellbook"
    return str(Path(sys.executable).absolute().with_name(name))


def server_entry(
    *,
    command: str,
    vault: Path | None = None,
    http_url: str | None = None,
    token: str | None = None,
    context: str | None = None,
    user: str | None = None,
) -> dict[str, Any]:
    """The ``mcpServers`` entry for Spellbook.

    Without ``http_url``: the client starts ``<command> serve [--vault <vault>]`` over stdio
    (``vault`` is made absolute, since the client's working directory is unknown). With
    ``http_url``: the client connects to a running ``spellbook serve --http``, sending
    ``Authorization: Bearer <token>`` when a token is given; over streamable HTTP, or over the
    legacy SSE transport when the URL's path ends in ``/sse``. ``context``/``user`` scope a stdio
    server to one project or person (spellbook/scope.py).
    """
    if http_url is not None:
        if not http_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"--http needs a full URL such as http://127.0.0.1:8765/mcp, not {http_url!r}.")
        if context or user:
            raise InvalidInputError(
                "--context/--user scope a server the client starts; a shared HTTP server is scoped per call "
                "(the tools' context and user arguments) or by its own SPELLBOOK_CONTEXT/SPELLBOOK_USER."
            )
        sse = urlsplit(http_url).path.rstrip("/").endswith("/sse")
        entry: dict[str, Any] = {"type": "sse" if sse else "http", "url": http_url}
        if token:
            entry["headers"] = {"Authorization": f"Bearer {token}"}
        return entry
    if token:
        raise InvalidInputError(
            "A token is only used with --http; a stdio server started by the client needs none. Drop the token."
        )
    if not command:
        raise InvalidInputError("No command to start Spellbook; pass the absolute path of the `spellbook` script.")
    args = ["serve"]
    if vault is not None:
        args += ["--vault", str(Path(vault).expanduser().absolute())]
    for flag, value in (("--context", context), ("--user", user)):
        if value:
            args += [flag, value]
    return {"command": command, "args": args}


def is_remote(entry: Mapping[str, Any]) -> bool:
    """True for an entry that points at a URL rather than a command to start."""
    return "url" in entry or entry.get("type") in ("http", "sse", "streamable-http")


# ---------------------------------------------------------------- install / uninstall


def install(
    client: str,
    *,
    scope: str = "user",
    name: str = "spellbook",
    entry: Mapping[str, Any],
    path: Path | None = None,
    platform: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> InstallResult:
    """Set ``mcpServers[name] = entry`` in ``client``'s config (or in ``path`` when given)."""
    _check_name(name)
    wanted = _as_json(entry)
    if client == "claude-desktop" and is_remote(wanted):
        raise InvalidInputError(
            "Claude Desktop cannot connect to an HTTP server from claude_desktop_config.json: it only starts "
            "local commands. Install the stdio form instead (drop --http): Claude Desktop then starts its own "
            "`spellbook serve`, which shares the vault with your other clients."
        )
    file = _config_file(client, scope, path, platform=platform, home=home, env=env, project=project)
    if client == "codex":
        return _codex(file, name, _as_json(codex_config.codex_entry(wanted)))
    wanted = _gemini_entry(wanted) if client == "gemini" else wanted
    config, existed = _read_config(file)
    servers = _servers(config, file)
    # A token makes the file a secret: readable by its owner only, whatever mode it had (0644 is usual).
    secret = bool(wanted.get("headers"))
    if servers is not None and servers.get(name) == wanted:
        private_from = _make_private(file) if secret else None
        return InstallResult(path=file, changed=False, backup=None, private_from=private_from)
    updated = dict(config)
    updated[_SERVERS_KEY] = {**(servers or {}), name: wanted}
    before = _mode(file) if existed else None
    backup = _write_config(file, updated, existed, private=secret)
    private_from = before if secret and before is not None and before & 0o077 else None
    return InstallResult(path=file, changed=True, backup=backup, private_from=private_from)


def uninstall(
    client: str,
    *,
    scope: str = "user",
    name: str = "spellbook",
    path: Path | None = None,
    platform: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> InstallResult:
    """Remove ``mcpServers[name]`` from ``client``'s config; everything else stays. Absent: nothing written."""
    _check_name(name)
    file = _config_file(client, scope, path, platform=platform, home=home, env=env, project=project)
    if client == "codex":
        return _codex(file, name, None)
    config, existed = _read_config(file)
    servers = _servers(config, file)
    if not existed or servers is None or name not in servers:
        return InstallResult(path=file, changed=False, backup=None)
    updated = dict(config)
    updated[_SERVERS_KEY] = {k: v for k, v in servers.items() if k != name}
    backup = _write_config(file, updated, existed)
    return InstallResult(path=file, changed=True, backup=backup)


def _gemini_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """Gemini CLI names a streamable HTTP server's address ``httpUrl`` (``url`` is its SSE form)."""
    if not is_remote(entry) or entry.get("type") == "sse":
        return {k: v for k, v in entry.items() if k != "type"}
    return {"httpUrl": entry["url"], **({"headers": entry["headers"]} if entry.get("headers") else {})}


def _codex(file: Path, name: str, wanted: dict[str, Any] | None) -> InstallResult:
    """Install (``wanted``) or remove (None) ``[mcp_servers.<name>]`` in Codex's config.toml."""
    try:
        text, config, existed = codex_config.read(file)
        current = codex_config.servers(config, file).get(name)
        if current == wanted:
            return InstallResult(path=file, changed=False, backup=None)
        updated = codex_config.with_entry(text, name, wanted, file)
    except codex_config.CodexConfigError as exc:
        raise ClientConfigError(str(exc)) from None
    target = file.resolve() if file.is_symlink() else file
    backup = _backup(target) if existed else None
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, updated, mode=target.stat().st_mode & 0o7777 if existed else 0o600)
    return InstallResult(path=file, changed=True, backup=backup)


def _config_file(client: str, scope: str, path: Path | None, **where: Any) -> Path:
    if path is not None:
        _check_client(client)
        return Path(path).expanduser()
    return config_path(client, scope, **where)


def _as_json(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` as it will read back from the file (tuples become lists), so comparisons are exact."""
    if not isinstance(entry, Mapping) or not entry:
        raise InvalidInputError("The server entry must be a non-empty mapping; build it with server_entry().")
    try:
        return json.loads(json.dumps(entry))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"The server entry cannot be written as JSON ({exc}); use strings, lists and dicts.")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("The server name must be a non-empty string, such as 'spellbook'.")


def _read_config(file: Path) -> tuple[dict[str, Any], bool]:
    """The parsed config and whether the file exists. Missing or blank: ``{}``."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}, False
    except IsADirectoryError:
        raise ClientConfigError(f"{file} is a folder, not a config file; move it aside and run install again.")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigError(f"Cannot read {file} ({exc}); fix the file or its permissions and try again.")
    if not text.strip():
        return {}, True
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientConfigError(
            f"{file} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); nothing was written. "
            f"Fix the file by hand (or restore a .bak copy next to it) and run the command again."
        )
    if not isinstance(config, dict):
        raise ClientConfigError(
            f"{file} holds a JSON {type(config).__name__}, not an object; nothing was written. "
            f"Fix the file so its top level is {{...}} and run the command again."
        )
    return config, True


def _servers(config: Mapping[str, Any], file: Path) -> dict[str, Any] | None:
    servers = config.get(_SERVERS_KEY)
    if servers is None:
        return None
    if not isinstance(servers, dict):
        raise ClientConfigError(
            f'"{_SERVERS_KEY}" in {file} is a JSON {type(servers).__name__}, not an object; nothing was written. '
            f"Fix it by hand and run the command again."
        )
    return servers


def render_config(config: Mapping[str, Any]) -> str:
    """JSON as the clients write it: 2-space indent, non-ASCII kept, trailing newline."""
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _write_config(file: Path, config: Mapping[str, Any], existed: bool, private: bool = False) -> Path | None:
    """Back up ``file`` if it existed, then replace it atomically. Returns the backup's path.
    ``private``: the file (and its backup) lose their group/other bits."""
    # Write through a symlink (dotfile managers) rather than replacing the link with a file.
    target = file.resolve() if file.is_symlink() else file
    backup = _backup(target, private) if existed else None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClientConfigError(f"Cannot create {target.parent} ({exc}); create it yourself and try again.")
    mode = target.stat().st_mode & 0o7777 if existed else 0o600  # new: private (it may hold a token)
    atomic_write(target, render_config(config), mode=mode & 0o700 if private else mode)
    return backup


def _mode(file: Path) -> int:
    return os.stat(file).st_mode & 0o7777  # through a symlink, as _write_config writes


def _make_private(file: Path) -> int | None:
    """Take group/other bits off ``file``; the mode it had, or None when it was private already."""
    mode = _mode(file)
    if not mode & 0o077:
        return None
    try:
        os.chmod(file, mode & 0o700)
    except OSError as exc:
        raise ClientConfigError(f"{file} holds the token but cannot be made private ({exc}); run chmod 600 on it.")
    return mode


def _backup(file: Path, private: bool = False) -> Path:
    """Copy ``file`` byte for byte to ``<file>.bak``, or a timestamped name when that exists (never
    over an earlier backup, even if two installs race); a private file's copy is private too."""
    try:
        return backup_copy(file, mode=file.stat().st_mode & (0o700 if private else 0o777))
    except FileExistsError as exc:  # every name of this second taken
        raise ClientConfigError(str(exc)) from None
    except OSError as exc:
        raise ClientConfigError(
            f"Cannot write a backup of {file} ({exc}); nothing was changed. Check the folder's permissions."
        ) from None
