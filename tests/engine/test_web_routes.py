"""The web view's app in process (spellbook/server/web/app.py: the gate in front of starlette's
router, form parsing and static files) over a real hub on a temporary vault, driven through
httpx's ASGI transport. The rules themselves are guard.py's (tests/unit/test_web_guard.py); real
servers and a real browser are tests/e2e/test_web*.py."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx2
import pytest

from spellbook.errors import NoteNotFoundError
from spellbook.server.web import web_app
from spellbook.server.web.app import MAX_FORM_BYTES
from spellbook.server.web.guard import Guard

TOKEN = "t" * 43
BASE = "http://127.0.0.1:8765"
BEARER = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def pages(hub) -> Iterator[tuple[Guard, dict[str, str]]]:
    guard = Guard(TOKEN, {"127.0.0.1:8765"}, {BASE})
    first = hub.call("scribe", {"text": "The cache keeps answers for a day.", "title": "Cache", "category": "notes"})
    second = hub.call(
        "scribe", {"text": "The cache keeps answers for one day.", "title": "Cache 2", "category": "notes"}
    )
    yield guard, {"app": web_app(hub, guard), "first": first["id"], "second": second["id"]}


def ask(app, method: str, path: str, **kwargs) -> httpx2.Response:
    async def run() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as client:
            return await client.request(method, path, **kwargs)

    return anyio.run(run)


def exists(hub, note_id: str) -> bool:
    try:
        return bool(hub.call("get_memories", {"ids": [note_id]}))
    except NoteNotFoundError:
        return False


def test_each_page_answers_signed_in_and_each_answer_carries_the_security_headers(pages) -> None:
    _guard, p = pages
    for path in ["/", "/activity", "/search?q=cache", "/graph", "/care", f"/memory/{p['first']}"]:
        answer = ask(p["app"], "GET", path, headers=BEARER)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert (
            answer.headers["x-frame-options"] == "DENY"
            and "script-src 'self'" in answer.headers["content-security-policy"]
        )
    missing = ask(p["app"], "GET", "/nowhere", headers=BEARER)
    assert missing.status_code == 404 and "No page at /nowhere." in missing.text
    assert missing.headers["cache-control"] == "no-store"
    assert ask(p["app"], "GET", f"/memory/{p['first']}/diff/not-hex", headers=BEARER).status_code == 404
    assert ask(p["app"], "GET", "/activity/", headers=BEARER).status_code == 404  # no redirect to another path


def test_a_change_is_never_made_by_get_and_the_answer_says_which_method_is(pages) -> None:
    _, p = pages
    answer = ask(p["app"], "GET", f"/memory/{p['first']}/erase", headers=BEARER)
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.headers["x-frame-options"] == "DENY"


def test_the_gate_comes_before_the_routes(pages) -> None:
    _, p = pages
    wrong_host = ask(p["app"], "GET", "/", headers={**BEARER, "host": "evil.example:8765"})
    assert wrong_host.status_code == 421 and wrong_host.headers["x-frame-options"] == "DENY"
    for path in ["/", "/nowhere", f"/memory/{p['first']}", "/activity/"]:
        signed_out = ask(p["app"], "GET", path)
        assert signed_out.status_code == 401 and "Sign in" in signed_out.text, path
    assert ask(p["app"], "GET", "/", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert ask(p["app"], "GET", "/?token=" + TOKEN).status_code == 401  # never the token in a URL
    signin = ask(p["app"], "GET", "/signin?code=made-up")
    assert signin.status_code == 401 and "used already or has expired" in signin.text


def test_the_script_and_style_sheet_are_served_to_anyone_and_nothing_else_is(pages) -> None:
    _, p = pages
    script = ask(p["app"], "GET", "/static/graph.js")
    style = ask(p["app"], "GET", "/static/style.css")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"] and script.content
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert script.headers["x-content-type-options"] == "nosniff" and "content-security-policy" in style.headers
    for path in ["/static/missing.js", "/static/", "/static/%2e%2e/app.py", "/static/..%2fapp.py"]:
        assert ask(p["app"], "GET", path).status_code == 404, path
    assert ask(p["app"], "POST", "/static/graph.js").status_code == 405


def test_a_post_needs_the_pages_origin_and_its_csrf_token_within_the_form_limit(pages, hub) -> None:
    guard, p = pages
    erase = f"/memory/{p['first']}/erase"
    csrf = guard.csrf(BEARER)
    assert ask(p["app"], "POST", erase, headers=BEARER, data={"csrf": csrf, "confirm": "yes"}).status_code == 403
    cross = {**BEARER, "origin": "http://evil.example"}
    assert ask(p["app"], "POST", erase, headers=cross, data={"csrf": csrf, "confirm": "yes"}).status_code == 403
    own = {**BEARER, "origin": BASE}
    assert ask(p["app"], "POST", erase, headers=own, data={"confirm": "yes", "csrf": "0" * 64}).status_code == 403
    late = {"pad": "x" * MAX_FORM_BYTES, "confirm": "yes", "csrf": csrf}  # the token past the part read
    assert ask(p["app"], "POST", erase, headers=own, data=late).status_code == 403
    upload = ask(
        p["app"], "POST", erase, headers=own, data={"csrf": csrf, "confirm": "yes"}, files={"note": ("x.md", b"# x")}
    )
    assert upload.status_code == 400 and "form could not be read" in upload.text
    assert exists(hub, p["first"])  # nothing was erased
    done = ask(p["app"], "POST", erase, headers=own, data={"csrf": csrf, "confirm": "yes"})
    assert done.status_code == 200 and "Erased" in done.text and done.headers["x-frame-options"] == "DENY"
    assert not exists(hub, p["first"])


def test_repeated_form_fields_are_read_as_lines(pages, hub) -> None:
    guard, p = pages
    own = {**BEARER, "origin": BASE}
    form = [("csrf", guard.csrf(BEARER)), ("ids", p["first"]), ("ids", p["second"]), ("into", p["first"])]
    merged = ask(
        p["app"],
        "POST",
        "/care/merge",
        headers={**own, "content-type": "application/x-www-form-urlencoded"},
        content="&".join(f"{k}={v}" for k, v in form),
    )
    assert merged.status_code == 303 and merged.headers["location"].startswith(f"/memory/{p['first']}")
    assert exists(hub, p["first"]) and not exists(hub, p["second"])
