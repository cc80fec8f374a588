"""Signing a browser in (guard.py says why it works this way): ``GET /signin?code=`` redeems a
one-time code, ``POST /signin`` takes the token pasted into the sign-in form; either sets the page
cookie and redirects to ``/``, so no code stays in the address."""

from __future__ import annotations

from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.guard import TOKEN_FIELD
from spellbook.server.web.html import page, sign_in_form

USED = ("This sign-in address was used already or has expired (a code works once, for a minute). Run "
        "spellbook ui again, or paste the token.")


async def redeem(ask: Ask) -> Answer:
    if not ask.guard.token:
        return ask.redirect("/")
    if not ask.guard.redeem(ask.query.get("code", "")):
        return Answer(401, page("Sign in", "", sign_in_form(USED)).encode())
    return _signed_in(ask)


async def with_token(ask: Ask) -> Answer:
    refusal = ask.guard.origin_refusal(ask.headers)
    if refusal:
        return Answer(403, refusal.encode(), "text/plain; charset=utf-8")
    if not ask.guard.token:
        return ask.redirect("/")
    if not ask.guard.token_ok(ask.form.get(TOKEN_FIELD, "").strip()):
        return Answer(401, page("Sign in", "", sign_in_form("That is not this server's token.")).encode())
    return _signed_in(ask)


def _signed_in(ask: Ask) -> Answer:
    return Answer(303, b"", headers=[(b"location", b"/"), (b"set-cookie", ask.guard.cookie())])
