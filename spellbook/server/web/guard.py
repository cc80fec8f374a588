"""Who may see the pages and who may change anything through them.

The pages sit behind the same Host check as ``/mcp`` (server/http.py), and their own sign-in:

* **Host.** On loopback only a loopback ``Host`` header, or the pages' own name (below), is
  answered (421 otherwise), so a web page on another site cannot reach the server by DNS rebinding.
* **Token.** When the server has a token (the default), a request needs either
  ``Authorization: Bearer <token>`` or a session cookie of this server start. The token never
  goes into a URL: ``?token=`` signs nobody in.
* **One-time codes.** A browser signs in with a code: ``spellbook ui`` (the process that runs this
  server) makes one and opens ``/signin?code=...``; a person who has the token pastes it into the
  sign-in form (a POST), which makes one the same way. A code is random, works once, lasts
  ``CODE_SECONDS``, and opens only the pages (``/mcp`` takes only the bearer token). A code used a
  second time (someone else read it, e.g. from the browser's command line with ``ps``) ends the
  sessions its first use opened, and the log says so.
* **The pages' own name.** On loopback the pages live at ``spellbook-<random>.localhost:PORT``
  (browsers resolve every name under ``.localhost`` to this machine), a name chosen at each start
  and given only to a browser that signed in (a code redeemed at ``127.0.0.1`` redirects there with
  a second code). The cookie is set there, host-only: a link to another port of 127.0.0.1 does not
  carry it, and a link to another port of that name needs the name. Its name and value are random
  per start and per sign-in (HttpOnly, SameSite=Strict, Path=/), and the cookie counts only on that
  name, so it outlives neither the server nor opens another one.
* **Changes.** Restore, merge and erase are POST only, and a POST must come from the page's own
  origin (its ``Origin`` header is one of the server's own origins; a
  POST without ``Origin`` is refused) and carry the CSRF token the page put in its form (an HMAC
  of the session cookie under a key made at this start, so neither another tab nor another server
  that sees the cookie can make it). A refused POST changes nothing and answers 403.
* Every page is sent with a Content-Security-Policy that allows only the server's own scripts
  and styles (no inline script), ``X-Frame-Options: DENY`` and ``Referrer-Policy: same-origin``
  (``no-referrer`` would make the browser send ``Origin: null`` with a form).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

CSRF_FIELD = "csrf"
TOKEN_FIELD = "token"
CODE_SECONDS = 60.0
MAX_CODES = 64  # outstanding codes; the oldest go first
MAX_SESSIONS = 64  # signed-in browsers of one server start; the oldest go first
SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'{also}; frame-ancestors 'none'; base-uri 'none'"
)


@dataclass
class _Code:
    family: str  # the sign-in it belongs to: a code redeemed at 127.0.0.1 hands on to a second one
    expires: float
    used: bool = False


class Guard:
    """The page gate: the bearer token (None: open on loopback), the Host names the server answers
    to (None: any, off loopback), the origins a POST may come from, and ``page_host``, the
    ``name:port`` the pages live at once signed in (None: whatever name the browser used)."""

    def __init__(
        self,
        token: str | None,
        hosts: set[str] | None,
        origins: set[str],
        page_host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.page_host = page_host.lower() if token and page_host else None
        self.hosts = None if hosts is None else hosts | ({self.page_host} if self.page_host else set())
        self.origins = origins | ({f"http://{self.page_host}"} if self.page_host else set())
        self.cookie = f"spellbook_{secrets.token_hex(4)}"  # this start's cookie name
        self._secret = secrets.token_bytes(32)  # this start's key: CSRF tokens, and the keys below
        self._clock = clock
        self._codes: dict[str, _Code] = {}  # by _key(code)
        self._sessions: dict[str, str] = {}  # _key(cookie value) -> family
        self._lock = threading.Lock()  # ``spellbook ui`` makes its code from another thread

    # --- reading the request --------------------------------------------------------------------
    def host_ok(self, headers: dict[str, str]) -> bool:
        return self.hosts is None or headers.get("host", "").lower() in self.hosts

    def on_page_host(self, headers: dict[str, str]) -> bool:
        return self.page_host is None or headers.get("host", "").lower() == self.page_host

    def signed_in(self, headers: dict[str, str]) -> bool:
        if not self.token:
            return True
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_ok(value.strip()):
            return True
        return self._session(headers) is not None

    def token_ok(self, given: str) -> bool:
        return bool(self.token and given) and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf(self, headers: dict[str, str]) -> str:
        """The form token for this browser: bound to its session cookie and to this server start."""
        return _mac(self._secret, "csrf\0" + cookies(headers).get(self.cookie, ""))

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

    def issue_code(self, family: str | None = None) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._prune()
            self._codes[self._key(code)] = _Code(family or secrets.token_hex(8), self._clock() + CODE_SECONDS)
            while len(self._codes) > MAX_CODES:
                del self._codes[next(iter(self._codes))]
        return code

    def redeem(self, code: str, headers: dict[str, str]) -> str | None:
        """The sign-in a code belongs to, if it is known, unexpired and unused (it is used now);
        else None. A second use ends what the first opened, unless it comes from the browser that
        holds that session already (e.g. a reload)."""
        with self._lock:
            self._prune()
            found = self._codes.get(self._key(code)) if code else None
            if found is None:
                return None
            if not found.used:
                found.used = True
                return found.family
            if self._session(headers) == found.family:
                return found.family
            self._codes = {k: c for k, c in self._codes.items() if c.family != found.family}
            self._sessions = {k: f for k, f in self._sessions.items() if f != found.family}
        log.warning(
            "a web sign-in code was used twice: someone else on this machine may have read it (e.g. from "
            "the browser's command line); the sessions it opened are ended. Sign in again."
        )
        return None

    def open_session(self, family: str | None) -> bytes:
        """A new session of this sign-in (None: a sign-in of its own): the ``Set-Cookie`` value."""
        value = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[self._key(value)] = family or secrets.token_hex(8)
            while len(self._sessions) > MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
        return f"{self.cookie}={value}; HttpOnly; SameSite=Strict; Path=/".encode()

    # --- answering ------------------------------------------------------------------------------
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The security headers of every page (a sign-in form on 127.0.0.1 may go on to the pages' name)."""
        also = f" http://{self.page_host}" if self.page_host else ""
        return [(b"content-security-policy", CSP.format(also=also).encode()), *SECURITY_HEADERS]

    # --- inside ---------------------------------------------------------------------------------
    def _session(self, headers: dict[str, str]) -> str | None:
        value = cookies(headers).get(self.cookie)
        if not value or not self.on_page_host(headers):
            return None
        return self._sessions.get(self._key(value))

    def _key(self, value: str) -> str:
        return _mac(self._secret, "key\0" + value)

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
