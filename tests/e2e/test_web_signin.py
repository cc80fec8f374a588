"""Signing a browser in to the web view (spellbook/server/web/guard.py), against real ``spellbook ui``
processes on 127.0.0.1, and Debian's chromium driven by Playwright where a browser's cookie rules
are the point. The attacker is another user of the machine: they can run ``ps``, listen on another
loopback port, and put a link in a note."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.helpers.processes import SPELLBOOK, child_env, free_port
from tests.helpers.web import base_of, sign_in, start_ui, stop_ui, token_of, write_vault

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "shared-token-" + "s" * 32


@pytest.fixture
def listener() -> Iterator[tuple[int, list[dict[str, str]]]]:
    """Another user's server on another loopback port: it records the headers of each request."""
    seen: list[dict[str, str]] = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"thanks")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _vault(root: Path, body: str = "") -> Path:
    vault = root / "vault"
    vault.mkdir()
    write_vault(vault, 12)
    (vault / "misc").mkdir(exist_ok=True)
    (vault / "misc" / "Links.md").write_text(f"---\nid: links1\ntitle: Links\n---\n{body}\n", encoding="utf-8")
    return vault


def _get(host: str, cookie: str, base: str, path: str = "/") -> httpx2.Response:
    return httpx2.get(base + path, headers={"Host": host, "Cookie": cookie}, timeout=30)


def test_ui_hands_the_browser_a_one_time_code_never_the_token(tmp_path: Path) -> None:
    """``ps`` shows a browser's command line to every local user: what ``spellbook ui`` passes there
    must not be the token. The code works once, for the pages only."""
    opened = tmp_path / "argv.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$0" "$@" > {opened}.tmp && mv {opened}.tmp {opened}\n')
    browser.chmod(0o755)
    vault = _vault(tmp_path)
    proc = subprocess.Popen(
        [SPELLBOOK, "ui", "--vault", str(vault), "--embedder", "hashing"],
        env=child_env(BROWSER=str(browser)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(300):
            if opened.exists():
                break
            time.sleep(0.1)
        argv = opened.read_text()
        token = token_of(vault)
        assert token not in argv, argv  # the browser's command line holds no token
        address = argv.split()[-1]
        base = base_of(address)
        assert urlsplit(address).path == "/signin" and "code=" in address, address
        code = address.split("code=", 1)[1]
        assert httpx2.post(f"{base}/mcp", headers={"Authorization": f"Bearer {code}"}, json={}).status_code == 401
        host, cookie = sign_in(address)
        assert _get(host, cookie, base).status_code == 200
        again = httpx2.get(address, follow_redirects=True, timeout=30)  # the same code a second time
        assert again.status_code == 401 and "used already" in again.text
        assert _get(host, cookie, base).status_code == 401  # someone used it first: that session is over
        for path in (f"/?token={token}", f"/search?q=x&token={token}", f"/signin?token={token}"):  # no token in a URL
            answer = httpx2.get(base + path, timeout=30)
            assert answer.status_code == 401 and "set-cookie" not in answer.headers, path
        pasted = httpx2.post(f"{base}/signin", data={"token": token}, headers={"Origin": base}, timeout=30)
        assert pasted.status_code == 303 and "/signin?code=" in pasted.headers["location"]
        assert _get(*sign_in(pasted.headers["location"]), base).status_code == 200
        foreign = httpx2.post(f"{base}/signin", data={"token": token}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert httpx2.post(f"{base}/signin", data={"token": "wrong"}, headers={"Origin": base}).status_code == 401
    finally:
        log = stop_ui(proc)
    assert "Traceback" not in log and "used twice" in log
    assert token not in log and code not in log


def test_a_cookie_opens_only_the_server_start_that_made_it(tmp_path: Path) -> None:
    """The same token on two servers, and one server restarted on the same port: a cookie of one
    opens neither the other nor the next start."""
    port = free_port()
    vault = _vault(tmp_path)
    first, address = start_ui(vault, "--port", str(port), SPELLBOOK_TOKEN=TOKEN)
    try:
        host, cookie = sign_in(address)
        base = base_of(address)
        assert _get(host, cookie, base).status_code == 200
        other_vault = tmp_path / "other"
        other_vault.mkdir()
        second, other_address = start_ui(other_vault, SPELLBOOK_TOKEN=TOKEN)
        try:
            other_base = base_of(other_address)
            other_host, other_cookie = sign_in(other_address)
            assert other_cookie != cookie
            for h in (other_host, urlsplit(other_base).netloc):
                assert _get(h, cookie, other_base).status_code == 401, h  # server A's cookie at server B
        finally:
            stop_ui(second)
    finally:
        stop_ui(first)
    again, _ = start_ui(vault, "--port", str(port), SPELLBOOK_TOKEN=TOKEN)
    try:
        assert _get(host, cookie, base).status_code in (401, 421)  # the restarted server: a new name (421)
        assert _get(urlsplit(base).netloc, cookie, base).status_code == 401
    finally:
        stop_ui(again)


def test_the_cookie_does_not_reach_another_port(tmp_path: Path, listener: tuple[int, list[dict[str, str]]]) -> None:
    """A link in a note to another local port, or the person typing one: the listener there gets no
    cookie and no Referer; links in notes carry rel=noreferrer; a [[wikilink]] in a link's title
    stays in the title."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run should have installed it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    port, seen = listener
    vault = _vault(tmp_path, f'[other port](http://127.0.0.1:{port}/from-note "see [[Links]]") and [[Links|itself]]')
    proc, address = start_ui(vault)
    try:
        with playwright_api.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            try:
                page = chromium.new_context().new_page()
                page.goto(address)
                page.wait_for_url("**/")
                signed = urlsplit(page.url)
                assert "Overview" in page.title() and signed.path == "/" and not signed.query, page.url
                page.goto(f"http://127.0.0.1:{port}/typed")  # the person, or a page, going to another port
                page.goto(f"http://localhost:{port}/typed")
                assert len(seen) >= 2 and not [h for h in seen if "cookie" in h], seen
                page.goto(f"{signed.scheme}://{signed.netloc}/memory/links1")
                out = page.locator("article.note a", has_text="other port")
                assert out.get_attribute("rel") == "noreferrer noopener"
                assert out.get_attribute("title") == "see [[Links]]"
                assert page.locator("article.note a.wikilink", has_text="itself").count() == 1
                out.click()
                page.wait_for_url(f"http://127.0.0.1:{port}/from-note")
                cookies = page.context.cookies()
            finally:
                chromium.close()
    finally:
        stop_ui(proc)
    assert {"/from-note", "/typed"} <= {h["path"] for h in seen}, seen
    assert cookies and all(
        c["domain"] == signed.hostname and c["httpOnly"] and c["sameSite"] == "Strict" and c["path"] == "/"
        for c in cookies
    ), cookies
    assert re.fullmatch(r"spellbook-[0-9a-f]{16}\.localhost", signed.hostname), signed  # the pages' own name
    view = (signed.netloc, urlsplit(address).netloc)
    for headers in seen:  # (a favicon's request names the listener's own page as its Referer: not the view)
        assert "cookie" not in headers, headers
        assert not any(name in headers.get("referer", "") for name in view), headers
