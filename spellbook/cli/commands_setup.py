"""`spellbook install`, `uninstall` and `doctor`: MCP client configs, session hooks, health checks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spellbook.cli.common import settings_from
from spellbook.errors import SpellbookError


def install(args: argparse.Namespace) -> int:
    from spellbook.cli import clients

    if args.command == "uninstall":
        result = clients.uninstall(args.client, scope=args.scope, name=args.name)
        print(
            f"{'removed from' if result.changed else 'not configured in'} {result.path}"
            + (f" (backup: {result.backup})" if result.backup else "")
        )
        if args.client in ("claude-code", "codex", "gemini"):
            install_hooks(args, remove=True)
        return 0
    if args.client == "claude-code" and (args.hooks or args.prompt_recall):
        _refuse_beside_plugin()
    settings = settings_from(args)  # SPELLBOOK_VAULT and SPELLBOOK_TOKEN under the flags
    token = args.token or (settings.token if args.http else None)
    if args.http and not token and not args.no_token:
        from spellbook.server.http import read_token, token_file

        index = settings.index_path
        token = read_token(index)
        if not token:
            raise SpellbookError(
                f"No token for {args.http}: `spellbook serve --http` writes one to {token_file(index)} on its first "
                "start (pass the same --vault here), or pass --token (or --no-token for a server started with it)."
            )
    vault = None if args.http else settings.vault
    entry = clients.server_entry(
        command=clients.default_command(),
        vault=vault,
        http_url=args.http,
        token=token,
        context=args.context,
        user=args.user,
    )
    result = clients.install(args.client, scope=args.scope, name=args.name, entry=entry)
    print(
        f"{'configured' if result.changed else 'already configured:'} {args.name} in {result.path}"
        + (f" (backup: {result.backup})" if result.backup else "")
    )
    if result.private_from is not None:
        print(
            f"{result.path} holds the token now: made it readable by you only "
            f"({result.private_from & 0o777:o} -> {(result.private_from & 0o700):o}).",
            file=sys.stderr,
        )
    if token and args.scope == "project":
        print("warning: the token is now in a project file; keep that file out of git.", file=sys.stderr)
    if args.client in ("codex", "gemini") or args.hooks or args.prompt_recall:
        if args.client not in ("claude-code", "codex", "gemini"):
            raise SpellbookError(f"--hooks is for claude-code, codex and gemini: {args.client} has no session hooks.")
        install_hooks(args, vault=vault)
    print(f"Restart {args.client} to load it.", file=sys.stderr)
    if args.client in _BEFORE_IT_RUNS:
        print(_BEFORE_IT_RUNS[args.client], file=sys.stderr)
    return 0


_BEFORE_IT_RUNS = {
    "codex": "Codex runs new hooks only once you trust them: open /hooks in Codex and trust Spellbook's.",
    "gemini": "Gemini starts MCP servers and hooks only in folders you trust (it asks on its first start there).",
}


def _refuse_beside_plugin() -> None:
    """The plugin brings the same hooks: both would capture every session twice. Checked before anything is written."""
    from spellbook.sessions.install import plugin_ids

    plugin = plugin_ids()
    if plugin:
        raise SpellbookError(
            f"The Spellbook plugin ({', '.join(plugin)}) is installed in Claude Code and runs the session hooks "
            f"already; installing them in the settings too would capture every session twice. Nothing was written. "
            f"Keep the plugin (drop --hooks), or `claude plugin uninstall {plugin[0]}` first."
        )


def install_hooks(args: argparse.Namespace, vault: Path | None = None, remove: bool = False) -> None:
    from spellbook.cli import clients
    from spellbook.sessions import install as hooks

    agent = args.client if args.client in ("codex", "gemini") else None
    if agent:
        from spellbook.sessions import agents

        file = agents.hooks_path(agent, args.scope)
    else:
        file = hooks.settings_path(args.scope)
    if remove:
        changed, backup = hooks.uninstall_hooks(file)
        if changed:
            print(f"removed the session hooks from {file}" + (f" (backup: {backup})" if backup else ""))
        return
    if vault is None:  # --http: the hooks still need the vault the server serves
        vault = settings_from(args).vault
    # Claude Code: on unless --no-prompt-recall (docs/sessions.md, "Prompt recall"); Codex, Gemini: when asked
    recall = not getattr(args, "no_prompt_recall", False) and (not agent or bool(getattr(args, "prompt_recall", False)))
    if agent:
        commands = agents.hook_commands(agent, clients.default_command(), vault, prompt_recall=recall)
        changed, backup = hooks.install_hooks(file, commands, agents.TIMEOUTS[agent])
    else:
        commands = hooks.hook_commands(clients.default_command(), vault, prompt_recall=recall)
        changed, backup = hooks.install_hooks(file, commands)
    print(
        f"{'configured' if changed else 'already configured:'} session hooks ({', '.join(commands)}) in {file}"
        + (f" (backup: {backup})" if backup else "")
    )


def doctor(args: argparse.Namespace) -> int:
    from spellbook.cli import doctor
    from spellbook.config import SettingsError

    try:
        settings = settings_from(args)
    except SettingsError as exc:
        checks = [doctor.check("settings", "fail", "; ".join(exc.problems), "fix these environment variables or flags")]
        return print_doctor({"consistent": False, "checks": checks}, args)
    config = doctor.config_checks(settings)
    client_checks = doctor.client_checks(settings) + doctor.hook_checks(settings)
    if any(c["status"] == "fail" for c in config):
        return print_doctor({"consistent": False, "checks": config + client_checks}, args)
    from spellbook.server.hub import Hub

    # Open without the start-up reconcile, so the check sees the index as it was.
    hub = Hub(settings.model_copy(update={"watch": False}), watch=False, reconcile_on_open=False, warm_up=False)
    hub.start(background=False)
    try:
        probe = hub.call("probe_embedder")  # in the process that owns the index: the server's embedder
        report = hub.call("repair" if args.repair else "check")
        if args.repair:
            probe["vectors_missing"] = report.get("counts", {}).get("vectors_missing", 0)
        config += doctor.embedder_check(probe) + doctor.id_check(report)
        config += doctor.sync_check(hub.call("stats").get("sync"))
    except SpellbookError as exc:  # the index cannot be opened: say why, with the other checks
        report = {"consistent": False}
        config.append(doctor.check("index", "fail", str(exc)))
    finally:
        hub.close()
    return print_doctor({**report, "checks": config + client_checks}, args)


def print_doctor(report: dict[str, Any], args: argparse.Namespace) -> int:
    """The index verdict first, then every other check with what to fix. Work a stopped owner left
    pending (the next start does it) is said, and fails nothing; drift fails (``Maintenance.check``)."""
    failed = report.get("drift", not report["consistent"]) or any(c["status"] == "fail" for c in report["checks"])
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return 1 if failed else 0
    if "files_in_vault" in report:
        drift = report["drift"]
        verdict = (
            "index == vault"
            if report["consistent"]
            else "index differs from the vault"
            if drift
            else "index == vault once pending work is done"
        )
        print(f"{verdict}: {report['files_in_vault']} files in the vault, {report['files_indexed']} indexed")
        for key, count in report["counts"].items():
            if count and key != "ids_read_as_numbers":  # a check of its own, below
                print(f"  {key.replace('_', ' ')}: {count}")
        for key, what in (
            ("changed_unseen", "changed with the size and mtime the index has"),
            ("vectors_lost_in", "vectors lost behind the index's back"),
        ):
            if report.get(key):
                print(f"  {what}: {', '.join(report[key][:5])}{' ...' if len(report[key]) > 5 else ''}")
        if report["identity_problem"]:
            print(f"  index must be rebuilt: {report['identity_problem']}")
        for problem in report["problems"]:
            print(f"  skipped/warned {problem['path']}: {problem['problem']}")
        if not report["consistent"] and not drift:
            print(
                "pending: files changed since the index last saw them and vectors a stopped server had not "
                "written yet; the next start of Spellbook (or `spellbook index`) does that work. Nothing to repair."
            )
        if drift and not args.repair:
            print("Run `spellbook doctor --repair` to fix it.")
    for item in report["checks"]:
        print(f"{item['status'].upper():<5} {item['check']}: {item['detail']}")
        if item.get("fix") and item["status"] != "ok":
            print(f"      -> {item['fix']}")
    return 1 if failed else 0
