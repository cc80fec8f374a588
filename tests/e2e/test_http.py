"""Streamable HTTP and legacy SSE with the SDK's clients against a real server process on 127.0.0.1."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers.processes import SPELLBOOK, alive, child_env, children_named, free_port, start, stop

pytestmark = pytest.mark.slow


def bearer(vault: Path) -> dict[str, str]:
    """The header a client needs: the token ``serve --http`` made on its first start."""
    return {"Authorization": f"Bearer {(vault / '.spellbook' / 'http.token').read_text().strip()}"}


@contextmanager
def sse_session(base: str, **headers: str) -> Iterator[str]:
    """A raw ``GET /sse`` stream, open for the block; yields the session's message URL."""
    with httpx2.stream(
        "GET", f"{base}/sse", headers={"Accept": "text/event-stream", **headers}, timeout=10
    ) as response:
        assert response.status_code == 200, response.status_code
        lines = response.iter_lines()  # keep a reference: closing the iterator closes the stream
        assert next(lines) == "event: endpoint"
        path = next(lines).removeprefix("data: ")
        assert path.startswith("/messages/?session_id=")
        yield base + path


def test_http_tools_health_cors_and_origin_checks(tmp_path: Path) -> None:
    port = free_port()
    vault = tmp_path / "vault"
    proc = start(vault, port)
    url = f"http://127.0.0.1:{port}/mcp"
    auth = bearer(vault)
    try:
        health = httpx2.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health["status"] == "ok" and health["version"]
        assert httpx2.get(url).json()["status"] == "ok"  # GET without an MCP accept header
        preflight = httpx2.request(
            "OPTIONS", url, headers={"Origin": f"http://localhost:{port}", "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"]
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream", **auth}
        evil_origin = httpx2.post(url, json=init, headers={**accept, "Origin": "http://evil.example"})
        assert evil_origin.status_code == 403
        evil_host = httpx2.post(url, json=init, headers={**accept, "Host": "evil.example"})
        assert evil_host.status_code == 421

        async def main() -> None:
            async with (
                httpx2.AsyncClient(headers=auth) as http,
                Client(streamable_http_client(url, http_client=http)) as a,
                Client(streamable_http_client(url, http_client=http)) as b,
            ):  # two clients, one server
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
            async with (
                httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                assert {t.name for t in (await client.list_tools()).tools} >= {"scribe", "memorize"}

        anyio.run(main)
    finally:
        stop(proc)


def test_refuses_to_bind_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [SPELLBOOK, "serve", "--http", "--host", "0.0.0.0", "--vault", str(tmp_path / "v"), "--embedder", "hashing"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1 and "SPELLBOOK_TOKEN" in result.stderr
    assert not (tmp_path / "v").exists()  # refused before creating anything


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def test_legacy_sse_tools_and_the_same_protections(tmp_path: Path) -> None:
    port = free_port()
    vault = tmp_path / "vault"
    proc = start(vault, port)
    base = f"http://127.0.0.1:{port}"
    auth = bearer(vault)
    try:
        assert httpx2.get(f"{base}/healthz").json()["sse_endpoint"] == "/sse"

        async def main() -> None:
            # an old client on SSE and a new one on streamable HTTP share one vault
            async with (
                Client(sse_client(f"{base}/sse", headers=auth)) as old,
                httpx2.AsyncClient(headers=auth) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as new,
            ):
                assert {t.name for t in (await old.list_tools()).tools} >= {"scribe", "memorize", "get_memories"}
                stored = await old.call_tool("scribe", {"text": "Legacy SSE clients still work.", "title": "SSE"})
                assert not stored.is_error, stored.content[0].text
                hits = await new.call_tool("memorize", {"query": "legacy SSE clients"})
                assert hits.structured_content["results"][0]["id"] == stored.structured_content["id"]
                full = await old.call_tool("get_memories", {"ids": [stored.structured_content["id"]]})
                assert full.structured_content["memories"][0]["text"] == "Legacy SSE clients still work."
                failed = await old.call_tool("get_memories", {"ids": []})
                assert failed.is_error  # errors come back as tool errors over SSE too

        anyio.run(main)

        # DNS rebinding: a foreign Origin or Host is refused on both SSE paths
        sse_headers = {"Accept": "text/event-stream", **auth}
        assert httpx2.get(f"{base}/sse", headers={**sse_headers, "Origin": "http://evil.example"}).status_code == 403
        assert httpx2.get(f"{base}/sse", headers={**sse_headers, "Host": "evil.example"}).status_code == 421
        with sse_session(base, **auth) as messages:
            evil = {"Origin": "http://evil.example", **auth}
            assert httpx2.post(messages, json=INIT, headers=evil).status_code == 403
            assert httpx2.post(messages, json=INIT, headers={"Host": "evil.example", **auth}).status_code == 421
            text = {"Content-Type": "text/plain", **auth}
            assert httpx2.post(messages, content=b"x", headers=text).status_code == 400
            # the same 4 MiB body limit as /mcp
            big = b'{"jsonrpc": "2.0", "method": "ping", "id": 1, "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}'
            json_auth = {"Content-Type": "application/json", **auth}
            assert httpx2.post(messages, content=big, headers=json_auth).status_code == 413
            assert httpx2.post(messages, json=INIT, headers=auth).status_code == 202  # the session itself is fine
            ok_origin = httpx2.post(messages, json=INIT, headers={"Origin": f"http://localhost:{port}", **auth})
            assert ok_origin.status_code == 202 and ok_origin.headers["access-control-allow-origin"]
            log = stop(proc)  # with an SSE stream still open: it must end cleanly, not hang or log errors
    finally:
        if proc.poll() is None:
            stop(proc)
    assert "Exception in ASGI" not in log and "without completing response" not in log, log


def test_legacy_sse_bearer_token(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path / "vault", port, SPELLBOOK_TOKEN="s3cret-token")
    base = f"http://127.0.0.1:{port}"
    good = {"Authorization": "Bearer s3cret-token"}
    try:
        assert httpx2.get(f"{base}/sse", headers={"Accept": "text/event-stream"}).status_code == 401
        wrong = httpx2.get(f"{base}/sse", headers={"Accept": "text/event-stream", "Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        with sse_session(base, **good) as messages:
            assert httpx2.post(messages, json=INIT).status_code == 401  # a session id alone is not enough
            assert httpx2.post(messages, json=INIT, headers=good).status_code == 202

        async def main() -> None:
            async with Client(sse_client(f"{base}/sse", headers=good)) as client:
                listed = await client.call_tool("list_memories", {})
                assert not listed.is_error and listed.structured_content["total"] >= 1

        anyio.run(main)
    finally:
        stop(proc)


def test_loopback_needs_the_token_made_on_first_start(tmp_path: Path) -> None:
    """Any local user can reach 127.0.0.1: without the token nothing but /healthz answers."""
    port = free_port()
    vault = tmp_path / "vault"
    proc = start(vault, port)
    base = f"http://127.0.0.1:{port}"
    file = vault / ".spellbook" / "http.token"
    try:
        assert stat.S_IMODE(file.stat().st_mode) == 0o600 and stat.S_IMODE(file.parent.stat().st_mode) == 0o700
        token = file.read_text().strip()
        assert len(token) >= 32
        accept = {"Accept": "application/json, text/event-stream"}
        assert httpx2.post(f"{base}/mcp", json=INIT, headers=accept).status_code == 401
        assert httpx2.get(f"{base}/sse", headers={"Accept": "text/event-stream"}).status_code == 401
        assert httpx2.post(f"{base}/messages/?session_id=0", json=INIT).status_code == 401
        assert httpx2.get(f"{base}/healthz").status_code == 200
        with sse_session(base, **bearer(vault)) as messages:
            assert httpx2.post(messages, json=INIT).status_code == 401

        async def main() -> None:
            async with (
                httpx2.AsyncClient(headers=bearer(vault)) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
            ):
                assert not (await client.call_tool("list_memories", {})).is_error

        anyio.run(main)
    finally:
        log = stop(proc)
    assert "http.token" in log and token not in log  # where it is, never the token itself
    proc = start(vault, port)  # a restart keeps the token, so installed clients keep working
    try:
        assert file.read_text().strip() == token
        anyio.run(main)
    finally:
        stop(proc)
    proc = start(vault, port, "--no-token")  # turned off by a person, explicitly
    try:
        assert httpx2.post(f"{base}/mcp", json=INIT, headers=accept).status_code == 200
    finally:
        log = stop(proc)
    assert "without a token" in log


def test_install_http_writes_the_token_into_the_clients_config(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    port = free_port()
    stop(start(vault, port))
    home = tmp_path / "home"
    home.mkdir()
    env = child_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(home))
    url = f"http://127.0.0.1:{port}/mcp"
    done = subprocess.run(
        [SPELLBOOK, "install", "claude-code", "--http", url, "--vault", str(vault)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config = json.loads((home / ".claude.json").read_text())
    assert config["mcpServers"]["spellbook"]["headers"] == bearer(vault)
    assert stat.S_IMODE((home / ".claude.json").stat().st_mode) == 0o600
    missing = subprocess.run(
        [SPELLBOOK, "install", "cursor", "--http", url, "--vault", str(tmp_path / "none")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 1 and "http.token" in missing.stderr


def test_an_import_over_http_embeds_in_child_processes_that_end_with_it(tmp_path: Path) -> None:
    """The HTTP server (uvicorn's event loop, with its signal handlers and wakeup descriptor) forks
    an import's child processes (spellbook/embedders/lanes.py): every note gets its vector, no lane
    fails, and no child outlives the call."""
    port = free_port()
    vault = tmp_path / "vault"
    proc = start(vault, port, "--embedder", "use-m3", SPELLBOOK_CACHE_DIR=str(tmp_path / "cache"))
    export = tmp_path / "export.json"
    texts = [
        "The canary release rolls back when the error rate doubles within ten minutes.",
        "배포 파이프라인이 실패하면 롤백 스크립트를 실행하고 담당자에게 알린다.",
        "東京の倉庫では毎週月曜日に在庫を数え、足りない部品を発注する。",
    ]
    memories = [
        {
            "id": f"m{i:03d}",
            "path": f"imp/Note {i}.md",
            "title": f"Note {i}",
            "metadata": {"id": f"m{i:03d}"},
            "body": f"{texts[i % 3]} ({i}) " * 4,
        }
        for i in range(300)
    ]
    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}), encoding="utf-8")
    seen: set[int] = set()
    try:

        async def main() -> dict:
            async with (
                httpx2.AsyncClient(headers=bearer(vault), timeout=120) as http,
                Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
            ):
                done = anyio.Event()

                async def watch() -> None:
                    while not done.is_set():
                        seen.update(children_named(proc.pid, "spellbook-embed"))
                        await anyio.sleep(0.02)

                while (await client.call_tool("stats", {})).structured_content.get("state") != "ready":
                    await anyio.sleep(0.05)  # the template's first index (it may fork a child of its own)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(watch)
                    result = await client.call_tool("import", {"path": str(export)})
                    done.set()
                assert not result.is_error, result
                stats = (await client.call_tool("stats", {})).structured_content
                return {"created": result.structured_content["counts"]["created"], "stats": stats}

        out = anyio.run(main)
        assert out["created"] == 300
        assert out["stats"]["notes"] >= 300 and out["stats"]["vectors"] == out["stats"]["chunks"]
        assert len(seen) == 2, seen  # the parts went to two children...
        assert not any(alive(pid) for pid in seen)  # ...gone once the import answered
    finally:
        log = stop(proc)
    assert "child process" not in log and "Traceback" not in log, log[-2000:]  # no lane failed or warned
