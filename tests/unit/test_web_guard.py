"""The web view's gate (spellbook/server/web/guard.py) and escaping (html.py), without a server;
tests/e2e/test_web.py and tests/e2e/test_web_signin.py drive the same rules through a real server
and a real browser."""

from __future__ import annotations

from spellbook.server.web.guard import CODE_SECONDS, Guard, cookies
from spellbook.server.web.html import esc, markdown, url
from spellbook.server.web.memory import _render

TOKEN = "t" * 43
PAGES = "spellbook-0123456789abcdef.localhost:8765"
ORIGIN = "http://127.0.0.1:8765"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guard(token: str | None = TOKEN, clock: Clock | None = None) -> Guard:
    return Guard(token, {"127.0.0.1:8765", "localhost:8765"}, {ORIGIN}, PAGES, clock or Clock())


def session(g: Guard, family: str | None = None) -> dict[str, str]:
    """The headers of a browser that signed in on the pages' own name."""
    cookie = g.open_session(family).decode()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie and "Domain" not in cookie
    return {"host": PAGES, "cookie": "other=1; " + cookie.split(";")[0], "origin": f"http://{PAGES}"}


def test_a_code_works_once_and_expires() -> None:
    clock = Clock()
    g = guard(clock=clock)
    code = g.issue_code()
    assert TOKEN not in code and len(code) >= 32
    assert g.redeem(code, {}) is not None
    assert g.redeem(code, {}) is None  # once only
    late = g.issue_code()
    clock.now += CODE_SECONDS + 1
    assert g.redeem(late, {}) is None  # expired
    assert g.redeem("", {}) is None and g.redeem(TOKEN, {}) is None  # the token itself is no code
    assert g.sign_in_address("http://127.0.0.1:8765/").startswith("http://127.0.0.1:8765/signin?code=")
    assert TOKEN not in g.sign_in_address("http://127.0.0.1:8765/")
    assert guard(None).sign_in_address("http://127.0.0.1:8765/") == "http://127.0.0.1:8765/"


def test_a_second_use_ends_the_session_the_first_opened() -> None:
    """Someone who read the code first signed in with it; the browser's later use ends that session."""
    g = guard()
    code = g.issue_code()
    thief = session(g, g.redeem(code, {}))
    assert g.signed_in(thief)
    assert g.redeem(code, {"host": "127.0.0.1:8765"}) is None
    assert not g.signed_in(thief)
    mine = session(g, g.redeem(again := g.issue_code(), {}))
    assert g.redeem(again, mine) is not None and g.signed_in(mine)  # a reload by the browser that holds it


def test_the_cookie_is_random_per_start_and_counts_only_on_the_pages_name() -> None:
    a, b = guard(), guard()  # two starts with the same token
    browser = session(a)
    assert a.signed_in(browser) and not b.signed_in(browser)
    assert a.cookie != b.cookie and cookies(browser)[a.cookie] != cookies(session(b))[b.cookie]
    assert not a.signed_in({**browser, "host": "127.0.0.1:8765"})  # the same cookie at 127.0.0.1
    value = cookies(browser)[a.cookie]
    altered = value[:-1] + ("1" if value.endswith("0") else "0")  # (one value in 64 ends with 0)
    assert not a.signed_in({**browser, "cookie": f"{a.cookie}={altered}"})
    assert a.signed_in({"authorization": f"Bearer {TOKEN}", "host": "127.0.0.1:8765"})
    assert not a.signed_in({"authorization": f"Bearer {a.issue_code()}"})
    assert guard(None).signed_in({})  # --no-token: open, like /mcp


def test_host_is_checked_on_loopback_only() -> None:
    assert guard().host_ok({"host": "127.0.0.1:8765"}) and guard().host_ok({"host": PAGES.upper()})
    assert not guard().host_ok({"host": "spellbook-other.localhost:8765"})
    assert not guard().host_ok({"host": "evil.example"}) and not guard().host_ok({})
    assert Guard(TOKEN, None, set()).host_ok({"host": "anything"})


def test_a_change_needs_the_page_origin_and_the_csrf_token_of_this_browser() -> None:
    g = guard()
    mine = session(g)
    form = {"csrf": g.csrf(mine)}
    assert g.post_refusal(mine, form) is None
    assert "no Origin" in g.post_refusal({k: v for k, v in mine.items() if k != "origin"}, form)
    assert "evil" in g.post_refusal({**mine, "origin": "http://evil.example"}, form)
    assert "null" in g.post_refusal({**mine, "origin": "null"}, form)
    assert "CSRF" in g.post_refusal(mine, {})
    other = {**mine, "cookie": f"{g.cookie}=someone-else"}
    assert "CSRF" in g.post_refusal(other, form)  # bound to the cookie
    assert g.csrf(mine) != guard().csrf(mine)  # and to this start: another server with the cookie cannot make it


def test_text_from_the_vault_is_escaped() -> None:
    assert esc('<script>"x"</script>') == "&lt;script&gt;&quot;x&quot;&lt;/script&gt;"
    html = markdown('<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n[a](javascript:alert(3))')
    assert "<script" not in html and "<img" not in html and "href" not in html
    assert "&lt;script&gt;" in html
    assert url("/search", q='"><b>', tag=None) == "/search?q=%22%3E%3Cb%3E"


def test_links_in_notes_carry_noreferrer() -> None:
    html = markdown("[out](http://127.0.0.1:9/x) and <https://example.org/>")
    assert html.count('rel="noreferrer noopener"') == 2


def test_wikilinks_are_made_in_text_only() -> None:
    """A ``[[wikilink]]`` in a link's title, an image's alt text, code or a link's own text stays as
    written: replacing it there put an ``<a>`` inside an attribute and broke out of it."""
    text = (
        'See [[Note|the note]]. [a](http://x "[[Note]]") ![[[Note]]](i.png) `[[Note]]` [x [[Note]]](/y)'
        "\n\n```\n[[Note]]\n```\n\n[[Missing]]"
    )
    html = _render(text, [{"target": "Note", "id": "n1"}])
    assert html.count("<a") == 3 and html.count('<a class="wikilink" href="/memory/n1">the note</a>') == 1
    assert 'title="[[Note]]"' in html and 'alt="[[Note]]"' in html and "<code>[[Note]]</code>" in html
    assert "<code>[[Note]]\n</code>" in html and ">x [[Note]]</a>" in html and "[[Missing]]" in html
