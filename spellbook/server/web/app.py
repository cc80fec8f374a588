"""The web view's ASGI app: the gate (guard.py) in front of starlette's router, its form parsing
and static files, and the hub calls.

Every page asks the hub (``hub.call``), never the engine: in ``spellbook ui`` joining a running
server the owner process answers, and the call runs in this server's scope (``serve --context``
/ ``--user``), so a scoped server's pages show only that scope. Calls are made as client ``web``
(the activity log records it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.formparsers import MultiPartException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from spellbook.engine.operations import operation
from spellbook.errors import ConflictError, NoteNotFoundError, SpellbookError, UnknownOperationError
from spellbook.scope import Actor, acting
from spellbook.server.hub import Hub
from spellbook.server.web.guard import Guard
from spellbook.server.web.html import message, page, sign_in_form

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 64 * 1024  # of a POST's body read; the rest is never read
MAX_FORM_FIELDS = 1000
STATIC = "/static/"  # the script and the style sheet: answered before signing in (no secrets in them)
OPEN_PATHS = frozenset({"/signin"})  # answered before signing in; their handlers check what they need
WEB_CLIENT = Actor(client="web")


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[bytes, bytes]] | None = None

    def response(self) -> Response:
        response = Response(self.body, self.status, media_type=self.content_type)
        response.raw_headers += self.headers or []
        return response


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
    """ASGI app for the pages: the gate, then starlette's router over ``routes`` ((method, path,
    handler), the path in starlette's syntax) and the static files. Every answer, the gate's and
    the static files' included, carries the guard's security headers."""

    def __init__(self, hub: Hub, guard: Guard, routes: list[tuple[str, str, Handler]]) -> None:
        self.hub = hub
        self.guard = guard
        self.router = ExceptionMiddleware(
            Router(  # the static files' 404 is an exception: plain text
                [
                    Route(path, self._endpoint(handler, path in OPEN_PATHS), methods=[method], name=handler.__name__)
                    for method, path, handler in routes
                ]
                + [Mount(STATIC.rstrip("/"), StaticFiles(packages=[("spellbook.server.web", "static")]))],
                redirect_slashes=False,
                default=_not_found,
            )
        )

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def send_secured(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.guard.headers()]}
            await send(message)

        refusal = self._gate(scope)
        if refusal is not None:
            await refusal.response()(scope, receive, send_secured)
        else:
            await self.router(scope, receive, send_secured)

    def _gate(self, scope: dict) -> Answer | None:
        """The answer for a request the gate stops (wrong Host, not signed in), or None."""
        headers = _headers(scope)
        if not self.guard.host_ok(headers):
            return _text(421, "Wrong Host header: open the page at http://127.0.0.1:PORT/ (or localhost).")
        path = scope["path"]
        if not path.startswith(STATIC) and path not in OPEN_PATHS and not self.guard.signed_in(headers):
            return _signed_out()
        return None

    def _endpoint(self, handler: Handler, open_path: bool) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            headers = _headers(request.scope)
            form: dict[str, str] = {}
            if request.method == "POST":
                try:
                    form = await _form(request)
                except MultiPartException as exc:
                    return _text(400, f"The form could not be read: {exc.message}").response()
                if not open_path:
                    refusal = self.guard.post_refusal(headers, form)
                    if refusal:
                        return _text(403, refusal).response()
            ask = Ask(
                self.hub,
                self.guard,
                headers,
                dict(request.query_params),
                form,
                request.path_params,
                post=request.method == "POST",
            )
            return (await self._run(handler, ask)).response()

        return endpoint

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


def _headers(scope: dict) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _text(status: int, text: str) -> Answer:
    return Answer(status, text.encode(), "text/plain; charset=utf-8")


def _signed_out() -> Answer:
    return Answer(401, page("Sign in", "", sign_in_form()).encode())


async def _not_found(scope: dict, receive: Any, send: Any) -> None:
    body = page("Not found", "", message(f"No page at {scope['path']}.", "error")).encode()
    await Answer(404, body).response()(scope, receive, send)


async def _form(request: Request) -> dict[str, str]:
    """A POST's form (starlette's parser, files refused), from at most ``MAX_FORM_BYTES`` of its
    body; repeated names are joined with a newline."""
    read = 0

    async def receive_capped() -> dict:
        nonlocal read
        got = await request.receive()
        if got["type"] != "http.request":
            return got
        body = got.get("body", b"")[: MAX_FORM_BYTES - read]
        read += len(body)
        return {**got, "body": body, "more_body": got.get("more_body", False) and read < MAX_FORM_BYTES}

    form = await Request(request.scope, receive_capped).form(
        max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_BYTES
    )
    return {key: "\n".join(v for v in form.getlist(key) if isinstance(v, str)) for key in form}
