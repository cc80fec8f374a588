"""Who may see the pages and who may change anything through them.

The pages sit behind the same gate as ``/mcp`` (server/http.py):

* **Host.** On loopback only a loopback ``Host`` header is answered (421 otherwise), so a web
  page on another site cannot reach the server by DNS rebinding.
* **Token.** When the server has a token (the default), a request needs either
  ``Authorization: Bearer <token>`` or the page cookie. A browser gets the cookie by opening
  ``/?token=<token>`` once (``spellbook ui`` opens exactly that): the server checks the token,
  sets ``spellbook_web`` (HttpOnly, SameSite=Strict, Path=/; a value derived from the token, not
  the token itself) and redirects to the same page without the token, so it stays out of the
  history and of any Referer. Without a token (``--no-token``, loopback only) the pages are open
  to every local user, like ``/mcp``.
* **Changes.** Restore, merge and erase are POST only, and a POST must come from the page's own
  origin (its ``Origin`` header is one of the server's loopback origins or
  ``SPELLBOOK_ALLOWED_ORIGINS``; a POST without ``Origin`` is refused) and carry the CSRF token
  the page put in its form (an HMAC of the session cookie, so another tab or site cannot know it).
  A refused POST changes nothing and answers 403.
* Every page is sent with a Content-Security-Policy that allows only the server's own scripts
  and styles (no inline script), ``X-Frame-Options: DENY`` and ``Referrer-Policy: same-origin`` (``no-referrer`` would make the browser send ``Origin: null`` with a form).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode

COOKIE = "spellbook_web"
CSRF_FIELD = "csrf"
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
     b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


@dataclass
class Guard:
    """The page gate's settings: the bearer token (None: open on loopback), the Host names the
    server answers to (None: any, off loopback) and the origins a POST may come from."""

    token: str | None
    hosts: set[str] | None
    origins: set[str]
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def __post_init__(self) -> None:
        if self.token:
            self.secret = hashlib.sha256(b"spellbook-web\0" + self.token.encode()).digest()

    # --- reading the request --------------------------------------------------------------------
    def host_ok(self, headers: dict[str, str]) -> bool:
        return self.hosts is None or headers.get("host", "") in self.hosts

    def cookie_value(self) -> str:
        return _mac(self.secret, "cookie")

    def signed_in(self, headers: dict[str, str]) -> bool:
        if not self.token:
            return True
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return True
        return hmac.compare_digest(cookies(headers).get(COOKIE, "").encode(), self.cookie_value().encode())

    def token_in_query(self, query: str) -> bool:
        """Does the URL carry the right ``token=``? (The first step of signing a browser in.)"""
        given = dict(parse_qsl(query)).get("token", "")
        return bool(self.token and given) and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf(self, headers: dict[str, str]) -> str:
        """The form token for this browser: bound to its cookie (or, without a token, to this server)."""
        return _mac(self.secret, "csrf\0" + cookies(headers).get(COOKIE, ""))

    def post_refusal(self, headers: dict[str, str], form: dict[str, str]) -> str | None:
        """Why a POST that would change something is refused, or None when it may go ahead."""
        origin = headers.get("origin")
        if not origin:
            return "The request has no Origin header; changes are accepted only from Spellbook's own pages."
        if origin not in self.origins:
            return f"Changes are accepted only from Spellbook's own pages, not from {origin}."
        if not hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), self.csrf(headers).encode()):
            return "The form's CSRF token is missing or wrong; reload the page and try again."
        return None

    # --- answering ------------------------------------------------------------------------------
    def sign_in_headers(self, path: str, query: str) -> list[tuple[bytes, bytes]]:
        """The cookie and the redirect to the same page, the token taken out of the URL."""
        rest = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"])
        target = "/" + quote(path.lstrip("/")) + (f"?{rest}" if rest else "")  # never //host: an off-site redirect
        cookie = f"{COOKIE}={self.cookie_value()}; HttpOnly; SameSite=Strict; Path=/"
        return [(b"location", target.encode()), (b"set-cookie", cookie.encode())]


def cookies(headers: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out.setdefault(name, value)
    return out


def _mac(secret: bytes, message: str) -> str:
    return hmac.new(secret, message.encode(), hashlib.sha256).hexdigest()
