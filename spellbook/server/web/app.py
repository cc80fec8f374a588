"""The web view's ASGI app: the gate (guard.py), the routes, static files, and the hub calls.

Every page asks the hub (``hub.call``), never the engine: in ``spellbook ui`` joining a running
server the owner process answers, and the call runs in this server's scope (``serve --context``
/ ``--user``), so a scoped server's pages show only that scope. Calls are made as client ``web``
(the activity log records it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

import anyio

from spellbook.engine.operations import operation
from spellbook.errors import ConflictError, NoteNotFoundError, SpellbookError, UnknownOperationError
from spellbook.scope import Actor, acting
from spellbook.server.hub import Hub
from spellbook.server.web.guard import Guard
from spellbook.server.web.html import message, page, sign_in_form

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 64 * 1024
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
OPEN_PATHS = frozenset({"/signin"})  # answered before signing in; their handlers check what they need
WEB_CLIENT = Actor(client="web")


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[bytes, bytes]] | None = None


@dataclass
class Ask:
    """One request, as a page handler sees it."""

    hub: Hub
    guard: Guard
    headers: dict[str, str]
    query: dict[str, str]
    form: dict[str, str]
    params: dict[str, str]  # from the path
    post: bool = False  # a POST, which the guard checked (a same-origin form with the CSRF token)

    @property
    def csrf(self) -> str:
        return self.guard.csrf(self.headers)

    @property
    def scope(self) -> str | None:
        s = self.hub.settings
        parts = [f"{name} {value}" for name, value in (("context", s.context), ("user", s.user)) if value]
        return ", ".join(parts) or None

    def scope_filter(self) -> dict[str, str]:
        """The scope a page was asked to show (``?context=&user=``: that scope's memories and the
        shared ones); a scoped server always shows its own scope, and ignores these."""
        if self.scope:
            return {}
        return {k: v for k in ("context", "user") if (v := " ".join((self.query.get(k) or "").split()))}

    async def call(self, method: str, **params: Any) -> Any:
        """An operation through the hub, as client ``web``. One that writes (engine/operations.py)
        only from a POST: a page that a GET shows changes nothing."""
        if operation(method).writes and not self.post:
            raise PermissionError(f"{method} writes; a page answering a GET may not call it")
        params = {k: v for k, v in params.items() if v is not None}

        def run() -> Any:
            with acting(WEB_CLIENT):
                return self.hub.call(method, params)

        return await anyio.to_thread.run_sync(run)

    async def gather(self, *jobs: Callable[[], Awaitable[Any]]) -> list[Any]:
        """Run several hub calls at once (git, SQLite and numpy release the GIL); their answers in
        order. The first error is raised."""
        out: list[Any] = [None] * len(jobs)

        async def one(i: int, job: Callable[[], Awaitable[Any]]) -> None:
            out[i] = await job()

        try:
            async with anyio.create_task_group() as group:
                for i, job in enumerate(jobs):
                    group.start_soon(one, i, job)
        except BaseExceptionGroup as group_error:  # the page reports the first, as for a single call
            raise group_error.exceptions[0] from None
        return out

    def html(self, title: str, active: str, body: str, status: int = 200, script: str | None = None) -> Answer:
        return Answer(status, page(title, active, body, self.scope, script).encode())

    def redirect(self, target: str) -> Answer:
        return Answer(303, b"", headers=[(b"location", target.encode())])


Handler = Callable[[Ask], Awaitable[Answer]]


class WebApp:
    """ASGI app for the pages; ``routes`` maps (method, path pattern) to a handler."""

    def __init__(self, hub: Hub, guard: Guard, routes: list[tuple[str, str, Handler]]) -> None:
        self.hub = hub
        self.guard = guard
        self.routes = [(method, re.compile(f"^{pattern}$"), handler) for method, pattern, handler in routes]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        answer = await self._answer(scope, receive)
        headers = [(b"content-type", answer.content_type.encode()), (b"content-length", str(len(answer.body)).encode()),
                   *self.guard.headers(), *(answer.headers or [])]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    async def _answer(self, scope: dict, receive: Any) -> Answer:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        query_string = scope.get("query_string", b"").decode("latin-1")
        if not self.guard.host_ok(headers):
            return _text(421, "Wrong Host header: open the page at http://127.0.0.1:PORT/ (or localhost).")
        if path.startswith("/static/") and method == "GET":
            return _static(path.removeprefix("/static/"))
        open_path = path in OPEN_PATHS
        if not open_path and not self.guard.signed_in(headers):
            return _signed_out()
        for verb, pattern, handler in self.routes:
            found = pattern.match(path)
            if found and verb == method:
                form = await _form(receive) if method == "POST" else {}
                if method == "POST" and not open_path:
                    refusal = self.guard.post_refusal(headers, form)
                    if refusal:
                        return _text(403, refusal)
                ask = Ask(self.hub, self.guard, headers, dict(parse_qsl(query_string)), form, found.groupdict(),
                          post=method == "POST")
                return await self._run(handler, ask)
        if any(p.match(path) for _, p, _ in self.routes):
            return _text(405, f"{method} is not allowed here.")
        return Answer(404, page("Not found", "", message(f"No page at {path}.", "error")).encode())

    async def _run(self, handler: Handler, ask: Ask) -> Answer:
        try:
            return await handler(ask)
        except UnknownOperationError as exc:  # e.g. an owner process of an older version (engine/operations.py)
            return ask.html("Not available", "", message(str(exc), "error"), 501)
        except ConflictError as exc:
            return ask.html("Changed meanwhile", "", message(str(exc), "error"), 409)
        except NoteNotFoundError as exc:
            return ask.html("Not found", "", message(str(exc), "error"), 404)
        except SpellbookError as exc:
            return ask.html("Could not do that", "", message(str(exc), "error"), 400)
        except Exception:
            log.exception("web page %s failed", handler.__name__)
            return ask.html("Error", "", message("Something went wrong; the server log has the details.", "error"), 500)


def _text(status: int, text: str) -> Answer:
    return Answer(status, text.encode(), "text/plain; charset=utf-8")


def _signed_out() -> Answer:
    return Answer(401, page("Sign in", "", sign_in_form()).encode())


def _static(name: str) -> Answer:
    suffix = name[name.rfind("."):] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        return _text(404, "No such file.")
    try:
        data = resources.files("spellbook.server.web").joinpath("static", name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return _text(404, "No such file.")
    return Answer(200, data, STATIC_TYPES[suffix])


async def _form(receive: Any) -> dict[str, str]:
    """An urlencoded POST body (at most ``MAX_FORM_BYTES``); repeated names are joined with a newline."""
    body = b""
    while True:
        message_ = await receive()
        body += message_.get("body", b"")
        if len(body) > MAX_FORM_BYTES or not message_.get("more_body"):
            break
    out: dict[str, str] = {}
    for key, value in parse_qsl(body[:MAX_FORM_BYTES].decode("utf-8", "replace"), keep_blank_values=True):
        out[key] = f"{out[key]}\n{value}" if key in out else value
    return out
