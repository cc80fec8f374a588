"""Signing a browser in to the web view (spellbook/server/web/guard.py), against real ``spellbook ui``
processes on 127.0.0.1. The attacker is another user of the machine: they can run ``ps``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.web import base_of, sign_in, stop_ui, token_of, write_vault

pytestmark = pytest.mark.slow


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
    proc = subprocess.Popen([SPELLBOOK, "ui", "--vault", str(vault), "--embedder", "hashing"],
                            env=child_env(BROWSER=str(browser)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
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
        for path in (f"/?token={token}", f"/search?q=x&token={token}", f"/signin?token={token}"):  # no token in a URL
            answer = httpx2.get(base + path, timeout=30)
            assert answer.status_code == 401 and "set-cookie" not in answer.headers, path
        pasted = httpx2.post(f"{base}/signin", data={"token": token}, headers={"Origin": base}, timeout=30)
        assert pasted.status_code == 303 and pasted.headers["location"] == "/"
        assert _get(host, pasted.headers["set-cookie"].split(";")[0], base).status_code == 200
        foreign = httpx2.post(f"{base}/signin", data={"token": token}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert httpx2.post(f"{base}/signin", data={"token": "wrong"}, headers={"Origin": base}).status_code == 401
    finally:
        log = stop_ui(proc)
    assert "Traceback" not in log
    assert token not in log and code not in log
