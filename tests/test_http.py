"""Streamable HTTP with the SDK's client against a real server process on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .conftest import SPELLBOOK, child_env

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(vault: Path, port: int, *extra: str, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [SPELLBOOK, "serve", "--http", "--port", str(port), "--vault", str(vault), "--embedder", "hashing", *extra],
        env=child_env(**env), stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx2.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(proc.stderr.read())


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=15)


def test_http_tools_health_cors_and_origin_checks(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path / "vault", port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        health = httpx2.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health["status"] == "ok" and health["version"]
        assert httpx2.get(url).json()["status"] == "ok"  # GET without an MCP accept header
        preflight = httpx2.request("OPTIONS", url, headers={"Origin": f"http://localhost:{port}",
                                                            "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"]
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        evil_origin = httpx2.post(url, json=init, headers={**accept, "Origin": "http://evil.example"})
        assert evil_origin.status_code == 403
        evil_host = httpx2.post(url, json=init, headers={**accept, "Host": "evil.example"})
        assert evil_host.status_code == 421

        async def main() -> None:
            async with Client(url) as a, Client(url) as b:  # two clients share one server
                stored = await a.call_tool("scribe", {"text": "HTTP clients share one vault.", "title": "Shared"})
                assert not stored.is_error
                hits = await b.call_tool("memorize", {"query": "clients share vault"})
                assert hits.structured_content["results"][0]["id"] == stored.structured_content["id"]

        anyio.run(main)
    finally:
        stop(proc)


def test_http_bearer_token(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path / "vault", port, SPELLBOOK_TOKEN="s3cret-token")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx2.post(url, json=init, headers=headers).status_code == 401
        wrong = httpx2.post(url, json=init, headers={**headers, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        async def main() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    assert {t.name for t in (await client.list_tools()).tools} >= {"scribe", "memorize"}

        anyio.run(main)
    finally:
        stop(proc)


def test_refuses_to_bind_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [SPELLBOOK, "serve", "--http", "--host", "0.0.0.0", "--vault", str(tmp_path / "v"), "--embedder", "hashing"],
        env=child_env(), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and "SPELLBOOK_TOKEN" in result.stderr
    assert not (tmp_path / "v").exists()  # refused before creating anything
