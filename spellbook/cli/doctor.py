"""What ``spellbook doctor`` checks besides the index: settings, folders, and the MCP clients.

Each check is a dict ``{"check", "status", "detail", "fix"?}`` with ``status`` one of ``ok``,
``info``, ``warn`` and ``fail``; only ``fail`` makes doctor exit 1. The index check (ledger vs.
files, catalog vs. vectors) and the embedder probe run in the process that owns the index
(``Engine.check``, ``Engine.probe_embedder``); this module turns their answers into checks too.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from spellbook.cli import clients, codex_config
from spellbook.config import Settings
from spellbook.errors import SpellbookError

Check = dict[str, Any]


def check(name: str, status: str, detail: str, fix: str | None = None) -> Check:
    out: Check = {"check": name, "status": status, "detail": detail}
    if fix:
        out["fix"] = fix
    return out


def id_check(report: Mapping[str, Any]) -> list[Check]:
    """Ids written unquoted that YAML 1.2 tools (Obsidian's properties) read as numbers."""
    quoted = report.get("quoted_ids") or []
    left = report.get("counts", {}).get("ids_read_as_numbers", 0)
    out = []
    if quoted:
        out.append(
            check(
                "ids",
                "ok",
                f"quoted the id of {len(quoted)} notes that YAML 1.2 read as a number: "
                + ", ".join(quoted[:5])
                + (" ..." if len(quoted) > 5 else ""),
            )
        )
    if left:
        paths = report.get("ids_read_as_numbers", [])
        out.append(
            check(
                "ids",
                "warn",
                f"{left} notes write their id unquoted where YAML 1.2 (Obsidian's properties) reads a number, "
                f"e.g. {paths[0] if paths else '?'}: "
                "editing that property in Obsidian would write the number over the id",
                "run `spellbook doctor --repair` to quote them (only those values change)",
            )
        )
    return out


def sync_check(record: Mapping[str, Any] | None) -> list[Check]:
    """The last sync with the git remote (docs/sync.md), when this index's owner has run one or syncs
    on a timer."""
    if not record or (record.get("last") is None and not record.get("every_seconds")):
        return []
    last = record.get("last")
    if last is None:
        return [check("sync", "ok", f"every {record['every_seconds']:g} s with {record.get('remote')}; no round yet")]
    if last.get("error"):
        return [
            check(
                "sync",
                "warn",
                f"the last sync ({last.get('at')}) did not finish: {last['error']}",
                "the vault works offline meanwhile; fix the remote, then run `spellbook sync`",
            )
        ]
    copies = last.get("conflict_copies") or []
    return [
        check(
            "sync",
            "ok",
            f"in sync with {record.get('remote')} at {last.get('head')} ({last.get('at')})"
            + (f"; {len(copies)} conflict copies to resolve on the Care page" if copies else ""),
        )
    ]


# ---------------------------------------------------------------- settings and folders


def config_checks(settings: Settings) -> list[Check]:
    """The vault and the index folder exist and are writable; the embedder's settings make sense."""
    out: list[Check] = []
    vault = settings.vault_dir
    if not vault.is_dir():
        out.append(
            check(
                "vault",
                "fail",
                f"{vault} does not exist",
                f"run `spellbook init {vault}`, or set SPELLBOOK_VAULT / --vault to your vault",
            )
        )
    else:
        problem = _not_writable(vault)
        out.append(
            check(
                "vault",
                "fail",
                f"{vault} is not writable ({problem})",
                "fix the folder's permissions or owner; Spellbook writes notes there",
            )
            if problem
            else check("vault", "ok", f"{vault} (writable)")
        )
    index = settings.index_path
    existing = next((p for p in (index, *index.parents) if p.exists()), None)
    problem = _not_writable(index if index.is_dir() else existing) if existing else "no parent folder"
    if index.exists() and not index.is_dir():
        problem = "it is a file"
    out.append(
        check(
            "index folder",
            "fail",
            f"{index} cannot be used ({problem})",
            "set SPELLBOOK_INDEX_DIR / --index-dir to a writable folder",
        )
        if problem
        else check(
            "index folder",
            "ok",
            f"{index} (writable)"
            + (f"; vectors on the Chroma server {settings.chroma_url}" if settings.chroma_url else ""),
        )
    )
    out.append(_embedder_config(settings))
    return out


def _not_writable(folder: Path | None) -> str | None:
    if folder is None:
        return "missing"
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".spellbook-doctor.", suffix=".tmp")
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)
    return None


def _embedder_config(settings: Settings) -> Check:
    name = settings.embedder
    if name == "ollama":
        return check("embedder settings", "ok", f"ollama: model {settings.ollama_model!r} at {settings.ollama_url}")
    if name == "openai":
        url = settings.openai_url
        detail = (
            f"openai: model {settings.openai_model!r} at {url} (batch {settings.openai_batch_size}, API key "
            f"{'set' if settings.openai_api_key else 'not set'})"
        )
        host = urlparse(url).hostname or ""
        if urlparse(url).scheme not in ("http", "https") or not host:
            return check(
                "embedder settings",
                "fail",
                detail,
                "set SPELLBOOK_OPENAI_URL to a base URL such as https://api.openai.com/v1 or http://127.0.0.1:1234/v1",
            )
        if not settings.openai_api_key and host.endswith("openai.com"):
            return check("embedder settings", "fail", detail, "set SPELLBOOK_OPENAI_API_KEY (OpenAI needs a key)")
        if settings.openai_api_key and url.startswith("http://") and not _loopback(host):
            return check(
                "embedder settings",
                "warn",
                detail + "; the key travels unencrypted",
                "use an https:// SPELLBOOK_OPENAI_URL",
            )
        return check("embedder settings", "ok", detail)
    if name == "hashing":
        return check(
            "embedder settings",
            "warn",
            "hashing: a test embedder with no sense of meaning",
            "set SPELLBOOK_EMBEDDER=use-m3 (the default) for real use",
        )
    return check("embedder settings", "ok", f"{name}: bundled offline model")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------- the engine's answers


def embedder_check(probe: Mapping[str, Any]) -> list[Check]:
    """The probe's answer (``Engine.probe_embedder``) and what is waiting for vectors."""
    out: list[Check] = []
    if probe.get("ok"):
        out.append(
            check(
                "embedder",
                "ok",
                f"{probe['embedder']} answered in {probe['seconds'] * 1000:.0f} ms ({probe['dimensions']} dimensions)",
            )
        )
    else:
        out.append(
            check(
                "embedder",
                "fail",
                f"{probe.get('embedder')}: {probe.get('error')}",
                "until it answers, searches use the keyword index and new notes wait for vectors",
            )
        )
    missing = probe.get("vectors_missing") or 0
    if missing:
        out.append(
            check(
                "vectors",
                "warn",
                f"{missing} sections are indexed without vectors (the embedder failed when they were written)",
                "a running server fills them in once the embedder answers; or run `spellbook doctor --repair`",
            )
        )
    return out


# ---------------------------------------------------------------- MCP clients


def client_checks(
    settings: Settings,
    *,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    project: Path | None = None,
) -> list[Check]:
    """Which clients have Spellbook installed, whether the command they start exists, and whether
    it serves this vault. Informational: never ``fail`` (another vault may be on purpose)."""
    out: list[Check] = []
    project = Path.cwd() if project is None else project
    seen: set[Path] = set()  # run from the home folder, a project's file is the user's file
    for client in clients.CLIENTS:
        found: list[Check] = []
        for scope in ("user", "project") if client != "claude-desktop" else ("user",):
            name = f"{client} ({scope})"
            try:
                file = clients.config_path(client, scope, home=home, env=env, project=project)
                if client == "codex":
                    _, config, existed = codex_config.read(file)
                    servers = codex_config.servers(config, file)
                else:
                    config, existed = clients._read_config(file)
                    servers = clients._servers(config, file) or {}
            except (SpellbookError, codex_config.CodexConfigError) as exc:
                found.append(check(name, "warn", str(exc)))
                continue
            if not existed or file.resolve() in seen:
                continue
            seen.add(file.resolve())
            entries = [(f"{name}", file, key, entry) for key, entry in servers.items() if _is_spellbook(key, entry)]
            if client == "claude-code" and scope == "user":  # `claude mcp add` local scope: per project
                local = (
                    config.get("projects", {}).get(str(project), {}) if isinstance(config.get("projects"), dict) else {}
                )
                for key, entry in (local.get("mcpServers") or {}).items() if isinstance(local, dict) else ():
                    if _is_spellbook(key, entry):
                        entries.append((f"{client} (local)", file, key, entry))
            found += [_entry_check(settings, label, file, key, entry, client) for label, file, key, entry in entries]
        if not found:
            found.append(
                check(
                    client,
                    "info",
                    "Spellbook is not installed",
                    f"`spellbook install {client} --vault {settings.vault_dir}` if you use it",
                )
            )
        out += found
    return out


def _is_spellbook(key: str, entry: Any) -> bool:
    if not isinstance(entry, Mapping):
        return False
    command = str(entry.get("command") or "")
    return key == "spellbook" or Path(command).name in ("spellbook", "spellbook.exe")


def _entry_check(settings: Settings, label: str, file: Path, key: str, entry: Mapping[str, Any], client: str) -> Check:
    where = f"{key!r} in {file}"
    reinstall = f"run `spellbook install {client} --vault {settings.vault_dir}` again"
    if clients.is_remote(entry) or "httpUrl" in entry:
        url = entry.get("url") or entry.get("httpUrl")
        return check(label, "ok", f"{where} connects to {url} (a running `spellbook serve --http`)")
    command = str(entry.get("command") or "")
    resolved = command if os.path.isabs(command) and os.access(command, os.X_OK) else shutil.which(command)
    if not resolved:
        return check(label, "warn", f"{where} starts {command!r}, which does not exist or is not executable", reinstall)
    args = [str(a) for a in entry.get("args") or []]
    vault = args[args.index("--vault") + 1] if "--vault" in args[:-1] else None
    env = entry.get("env") if isinstance(entry.get("env"), Mapping) else {}
    vault = vault or env.get("SPELLBOOK_VAULT")
    if not vault:
        return check(
            label,
            "warn",
            f"{where} starts {command} with no --vault: it serves ./vault of whatever folder the client starts it in",
            reinstall,
        )
    if Path(vault).expanduser().resolve() != settings.vault_dir:
        return check(
            label,
            "warn",
            f"{where} serves {vault}, not the vault checked here ({settings.vault_dir})",
            f"{reinstall} if this is the vault it should use",
        )
    return check(label, "ok", f"{where} starts {command} serve --vault {vault}")


def hook_checks(
    settings: Settings, *, home: Path | None = None, env: Mapping[str, str] | None = None, project: Path | None = None
) -> list[Check]:
    """Claude Code's session hooks (spellbook/sessions/install.py): installed, their script exists,
    they serve this vault, and capture and recall are both there. Never ``fail``."""
    import shlex

    from spellbook.sessions import install as hooks

    out: list[Check] = []
    seen: set[Path] = set()
    for scope in ("user", "project"):
        file = hooks.settings_path(scope, home=home, env=env, project=project)
        if not file.exists() or file.resolve() in seen:
            continue
        seen.add(file.resolve())
        found = hooks.installed_hooks(file)
        if not found:
            continue
        name = f"claude-code hooks ({scope})"
        fix = f"run `spellbook install claude-code --hooks --scope {scope} --vault {settings.vault_dir}` again"
        missing = [e for e in ("SessionStart", "SessionEnd") if e not in found]
        words = shlex.split(next(iter(found.values()))[0])
        vault = Path(words[words.index("--vault") + 1]) if "--vault" in words[:-1] else None
        if missing:
            out.append(check(name, "warn", f"{file} lacks the {' and '.join(missing)} hook(s)", fix))
        elif not Path(words[0]).exists():
            out.append(check(name, "warn", f"the hooks in {file} run {words[0]}, which does not exist", fix))
        elif vault is not None and vault.resolve() != settings.vault_dir:
            out.append(check(name, "warn", f"the hooks in {file} capture sessions into {vault}, not this vault", fix))
        else:
            out.append(check(name, "ok", f"{', '.join(found)} in {file}"))
    plugin = hooks.plugin_ids(home=home, env=env)
    if plugin and out:
        out.append(
            check(
                "claude-code plugin",
                "warn",
                f"the Spellbook plugin ({', '.join(plugin)}) and the settings "
                "hooks above are both installed; the plugin's hooks stand down while the settings hooks exist",
                f"keep one: `spellbook uninstall claude-code` (settings) or `claude plugin uninstall {plugin[0]}`",
            )
        )
    elif plugin:
        out.append(
            check(
                "claude-code plugin",
                "ok",
                f"{', '.join(plugin)} installed: the MCP server and session hooks "
                "(its vault: `claude plugin configure " + plugin[0] + "`)",
            )
        )
    if not out:
        out.append(
            check(
                "claude-code hooks",
                "info",
                "session memory hooks are not installed",
                f"`spellbook install claude-code --hooks --vault {settings.vault_dir}` to capture sessions, "
                "or install the Claude Code plugin (README)",
            )
        )
    from spellbook.sessions.capture import open_to_others

    if exposed := open_to_others(settings.vault_dir):
        out.append(
            check(
                "captured sessions",
                "warn",
                "other users of this machine can read captured sessions in " + " and ".join(str(f) for f in exposed),
                f"`chmod 700 {settings.vault_dir}`",
            )
        )
    return out + agent_hook_checks(settings, home=home, env=env, project=project)


def agent_hook_checks(
    settings: Settings, *, home: Path | None = None, env: Mapping[str, str] | None = None, project: Path | None = None
) -> list[Check]:
    """Codex's and Gemini's hooks (sessions/agents/): installed with recall and capture, for this vault."""
    from spellbook.sessions import agents
    from spellbook.sessions import install as hooks

    out: list[Check] = []
    for agent in agents.AGENTS:
        found_any = False
        for scope in ("user", "project"):
            file = agents.hooks_path(agent, scope, home=home, env=env, project=project)
            found = hooks.installed_hooks(file) if file.exists() else {}
            if not found or (
                scope == "project" and file.resolve() == agents.hooks_path(agent, "user", home=home, env=env).resolve()
            ):
                continue
            found_any = True
            name, fix = f"{agent} hooks ({scope})", f"run `spellbook install {agent} --scope {scope}` again"
            capture = "Stop" if agent == "codex" else "AfterAgent"
            missing = [e for e in ("SessionStart", capture) if e not in found]
            if missing:
                out.append(check(name, "warn", f"{file} lacks the {' and '.join(missing)} hook(s)", fix))
            elif _vault_of(next(iter(found.values()))[0]) != settings.vault_dir:
                out.append(check(name, "warn", f"the hooks in {file} use another vault than {settings.vault_dir}", fix))
            else:
                trust = " (Codex runs them once you trust them in its /hooks)" if agent == "codex" else ""
                out.append(check(name, "ok", f"{', '.join(found)} in {file}{trust}"))
        if not found_any:
            out.append(
                check(
                    f"{agent} hooks",
                    "info",
                    "session hooks are not installed",
                    f"`spellbook install {agent} --vault {settings.vault_dir}` if you use {agent}",
                )
            )
    return out


def _vault_of(command: str) -> Path | None:
    import shlex

    words = shlex.split(command)
    return Path(words[words.index("--vault") + 1]).resolve() if "--vault" in words[:-1] else None
