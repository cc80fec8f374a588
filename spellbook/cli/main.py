"""The ``spellbook`` command: init, serve, ui, index, search, sync, stats.

Settings are built here once (flags over ``SPELLBOOK_*`` environment over defaults) and passed
down. Under ``serve`` nothing is written to stdout but MCP messages: logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from spellbook.cli.commands_exchange import export, import_
from spellbook.cli.commands_setup import doctor, install
from spellbook.cli.commands_web import add_ui_parser, serve_http
from spellbook.cli.common import ProgressBar, open_hub, running_owner, settings_from
from spellbook.embedders.registry import REGISTRY
from spellbook.errors import SpellbookError
from spellbook.version import __version__

log = logging.getLogger("spellbook")
OPEN_DELAY_SECONDS = 0.5  # serve: open the index just after the handshake (bench_core: tools/list time)


def run() -> None:
    """The ``spellbook`` command (the console script, ``python -m spellbook``): ``main``, then,
    after a command that closed everything it opened (``quick_exit``: an index, an import), out
    without the interpreter's teardown: its last garbage collection and module teardown took
    0.25-0.35 s after a 1,000-note import, for nothing left to save."""
    code, quick = _main(None)
    if quick:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    return _main(argv)[0]


def _main(argv: list[str] | None) -> tuple[int, bool]:
    """The command's exit code, and whether the process may leave without its teardown."""
    from spellbook.startup.heap import limit_arenas

    limit_arenas()  # before any thread: one C heap pool (spellbook/startup/heap.py)
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2, False
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(asctime)s spellbook %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("chromadb", "httpx", "httpx2", "mcp", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return args.run(args), getattr(args, "quick_exit", False)
    except SpellbookError as exc:
        print(f"spellbook: {exc}", file=sys.stderr)
        return 1, False
    except KeyboardInterrupt:
        return 130, False


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spellbook", description="Local-first memory server for AI agents.")
    parser.add_argument("--version", action="version", version=f"spellbook {__version__}")
    sub = parser.add_subparsers(dest="command")

    def vault_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--vault", type=Path, help="vault folder (default: $SPELLBOOK_VAULT or ./vault)")
        p.add_argument("--index-dir", type=Path, help="index folder (default: <vault>/.spellbook)")
        p.add_argument("--embedder", choices=list(REGISTRY), help="embedding model")
        p.add_argument("--chroma-url", help="use a Chroma server (http://127.0.0.1:8000) instead of the embedded index")
        p.add_argument("--context", help="scope: this project's memories and shared ones only ($SPELLBOOK_CONTEXT)")
        p.add_argument("--user", help="scope: this person's memories and shared ones only ($SPELLBOOK_USER)")
        p.add_argument("-v", "--verbose", action="store_true")

    p = sub.add_parser("init", help="create a vault from the template")
    p.add_argument("path", type=Path)
    p.set_defaults(run=_init)

    p = sub.add_parser("serve", help="run the MCP server over stdio")
    vault_args(p)
    p.add_argument("--no-watch", action="store_true", help="do not watch the vault for changes")
    p.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at /mcp (legacy SSE at /sse, the web view at /) instead of stdio",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1; others need SPELLBOOK_TOKEN)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument(
        "--no-token",
        action="store_true",
        help="HTTP on loopback without a bearer token (unsafe on a shared machine: any local user can call it)",
    )
    p.set_defaults(run=_serve)

    add_ui_parser(sub, vault_args)

    p = sub.add_parser("index", help="bring the index up to date with the vault")
    vault_args(p)
    p.add_argument("--rebuild", action="store_true", help="throw the index away and rebuild it")
    p.set_defaults(run=_index, quick_exit=True)

    p = sub.add_parser("search", help="search memories")
    vault_args(p)
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--mode", choices=["hybrid", "semantic", "keyword"], default="hybrid")
    p.add_argument("--category")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_search)

    for verb, text in (("install", "add Spellbook to an MCP client's config"), ("uninstall", "remove it again")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("client", choices=["claude-code", "claude-desktop", "cursor", "codex", "gemini"])
        p.add_argument(
            "--scope",
            choices=["user", "project"],
            default="user",
            help="user-wide config, or the project's (.mcp.json, .cursor/mcp.json, .codex/config.toml, "
            ".gemini/settings.json)",
        )
        p.add_argument("--name", default="spellbook", help="server name in the client's config")
        if verb == "install":
            p.add_argument(
                "--vault", type=Path, help="vault the client's server uses (default: $SPELLBOOK_VAULT or ./vault)"
            )
            p.add_argument("--http", metavar="URL", help="connect to a running `serve --http` instead of starting one")
            p.add_argument(
                "--token",
                help="bearer token for --http (default: $SPELLBOOK_TOKEN, else the token "
                "`serve --http` wrote in the vault's index folder)",
            )
            p.add_argument("--no-token", action="store_true", help="--http to a server started with --no-token")
            p.add_argument("--context", help="scope the client's server to this project (serve --context)")
            p.add_argument("--user", help="scope the client's server to this person (serve --user)")
            p.add_argument(
                "--hooks",
                action="store_true",
                help="claude-code: also install the session memory hooks (docs/sessions.md); codex and "
                "gemini get them always",
            )
            p.add_argument(
                "--prompt-recall",
                action="store_true",
                help="with the hooks: add the passages that answer each prompt (UserPromptSubmit; the "
                "default, docs/sessions.md)",
            )
            p.add_argument(
                "--no-prompt-recall",
                action="store_true",
                help="with the hooks: leave prompt recall off (SessionStart and capture only)",
            )
        p.set_defaults(run=install)

    p = sub.add_parser("doctor", help="check settings, embedder, clients, and that the index equals the vault")
    vault_args(p)
    p.add_argument("--repair", action="store_true", help="bring the index level with the vault")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=doctor)

    p = sub.add_parser("export", help="export memories as JSON (for import) or one markdown document")
    vault_args(p)
    p.add_argument("--format", choices=["json", "markdown"], default="json")
    p.add_argument("--out", type=Path, help="write to this file (default: print to stdout)")
    p.add_argument(
        "--force",
        "--overwrite",
        dest="force",
        action="store_true",
        help="replace --out if it exists (never a symlink, device or FIFO)",
    )
    p.add_argument("--category", help="only this category")
    p.add_argument("--topic", help="only this topic")
    p.set_defaults(run=export)

    p = sub.add_parser("import", help="import a Spellbook JSON export or an MCP memory server memory.jsonl")
    vault_args(p)
    p.add_argument("file", type=Path)
    p.add_argument(
        "--on-conflict",
        choices=["skip", "overwrite", "new_id"],
        default="skip",
        help="when a memory with the same id exists (default: skip)",
    )
    p.add_argument(
        "--format", choices=["auto", "json", "mcp-memory"], default="auto", help="file format (default: detect)"
    )
    p.add_argument("--dry-run", action="store_true", help="report what would happen; write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=import_, quick_exit=True)

    p = sub.add_parser("hook", help="run as a Claude Code hook (JSON on stdin): capture and recall sessions")
    vault_args(p)
    p.add_argument("event", help="SessionStart, UserPromptSubmit, Stop, PreCompact or SessionEnd")
    p.add_argument("--prompt-recall", action="store_true", help="UserPromptSubmit: add relevant memories")
    p.add_argument(
        "--from-plugin",
        action="store_true",
        help="run by the Claude Code plugin: stand down when the settings hooks are installed too",
    )
    p.add_argument(
        "--agent",
        choices=["claude-code", "codex", "gemini"],
        default="claude-code",
        help="the CLI running the hook: its event names, answer format and transcript format",
    )
    p.set_defaults(run=_hook)

    p = sub.add_parser("merge", help="merge memories into one (the first id, or --into, keeps its id and file)")
    vault_args(p)
    p.add_argument("ids", nargs="+", help="ids of the memories to merge (2 to 50)")
    p.add_argument("--into", help="id of the memory that keeps its id and file (default: the first id)")
    p.add_argument("--version", dest="expected_version", help="refuse if the survivor changed since this version")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_merge)

    p = sub.add_parser(
        "sync", help="one sync round with the vault's git remote: commit, fetch, merge, push (docs/sync.md)"
    )
    vault_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_sync)

    p = sub.add_parser("stats", help="index health and file problems")
    vault_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_stats)
    return parser


def _hook(args: argparse.Namespace) -> int:
    from spellbook.sessions.hook import run

    return run(args.event, args)  # logs every error to <index>/hooks.log, and exits 0


def _init(args: argparse.Namespace) -> int:
    from spellbook.vault.template import init_vault

    added = init_vault(args.path)
    print(f"Vault ready at {args.path.resolve()} ({len(added)} template files added).", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from spellbook.server.hub import Hub
    from spellbook.startup import front, on, reason
    from spellbook.vault.template import init_vault

    settings = settings_from(args, watch=False if args.no_watch else None)
    if args.http:
        return serve_http(settings, args.host, args.port, OPEN_DELAY_SECONDS, no_token=args.no_token)
    if not settings.vault_dir.exists():
        init_vault(settings.vault_dir)
        log.info("created a new vault at %s from the template", settings.vault_dir)
    if reason():
        log.info("start-up tricks off (%s): a plain start (docs/performance.md)", reason())
    # When the front answered the handshake from its cache, nothing waits for the MCP SDK's import
    # (~1 s) but the first tool call, which needs the engine too: open it now, beside the import.
    wire = front.running()
    hub = Hub(settings, open_delay=0 if wire is not None and wire.answered_early else OPEN_DELAY_SECONDS)
    hub.start(background=True)
    try:
        from spellbook.server.tools import build_server

        server = build_server(hub)
        log.info("serving %s over stdio (%s)", settings.vault_dir, hub.role)
        if sys.stdin.isatty():
            log.info(
                "this is an MCP server speaking JSON-RPC on stdin/stdout: connect it from an MCP client "
                "(see README, 'Connect your agent'); Ctrl-C stops it"
            )
        if sys.platform == "win32" or not on("front"):  # the front's wire needs POSIX descriptors
            server.run("stdio")
        else:
            server.run_stdio(front.running() or front.start())
    finally:
        hub.close()
    return 0


def _index(args: argparse.Namespace) -> int:
    from spellbook.engine import wipe_index

    bar = ProgressBar("indexing")
    started = time.perf_counter()
    settings = settings_from(args)
    if args.rebuild and running_owner(settings) is None:
        wipe_index(settings)  # nobody owns it: delete the folder's data outright
    first = not (settings.index_path / "catalog.sqlite3").exists()  # everything will be embedded
    hub = open_hub(args, progress=bar, embeds=first)
    try:
        if hub.role == "owner":
            result = hub.call("stats")
        else:
            print("A running Spellbook server owns this index; asking it to do the work.", file=sys.stderr)
            result = hub.call("rebuild_index" if args.rebuild else "reconcile")
            result = hub.call("stats")
    finally:
        bar.finish()
        hub.close()
    seconds = time.perf_counter() - started
    print(
        f"{result['notes']} notes, {result['chunks']} chunks indexed; {result['problems_total']} file problem(s); "
        f"{seconds:.1f} s.",
        file=sys.stderr,
    )
    if result.get("vectors_missing"):
        error = (result.get("embedder_status") or {}).get("last_error") or "The embedder failed (see the log above)."
        print(
            f"{result['vectors_missing']} sections have no vectors yet. {error} Keyword search finds them "
            "meanwhile; once the embedder answers, run `spellbook index` again (a running server does it itself).",
            file=sys.stderr,
        )
    for problem in result["problems"]:
        print(f"  skipped/warned {problem['path']}: {problem['problem']}", file=sys.stderr)
    return 0


def _search(args: argparse.Namespace) -> int:
    hub = open_hub(args)
    try:
        params: dict[str, Any] = {"query": args.query, "limit": args.limit, "mode": args.mode}
        if args.category:
            params["filter"] = {"category": args.category}
        result = hub.call("memorize", params)
    finally:
        hub.close()
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    if result.get("note"):
        print(f"note: {result['note']}", file=sys.stderr)
    if not result["results"]:
        print("No memories found.")
    for n, hit in enumerate(result["results"], 1):
        heading = f" › {hit['heading']}" if hit.get("heading") else ""
        print(f"{n}. [{hit['score']:.3f}] {hit['title']}  ({hit['path']}{heading})")
        print(f"   {hit['snippet']}")
    return 0


def _call(args: argparse.Namespace, method: str, params: dict[str, Any] | None = None) -> Any:
    """One call through the hub (to a running server, else in this process), and the hub closed."""
    hub = open_hub(args)
    try:
        return hub.call(method, params)
    finally:
        hub.close()


def _merge(args: argparse.Namespace) -> int:
    result = _call(args, "merge", {"ids": args.ids, "into": args.into, "version": args.expected_version})
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    for merged in result["merged"]:
        print(f"merged {merged['path']} -> {result['path']} (moved to {merged['trash_path']})")
    for note in result["relinked"]:
        print(f"relinked {note['path']} ({note['links']} links)")
    if result.get("note"):
        print(f"note: {result['note']}", file=sys.stderr)
    return 0


def _sync(args: argparse.Namespace) -> int:
    """Exit 0 when the branch and the remote's are at one commit afterwards, else 1 and one line why."""
    result = _call(args, "sync")
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    elif result["in_sync"]:
        copies = result["conflict_copies"]
        print(
            f"in sync at {result['head']}: {'pulled' if result['pulled'] else 'nothing pulled'}, "
            f"{'pushed' if result['pushed'] else 'nothing pushed'}, {result['changed_total']} file(s) changed"
            + (f", {len(copies)} conflict copies (see the Care page): {', '.join(copies)}" if copies else "")
        )
    if not result["in_sync"]:
        print(f"spellbook: sync: {result['error']}", file=sys.stderr)
        return 1
    return 0


def _stats(args: argparse.Namespace) -> int:
    result = _call(args, "stats")
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    for key in ("vault", "index", "embedder", "state", "files", "notes", "chunks", "vectors", "skipped", "warnings"):
        print(f"{key:>9}: {result[key]}")
    status = result.get("embedder_status") or {}
    if status.get("reachable") is False:
        print(f"  embedder failing: {status.get('last_error')}")
    if result.get("vectors_missing"):
        print(
            f"  {result['vectors_missing']} sections have no vectors yet; they are embedded once the embedder answers"
        )
    for problem in result["problems"]:
        print(f"  {problem['path']}: {problem['problem']}")
    spend = result.get("summariser") or {}
    if spend.get("model") or spend.get("tokens"):
        print(
            f"summariser: {spend.get('model') or 'off'}, {spend['tokens']:,} of {spend['daily_tokens']:,} tokens "
            f"today ({spend['calls']} calls, {spend['refused']} refused at the cap, {spend['fallbacks']} failed)"
        )
    for warning in result.get("setup_warnings", []):
        print(f"warning: {warning}")
    from spellbook.cli.doctor import sync_check

    for line in sync_check(result.get("sync")):
        print(f"     sync: {line['detail']}")
    return 0
