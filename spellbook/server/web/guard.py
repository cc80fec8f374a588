"""Who may see the pages and who may change anything through them.

The pages sit behind the same Host check as ``/mcp`` (server/http.py), and their own sign-in:

* **Host.** On loopback only a loopback ``Host`` header is answered (421 otherwise), so a web
  page on another site cannot reach the server by DNS rebinding.
* **Token.** When the server has a token (the default), a request needs either
  ``Authorization: Bearer <token>`` or the page cookie. The token never goes into a URL:
  ``?token=`` signs nobody in. Without a token (``--no-token``, loopback only) the pages are open
  to every local user, like ``/mcp``.
* **One-time codes.** A browser signs in with a code: ``spellbook ui`` (the process that runs this
  server) makes one and opens ``/signin?code=...``; a person who has the token pastes it into the
  sign-in form (a POST). A code is random, works once, lasts ``CODE_SECONDS``, and opens only the
  pages (``/mcp`` takes only the bearer token). Redeemed, it sets ``spellbook_web`` (HttpOnly,
  SameSite=Strict, Path=/; a value derived from the token, not the token itself) and redirects to
  ``/``, so the address left in the history holds a used code.
* **Changes.** Restore, merge and erase are POST only, and a POST must come from the page's own
  origin (its ``Origin`` header is one of the server's loopback origins or
  ``SPELLBOOK_ALLOWED_ORIGINS``; a POST without ``Origin`` is refused) and carry the CSRF token
  the page put in its form (an HMAC of the session cookie, so another tab or site cannot know it).
  A refused POST changes nothing and answers 403.
* Every page is sent with a Content-Security-Policy that allows only the server's own scripts
  and styles (no inline script), ``X-Frame-Options: DENY`` and ``Referrer-Policy: same-origin``
  (``no-referrer`` would make the browser send ``Origin: null`` with a form).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "spellbook_web"
CSRF_FIELD = "csrf"
TOKEN_FIELD = "token"
CODE_SECONDS = 60.0
MAX_CODES = 64  # outstanding codes; the oldest go first
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
class _Code:
    expires: float
    used: bool = False


class Guard:
    """The page gate: the bearer token (None: open on loopback), the Host names the server answers
    to (None: any, off loopback) and the origins a POST may come from."""

    def __init__(self, token: str | None, hosts: set[str] | None, origins: set[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.token = token
        self.hosts = hosts
        self.origins = origins
        self.secret = hashlib.sha256(b"spellbook-web\0" + token.encode()).digest() if token else secrets.token_bytes(32)
        self._clock = clock
        self._codes: dict[str, _Code] = {}  # by _key(code)
        self._lock = threading.Lock()  # ``spellbook ui`` makes its code from another thread

    # --- reading the request --------------------------------------------------------------------
    def host_ok(self, headers: dict[str, str]) -> bool:
        return self.hosts is None or headers.get("host", "") in self.hosts

    def cookie_value(self) -> str:
        return _mac(self.secret, "cookie")

    def signed_in(self, headers: dict[str, str]) -> bool:
        if not self.token:
            return True
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_ok(value.strip()):
            return True
        return hmac.compare_digest(cookies(headers).get(COOKIE, "").encode(), self.cookie_value().encode())

    def token_ok(self, given: str) -> bool:
        return bool(self.token and given) and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf(self, headers: dict[str, str]) -> str:
        """The form token for this browser: bound to its cookie (or, without a token, to this server)."""
        return _mac(self.secret, "csrf\0" + cookies(headers).get(COOKIE, ""))

    def origin_refusal(self, headers: dict[str, str]) -> str | None:
        origin = headers.get("origin")
        if not origin:
            return "The request has no Origin header; changes are accepted only from Spellbook's own pages."
        if origin not in self.origins:
            return f"Changes are accepted only from Spellbook's own pages, not from {origin}."
        return None

    def post_refusal(self, headers: dict[str, str], form: dict[str, str]) -> str | None:
        """Why a POST that would change something is refused, or None when it may go ahead."""
        refusal = self.origin_refusal(headers)
        if refusal:
            return refusal
        if not hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), self.csrf(headers).encode()):
            return "The form's CSRF token is missing or wrong; reload the page and try again."
        return None

    # --- signing in -----------------------------------------------------------------------------
    def sign_in_address(self, base: str) -> str:
        """Where a browser signs in (``base`` ends with ``/``): ``signin?code=`` with a fresh code, or
        ``base`` itself when the server has no token."""
        return f"{base}signin?code={self.issue_code()}" if self.token else base

    def issue_code(self) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._prune()
            self._codes[self._key(code)] = _Code(self._clock() + CODE_SECONDS)
            while len(self._codes) > MAX_CODES:
                del self._codes[next(iter(self._codes))]
        return code

    def redeem(self, code: str) -> bool:
        """Is the code known, unexpired and unused? (It is used now.)"""
        with self._lock:
            self._prune()
            found = self._codes.get(self._key(code)) if code else None
            if found is None or found.used:
                return False
            found.used = True
            return True

    def cookie(self) -> bytes:
        """The ``Set-Cookie`` value of a browser that signed in."""
        return f"{COOKIE}={self.cookie_value()}; HttpOnly; SameSite=Strict; Path=/".encode()

    # --- answering ------------------------------------------------------------------------------
    def headers(self) -> list[tuple[bytes, bytes]]:
        return SECURITY_HEADERS

    # --- inside ---------------------------------------------------------------------------------
    def _key(self, value: str) -> str:
        return _mac(self.secret, "key\0" + value)

    def _prune(self) -> None:
        now = self._clock()
        self._codes = {k: c for k, c in self._codes.items() if c.expires > now}


def cookies(headers: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out.setdefault(name, value)
    return out


def _mac(secret: bytes, message: str) -> str:
    return hmac.new(secret, message.encode(), hashlib.sha256).hexdigest()
