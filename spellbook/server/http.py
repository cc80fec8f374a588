"""MCP over streamable HTTP at ``/mcp``, and over the legacy SSE transport (``GET /sse`` opens the
event stream, ``POST /messages/?session_id=...`` carries the client's messages) for older clients,
with a health check, CORS preflight, bearer-token auth and Host/Origin checks. Many clients share
one HTTP server (and one index).

Safety rules, the same for both transports:
* Every MCP request (``/mcp``, ``/sse``, ``/messages/``) must carry ``Authorization: Bearer
  <token>``, on loopback too (any local user can reach a loopback port). The token is
  ``SPELLBOOK_TOKEN`` if set, else a random one made on first start and kept in
  ``<index folder>/http.token`` (0600), where ``spellbook install --http`` reads it.
  ``--no-token`` turns it off on loopback only (unsafe on a shared machine).
* Binds 127.0.0.1 by default. Binding any other address needs a token; ``--no-token`` is refused.
* On loopback, the SDK's DNS-rebinding protection accepts only loopback Host headers and
  loopback Origins, so a web page cannot drive the server.
* Request bodies are limited to 4 MiB (the SDK's limit).

Every other path is the web view (server/web/), behind the same Host check and the token or a
session cookie (a browser signs in with a one-time code, never the token in a URL; server/web/guard.py).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from spellbook.errors import SpellbookError
from spellbook.files import atomic_write, private_folder
from spellbook.server.hub import Hub
from spellbook.server.web import Guard, web_app
from spellbook.version import __version__

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"
TOKEN_FILE = "http.token"
MCP_PATHS = frozenset({"/mcp", SSE_PATH, MESSAGES_PATH.rstrip("/"), "/healthz"})
CORS_HEADERS = "authorization, content-type, mcp-session-id, mcp-protocol-version, last-event-id"


def check_bind(host: str, token: str | None) -> None:
    if host not in LOOPBACK and not token:
        raise SpellbookError(
            f"Refusing to listen on {host} without a token: anyone on the network could read and write "
            "your memories. Set SPELLBOOK_TOKEN to a long random string (clients send it as "
            "'Authorization: Bearer <token>'), or bind 127.0.0.1."
        )


def token_file(index_dir: Path) -> Path:
    return index_dir / TOKEN_FILE


def read_token(index_dir: Path) -> str | None:
    """The token ``serve --http`` made for this index, or None if there is none (or it is unsafe:
    a symbolic link, not a regular file, or readable by others)."""
    file = token_file(index_dir)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.geteuid():
            return None
        token = os.read(fd, 1024).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return token if len(token) >= 32 else None


def ensure_token(index_dir: Path) -> str:
    """This index's HTTP token: the one in ``<index>/http.token``, or a new random one written there
    0600. A file that others could read, or that is not a plain file of this user, is replaced."""
    existing = read_token(index_dir)
    if existing:
        return existing
    private_folder(index_dir)
    file = token_file(index_dir)
    if file.is_symlink() or (file.exists() and not file.is_file()):
        raise SpellbookError(f"{file} is not a regular file; remove it and start again.")
    token = secrets.token_urlsafe(32)
    existed = file.exists()  # unsafe: replace it; missing: create it, unless another start just did
    if not atomic_write(file, token + "\n", exclusive=not existed, mode=0o600):
        return read_token(index_dir) or ensure_token(index_dir)
    return token


def http_app(server: MCPServer, hub: Hub, host: str, port: int, token: str | None) -> Any:
    check_bind(host, token)
    loopback = host in LOOPBACK
    local_origins = [f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=loopback,
        allowed_hosts=[f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")],
        allowed_origins=local_origins,
    )
    app = server.streamable_http_app(transport_security=security, host=host)
    # The SSE app gets the same Host/Origin settings and the same 4 MiB body limit (the SDK's default).
    sse = server.sse_app(sse_path=SSE_PATH, message_path=MESSAGES_PATH, transport_security=security, host=host)
    page_host = f"spellbook-{secrets.token_hex(8)}.localhost:{port}" if loopback else None  # guard.py: why
    guard = Guard(token, set(security.allowed_hosts) if loopback else None, set(local_origins), page_host)
    pages = web_app(hub, guard)
    return _Gate(app, sse, hub, token, set(local_origins), TransportSecurityMiddleware(security), pages)


class _Gate:
    """ASGI wrapper: health check, CORS preflight and the bearer token, in front of the MCP apps.

    Streamable HTTP (``app``, which also runs the lifespan) gets everything but the legacy SSE
    paths, which go to ``sse``.
    """

    def __init__(
        self,
        app: Any,
        sse: Any,
        hub: Hub,
        token: str | None,
        origins: set[str],
        security: TransportSecurityMiddleware,
        pages: Any = None,
    ) -> None:
        self.app = app
        self.pages = pages
        self.sse = sse
        self.security = security
        self.hub = hub
        self.token = token
        self.origins = origins

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # RFC 9110 5.5: a field value excludes the whitespace around it (Mcp-Name: "  scribe  ").
        scope = {**scope, "headers": [(k, v.strip(b" \t")) for k, v in scope["headers"]]}
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path, method = scope["path"].rstrip("/") or "/", scope["method"]
        if self.pages is not None and path not in MCP_PATHS:
            await self.pages(scope, receive, send)  # the web view: its own gate (server/web/guard.py)
            return
        origin = headers.get("origin")
        cors = self._cors(origin)
        if method == "OPTIONS":
            await _send(send, 204, b"", cors + [(b"access-control-max-age", b"600")])
            return
        wants_stream = "text/event-stream" in headers.get("accept", "")
        if path == "/healthz" or (path == "/mcp" and method == "GET" and not wants_stream):
            await _send(send, 200, json.dumps(self._health()).encode(), cors, "application/json")
            return
        if self.token and not _authorized(headers.get("authorization", ""), self.token):
            body = json.dumps(
                {
                    "error": "missing or wrong bearer token (Authorization: Bearer <token>; the token is "
                    "SPELLBOOK_TOKEN or the one in <index folder>/http.token)"
                }
            )
            await _send(
                send,
                401,
                body.encode(),
                cors + [(b"www-authenticate", b'Bearer realm="spellbook"')],
                "application/json",
            )
            return

        async def send_with_cors(message: dict) -> None:
            if message["type"] == "http.response.start" and cors:
                message = {**message, "headers": list(message.get("headers", [])) + cors}
            await send(message)

        if path in (SSE_PATH, MESSAGES_PATH.rstrip("/")):
            await self._legacy_sse(scope, receive, send_with_cors)
        else:
            await self.app(scope, receive, send_with_cors)

    async def _legacy_sse(self, scope: dict, receive: Any, send: Any) -> None:
        """The SDK's SSE app, minus two quirks. It raises after refusing a bad Host/Origin on
        ``GET /sse`` (an error in the log for every refusal): check first and answer here. And when
        its stream ends at shutdown it answers a second time: the stream was the answer, drop that."""
        if scope["method"] == "GET":
            refusal = await self.security.validate_request(Request(scope, receive), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        responses, complete = 0, False

        async def send_first_response(message: dict) -> None:
            nonlocal responses, complete
            if message["type"] == "http.response.start":
                responses += 1
                if responses == 2 and not complete:  # end the stream properly instead
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    complete = True
            if responses <= 1:
                complete = message["type"] == "http.response.body" and not message.get("more_body", False)
                await send(message)

        await self.sse(scope, receive, send_first_response)

    def sign_in_address(self, base: str) -> str:
        """Where a browser signs in to the pages (a fresh one-time code each call; guard.py)."""
        return self.pages.guard.sign_in_address(base) if self.pages is not None else base

    def _cors(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        if not origin or origin not in self.origins:
            return []
        return [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
            (b"access-control-allow-headers", CORS_HEADERS.encode()),
            (b"access-control-expose-headers", b"mcp-session-id"),
            (b"vary", b"origin"),
        ]

    def _health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "name": "spellbook",
            "version": __version__,
            "role": self.hub.role,
            "endpoint": "/mcp",
            "sse_endpoint": SSE_PATH,
        }


def _authorized(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


async def _send(send: Any, status: int, body: bytes, headers: list, content_type: str = "text/plain") -> None:
    all_headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})
