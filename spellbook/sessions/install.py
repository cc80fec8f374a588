"""``spellbook install claude-code --hooks``: Spellbook's hooks in Claude Code's settings file.

Settings hooks, not a plugin: a hook's command must name this machine's ``spellbook`` script and
vault by absolute path, which a plugin (a folder installed through a marketplace) cannot know,
and the settings file sits beside the MCP entry in the same scope, where ``uninstall`` can take
out exactly what ``install`` put in. Files: user scope ``~/.claude/settings.json`` (or
``$CLAUDE_CONFIG_DIR/settings.json``), project scope ``<project>/.claude/settings.json``.

Our hooks are recognised by their command: ``<.../spellbook> hook <Event> ...``. Install first
takes out any of ours, then adds one group per event; every other hook and key stays, in order.
A file that would not change is not written; an existing file is backed up first.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spellbook.errors import SpellbookError
from spellbook.files import atomic_write, backup_copy

CAPTURE_EVENTS = ("Stop", "PreCompact", "SessionEnd")
TIMEOUTS = {"SessionStart": 30, "UserPromptSubmit": 10, "Stop": 30, "PreCompact": 30, "SessionEnd": 30}


class HookConfigError(SpellbookError):
    """Claude Code's settings file cannot be read or updated safely; nothing was written."""


def settings_path(
    scope: str, *, home: Path | None = None, env: Mapping[str, str] | None = None, project: Path | None = None
) -> Path:
    env = os.environ if env is None else env
    if scope == "project":
        return (project or Path.cwd()) / ".claude" / "settings.json"
    base = env.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "settings.json" if base else (home or Path.home()) / ".claude" / "settings.json"


def hook_commands(command: str, vault: Path | None, prompt_recall: bool = True) -> dict[str, str]:
    """Event -> the command line Claude Code runs for it."""
    tail = f" --vault {shlex.quote(str(Path(vault).expanduser().absolute()))}" if vault is not None else ""
    events = ["SessionStart", *(["UserPromptSubmit"] if prompt_recall else []), *CAPTURE_EVENTS]
    out = {e: f"{shlex.quote(command)} hook {e}{tail}" for e in events}
    if prompt_recall:
        out["UserPromptSubmit"] += " --prompt-recall"
    return out


def plugin_ids(*, home: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The ids (``spellbook@<marketplace>``) of the Spellbook plugin installed in Claude Code."""
    env = os.environ if env is None else env
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else (home or Path.home()) / ".claude"
    try:
        installed = json.loads((base / "plugins" / "installed_plugins.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    return sorted(k for k in plugins if k.startswith("spellbook@")) if isinstance(plugins, dict) else []


def is_ours(hook: Any) -> bool:
    """A hook entry this module wrote: its command runs a ``spellbook`` script's ``hook``."""
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        words = shlex.split(hook["command"])
    except ValueError:
        return False
    return len(words) >= 3 and Path(words[0]).name in ("spellbook", "spellbook.exe") and words[1] == "hook"


def install_hooks(
    file: Path, commands: Mapping[str, str], timeouts: Mapping[str, int] | None = None
) -> tuple[bool, Path | None]:
    """Write ``commands`` as Spellbook's hooks in ``file``; returns (changed, backup). ``timeouts``:
    per event, in the unit the file's reader expects (Claude Code's seconds by default). Codex's
    hooks.json and Gemini's settings.json take the same layout (sessions/agents/)."""
    config, existed = _read(file)
    hooks = _without_ours(config.get("hooks"), file)
    timeouts = TIMEOUTS if timeouts is None else timeouts
    for event, command in commands.items():
        group = {"hooks": [{"type": "command", "command": command, "timeout": timeouts.get(event, 30)}]}
        hooks[event] = [*hooks.get(event, []), group]
    updated = {**config, "hooks": hooks}
    if updated == config:
        return False, None
    return True, _write(file, updated, existed)


def uninstall_hooks(file: Path) -> tuple[bool, Path | None]:
    """Take Spellbook's hooks out of ``file``; everything else stays."""
    config, existed = _read(file)
    if not existed or "hooks" not in config:
        return False, None
    hooks = _without_ours(config["hooks"], file)
    updated = {**config, "hooks": hooks} if hooks else {k: v for k, v in config.items() if k != "hooks"}
    if updated == config:
        return False, None
    return True, _write(file, updated, existed)


def installed_hooks(file: Path) -> dict[str, list[str]]:
    """Event -> the commands of Spellbook's hooks in ``file`` (for doctor)."""
    try:
        config, _ = _read(file)
    except HookConfigError:
        return {}
    found: dict[str, list[str]] = {}
    hooks = config.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, dict) else []:
        for group in groups if isinstance(groups, list) else []:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if is_ours(hook):
                    found.setdefault(event, []).append(hook["command"])
    return found


def _without_ours(hooks: Any, file: Path) -> dict[str, Any]:
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise HookConfigError(f'"hooks" in {file} is not an object; nothing was written. Fix it by hand and retry.')
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            out[event] = groups
            continue
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept.append(group)
                continue
            rest = [h for h in inner if not is_ours(h)]
            if rest:
                kept.append({**group, "hooks": rest} if len(rest) != len(inner) else group)
        if kept:
            out[event] = kept
    return out


def _read(file: Path) -> tuple[dict[str, Any], bool]:
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}, False
    except (OSError, UnicodeDecodeError) as exc:
        raise HookConfigError(f"Cannot read {file} ({exc}); fix the file or its permissions and try again.") from exc
    if not text.strip():
        return {}, True
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookConfigError(
            f"{file} is not valid JSON (line {exc.lineno}: {exc.msg}); nothing was written. "
            "Fix it by hand (or restore a .bak copy) and run the command again."
        ) from exc
    if not isinstance(config, dict):
        raise HookConfigError(f"{file} is not a JSON object; nothing was written. Fix it by hand and retry.")
    return config, True


def _write(file: Path, config: dict[str, Any], existed: bool) -> Path | None:
    target = file.resolve() if file.is_symlink() else file
    backup = backup_copy(target) if existed else None  # never over an earlier one (Gemini: MCP entry, then hooks)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return backup
