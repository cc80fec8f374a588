"""``spellbook serve --http`` and ``spellbook ui``: the HTTP server (MCP at /mcp, the web view at /).

``ui`` starts the same server on loopback (a free port unless ``--port``), joining the index
owner if a Spellbook process already runs on the vault, and opens the browser once at
``/signin?code=...``: a one-time code this process makes, never the token (a browser's command line
is readable by every local user), which the page swaps for a session cookie (server/web/guard.py).
With ``--no-browser`` it prints that address on stdout instead.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from spellbook.cli.common import settings_from
from spellbook.config import Settings
from spellbook.errors import SpellbookError

log = logging.getLogger("spellbook")


def serve_http(
    settings: Settings,
    host: str,
    port: int,
    open_delay: float = 0.0,
    ready: Callable[[str], None] | None = None,
    warm_pages: bool = False,
    no_token: bool = False,
) -> int:
    """Serve MCP and the pages on ``host:port`` (0: a free port) until stopped; ``ready(address)``
    is called once the socket listens, with a sign-in address for the pages (a one-time code);
    ``warm_pages``: compute what the first pages need meanwhile; ``no_token`` (``--no-token``): no
    token on loopback, unless ``settings.token`` gives one."""
    import uvicorn

    from spellbook.server.http import check_bind, ensure_token, http_app, token_file
    from spellbook.server.hub import Hub
    from spellbook.server.tools import build_server
    from spellbook.vault.template import init_vault

    check_bind(host, settings.token)  # before anything is created
    if not settings.vault_dir.exists():
        init_vault(settings.vault_dir)
        log.info("created a new vault at %s from the template", settings.vault_dir)
    token = settings.token
    if not token:
        if no_token:
            log.warning(
                "HTTP without a token (--no-token): any user of this machine can call the tools and open the pages"
            )
        else:
            token = ensure_token(settings.index_path)
            log.info(
                "clients must send 'Authorization: Bearer <token>' (token in %s; `spellbook install "
                "<client> --http URL` writes it into the client's config)",
                token_file(settings.index_path),
            )
    sock = _listen(host, port)
    port = sock.getsockname()[1]
    hub = Hub(settings, open_delay=open_delay)
    app = http_app(build_server(hub), hub, host, port, token)
    hub.start(background=True)
    if warm_pages:
        from spellbook.server.web import warm

        threading.Thread(target=warm, args=(hub,), name="spellbook-web-warm", daemon=True).start()
    log.info(
        "serving %s at http://%s:%d/ (MCP: /mcp, legacy SSE: /sse, web view: /) (%s)",
        settings.vault_dir,
        host,
        port,
        hub.role,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    if ready is not None:
        address = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
        threading.Thread(
            target=_when_started, args=(server, lambda: ready(app.sign_in_address(address))), daemon=True
        ).start()
    try:
        server.run(sockets=[sock])
    finally:
        hub.close()
    return 0


def ui(args: argparse.Namespace) -> int:
    settings = settings_from(args, watch=False if args.no_watch else None)

    def opened(sign_in: str) -> None:
        if args.no_browser:
            print(sign_in, flush=True)
            return
        import webbrowser  # here: its import (and subprocess's) cost every command's start ~10 ms

        log.info("opening %s in your browser", sign_in.split("signin?", 1)[0])
        if not webbrowser.open(sign_in):
            print(f"Open this address in your browser: {sign_in}", file=sys.stderr, flush=True)

    return serve_http(settings, "127.0.0.1", args.port, ready=opened, warm_pages=True, no_token=args.no_token)


def add_ui_parser(sub: Any, vault_args: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("ui", help="open the web view of a vault in the browser (starts a loopback server)")
    vault_args(p)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the sign-in address instead of opening it")
    p.add_argument("--no-watch", action="store_true", help="do not watch the vault for changes")
    p.add_argument("--no-token", action="store_true", help="no token (unsafe on a shared machine)")
    p.set_defaults(run=ui)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SpellbookError(f"Cannot listen on {host}:{port} ({exc.strerror}); pick another --port.") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _when_started(server: Any, ready: Callable[[], None]) -> None:
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    ready()
