"""The web view's gate (spellbook/server/web/guard.py) and escaping (html.py), without a server;
tests/e2e/test_web.py drives the same rules through a real browser."""

from __future__ import annotations

from spellbook.server.web.guard import CODE_SECONDS, COOKIE, Guard
from spellbook.server.web.html import esc, markdown, url
from spellbook.server.web.memory import _render

TOKEN = "t" * 43
ORIGIN = "http://127.0.0.1:8765"


def guard(token: str | None = TOKEN) -> Guard:
    return Guard(token, {"127.0.0.1:8765", "localhost:8765"}, {ORIGIN})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_code_works_once_and_expires() -> None:
    clock = Clock()
    g = Guard(TOKEN, {"127.0.0.1:8765"}, {ORIGIN}, clock)
    code = g.issue_code()
    assert TOKEN not in code and len(code) >= 32
    assert g.redeem(code) and not g.redeem(code)  # once only
    late = g.issue_code()
    clock.now += CODE_SECONDS + 1
    assert not g.redeem(late)  # expired
    assert not g.redeem("") and not g.redeem(TOKEN)  # the token itself is no code
    assert g.sign_in_address("http://127.0.0.1:8765/").startswith("http://127.0.0.1:8765/signin?code=")
    assert TOKEN not in g.sign_in_address("http://127.0.0.1:8765/")
    assert guard(None).sign_in_address("http://127.0.0.1:8765/") == "http://127.0.0.1:8765/"


def test_the_cookie_is_not_the_token() -> None:
    g = guard()
    cookie = g.cookie().decode()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    value = cookie.split(";")[0].split("=", 1)[1]
    assert g.signed_in({"cookie": f"other=1; {COOKIE}={value}"})
    assert g.signed_in({"authorization": f"Bearer {TOKEN}"})
    assert not g.signed_in({"authorization": f"Bearer {g.issue_code()}"})
    assert not g.signed_in({"cookie": f"{COOKIE}={value[:-1]}0"})
    assert guard(None).signed_in({})  # --no-token: open, like /mcp


def test_host_is_checked_on_loopback_only() -> None:
    assert guard().host_ok({"host": "127.0.0.1:8765"})
    assert not guard().host_ok({"host": "evil.example"}) and not guard().host_ok({})
    assert Guard(TOKEN, None, set()).host_ok({"host": "anything"})


def test_a_change_needs_the_page_origin_and_the_csrf_token_of_this_browser() -> None:
    g = guard()
    mine = {"cookie": f"{COOKIE}={g.cookie_value()}", "origin": ORIGIN}
    form = {"csrf": g.csrf(mine)}
    assert g.post_refusal(mine, form) is None
    assert "no Origin" in g.post_refusal({k: v for k, v in mine.items() if k != "origin"}, form)
    assert "evil" in g.post_refusal({**mine, "origin": "http://evil.example"}, form)
    assert "null" in g.post_refusal({**mine, "origin": "null"}, form)
    assert "CSRF" in g.post_refusal(mine, {})
    other = {"cookie": f"{COOKIE}=someone-else", "origin": ORIGIN}
    assert "CSRF" in g.post_refusal(other, form)  # bound to the cookie
    assert g.csrf(mine) != guard("u" * 43).csrf(mine)


def test_text_from_the_vault_is_escaped() -> None:
    assert esc('<script>"x"</script>') == "&lt;script&gt;&quot;x&quot;&lt;/script&gt;"
    html = markdown('<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n[a](javascript:alert(3))')
    assert "<script" not in html and "<img" not in html and "href" not in html
    assert "&lt;script&gt;" in html
    assert url("/search", q='"><b>', tag=None) == "/search?q=%22%3E%3Cb%3E"


def test_wikilinks_are_made_in_text_only() -> None:
    """A ``[[wikilink]]`` in a link's title, an image's alt text, code or a link's own text stays as
    written: replacing it there put an ``<a>`` inside an attribute and broke out of it."""
    text = ('See [[Note|the note]]. [a](http://x "[[Note]]") ![[[Note]]](i.png) `[[Note]]` [x [[Note]]](/y)'
            "\n\n```\n[[Note]]\n```\n\n[[Missing]]")
    html = _render(text, [{"target": "Note", "id": "n1"}])
    assert html.count("<a") == 3 and html.count('<a class="wikilink" href="/memory/n1">the note</a>') == 1
    assert 'title="[[Note]]"' in html and 'alt="[[Note]]"' in html and "<code>[[Note]]</code>" in html
    assert "<code>[[Note]]\n</code>" in html and ">x [[Note]]</a>" in html and "[[Missing]]" in html
