"""Signing a browser in (guard.py says why it works this way): ``GET /signin?code=`` redeems a
one-time code, ``POST /signin`` takes the token pasted into the sign-in form. At 127.0.0.1 either
hands on to the pages' own name with a second code; there the session cookie is set, and the
browser goes on to ``/`` by a refresh from that page (a redirect would carry the cross-site start
of the chain along, and the browser would hold back the SameSite=Strict cookie)."""

from __future__ import annotations

from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.guard import TOKEN_FIELD
from spellbook.server.web.html import message, page, sign_in_form

USED = (
    "This sign-in address was used already or has expired (a code works once, for a minute). Run "
    "spellbook ui again, or paste the token."
)


async def redeem(ask: Ask) -> Answer:
    if not ask.guard.token:
        return ask.redirect("/")
    family = ask.guard.redeem(ask.query.get("code", ""), ask.headers)
    if family is None:
        return Answer(401, page("Sign in", "", sign_in_form(USED)).encode())
    return _signed_in(ask, family)


async def with_token(ask: Ask) -> Answer:
    refusal = ask.guard.origin_refusal(ask.headers)
    if refusal:
        return Answer(403, refusal.encode(), "text/plain; charset=utf-8")
    if not ask.guard.token:
        return ask.redirect("/")
    if not ask.guard.token_ok(ask.form.get(TOKEN_FIELD, "").strip()):
        return Answer(401, page("Sign in", "", sign_in_form("That is not this server's token.")).encode())
    return _signed_in(ask, None)


def _signed_in(ask: Ask, family: str | None) -> Answer:
    guard = ask.guard
    if not guard.on_page_host(ask.headers):
        return ask.redirect(f"http://{guard.page_host}/signin?code={guard.issue_code(family)}")
    cookie = guard.open_session(family)
    body = message("Signed in.", "ok") + '<p><a href="/">Continue to the overview</a></p>'
    return Answer(
        200, page("Signed in", "", body).encode(), headers=[(b"set-cookie", cookie), (b"refresh", b"0; url=/")]
    )
