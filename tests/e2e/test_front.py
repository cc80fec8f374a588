"""The stdio front (spellbook/startup/front.py): the opening requests answered from the handshake
cache before the SDK is loaded, over real pipes, in both protocol eras; what the cache holds is
always what the SDK answers."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from spellbook.startup import front
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.stdio import Wire

pytestmark = pytest.mark.slow

INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "front-test", "version": "1"}}


def legacy_session(vault: Path, cache: Path, stderr: Path) -> tuple[dict[str, Any], dict[str, Any], Wire]:
    """initialize, initialized, tools/list, then a tool call and a second list; the wire is closed."""
    wire = Wire(vault, cache, stderr)
    try:
        init = wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = wire.request("list-1", "tools/list")
        stats = wire.request(2, "tools/call", {"name": "stats", "arguments": {}})
        assert not stats["result"]["isError"] and stats["result"]["structuredContent"]["vault"] == str(vault)
        again = wire.request(3, "tools/list")
        assert again["result"] == tools["result"]
    finally:
        assert wire.close() == 0
    return init, tools, wire


def cache_file(cache: Path) -> Path:
    files = list(cache.glob("mcp-front-*.json"))
    assert len(files) == 1, files
    return files[0]


def test_the_legacy_handshake_is_answered_from_the_cache_on_the_second_start(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    init1, tools1, wire1 = legacy_session(tmp_path / "vault", cache, tmp_path / "first.log")
    assert "from the handshake cache" not in (tmp_path / "first.log").read_text()
    assert init1["result"]["serverInfo"]["name"] == "spellbook" and len(tools1["result"]["tools"]) > 20
    stored = json.loads(cache_file(cache).read_text())
    assert init1["result"] in stored.values() and tools1["result"] in stored.values()

    init2, tools2, wire2 = legacy_session(tmp_path / "vault", cache, tmp_path / "second.log")
    log = (tmp_path / "second.log").read_text()
    assert "answered 2 opening request(s) from the handshake cache" in log
    assert "differs" not in log
    assert init2 == init1 and tools2 == tools1  # ids included: each answer carries its own request's id
    # the client sees answers to its own ids only, once each: the front's own requests stay inside
    for wire in (wire1, wire2):
        ids = [m["id"] for m in wire.received if "id" in m]
        assert sorted(map(str, ids)) == sorted(map(str, [1, "list-1", 2, 3]))
        assert not [m for m in wire.received if "method" in m]  # no notification: nothing changed


def test_a_cache_that_disagrees_with_the_server_is_replaced_and_the_client_told(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _, tools, _ = legacy_session(tmp_path / "vault", cache, tmp_path / "first.log")
    file = cache_file(cache)
    stored = json.loads(file.read_text())
    for answer in stored.values():
        if "tools" in answer:
            answer["tools"] = answer["tools"][:3]  # a cache from other code, say
    file.write_text(json.dumps(stored))

    wire = Wire(tmp_path / "vault", cache, tmp_path / "second.log")
    try:
        wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        early = wire.request(2, "tools/list")
        assert len(early["result"]["tools"]) == 3  # what the cache held
        wire.until(lambda m: m.get("method") == "notifications/tools/list_changed")
        assert wire.request(3, "tools/list")["result"] == tools["result"]
    finally:
        assert wire.close() == 0
    assert "differs from the server's" in (tmp_path / "second.log").read_text()
    assert tools["result"] in json.loads(file.read_text()).values()  # rewritten: the next start is right


def test_the_sdk_client_lists_from_the_cache_and_calls_through_the_server(tmp_path: Path) -> None:
    """The SDK's own client opens with `server/discover` (protocol 2026-07-28), not `initialize`."""
    cache = tmp_path / "cache"
    params = StdioServerParameters(
        command=SPELLBOOK,
        args=["serve", "--vault", str(tmp_path / "vault"), "--embedder", "hashing"],
        env=child_env(SPELLBOOK_CACHE_DIR=str(cache)),
    )

    async def session(log: Path) -> list[dict[str, Any]]:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = await client.list_tools(cache_mode="bypass")
                stored = await client.call_tool(
                    "scribe", {"text": "The front door key is under the mat.", "title": "Key", "category": "home"}
                )
                assert not stored.is_error, stored.content
                hits = await client.call_tool("memorize", {"query": "front door key", "mode": "keyword"})
                assert hits.structured_content["results"][0]["title"] == "Key"
                return [t.model_dump() for t in tools.tools]

    first = anyio.run(session, tmp_path / "first.log")
    second = anyio.run(session, tmp_path / "second.log")
    assert first == second
    assert "answered 2 opening request(s) from the handshake cache" in (tmp_path / "second.log").read_text()


def test_an_unwritable_cache_folder_costs_the_cache_only(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder would be")
    for run in ("first", "second"):
        _, tools, _ = legacy_session(tmp_path / "vault", not_a_folder, tmp_path / f"{run}.log")
        assert len(tools["result"]["tools"]) > 20
        assert "could not write the handshake cache" in (tmp_path / f"{run}.log").read_text()


def test_cache_files_of_other_versions_go_when_unused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    old, recent = cache / "mcp-front-0123456789abcdef01234567.json", cache / "mcp-front-fedcba9876543210fedcba98.json"
    for file in (old, recent):
        file.write_text("{}")
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))
    legacy_session(tmp_path / "vault", cache, tmp_path / "server.log")
    assert not old.exists() and recent.exists()  # another installation's, in use lately: kept
    ours = cache_file_except(cache, recent)
    os.utime(ours, (month_ago, month_ago))
    legacy_session(tmp_path / "vault", cache, tmp_path / "again.log")  # a start that only reads it...
    assert ours.stat().st_mtime > month_ago + 86400  # ...marks it in use


def cache_file_except(cache: Path, other: Path) -> Path:
    files = [f for f in cache.glob("mcp-front-*.json") if f != other]
    assert len(files) == 1, files
    return files[0]


def test_stray_writes_to_stdout_miss_the_wire(tmp_path: Path) -> None:
    """fd 1 points at stderr once the front took the wire: a child's or a library's print lands in the
    log, never between two JSON-RPC messages."""
    cache = tmp_path / "cache"
    wire = Wire(tmp_path / "vault", cache, tmp_path / "server.log")
    try:
        wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        wire.request(2, "tools/call", {"name": "stats", "arguments": {}})
        pid = wire.proc.pid
        with Path(f"/proc/{pid}/fd/1").open("w") as stdout:  # what a print() in the server would reach
            stdout.write("stray text\n")
        assert wire.request(3, "tools/list")["result"]["tools"]
    finally:
        assert wire.close() == 0
    assert "stray text" in (tmp_path / "server.log").read_text()


def test_a_client_that_reads_late_gets_every_answer(tmp_path: Path) -> None:
    """Answers written while the client does not read fill the pipe: those go through a worker
    thread (a write from the event loop could block it), and none is lost or reordered."""
    wire = Wire(tmp_path / "vault", tmp_path / "cache", tmp_path / "server.log")
    try:
        wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n in range(40):  # ~60 KB an answer: far more than the pipe holds
            wire.send({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/list"})
            wire.send(
                {"jsonrpc": "2.0", "id": 200 + n, "method": "tools/call", "params": {"name": "stats", "arguments": {}}}
            )
        time.sleep(2)  # the server writes into a full pipe meanwhile
        expected = sorted([100 + n for n in range(40)] + [200 + n for n in range(40)])
        answered: list[int] = []
        wire.until(lambda m: answered.append(m["id"]) or len(answered) == len(expected))  # calls run at once:
    finally:  # their answers may come in any order
        assert wire.close() == 0
    assert sorted(answered) == expected
    assert all("result" in m and not m["result"].get("isError") for m in wire.received)
    tools = [m["result"]["tools"] for m in wire.received if m["id"] in range(100, 140)]
    assert len(tools) == 40 and all(t == tools[0] for t in tools)


def test_answers_to_a_plain_file(tmp_path: Path) -> None:
    """stdout redirected to a file (not a pipe): every write goes through a worker thread."""
    answers = tmp_path / "answers.jsonl"
    with answers.open("wb") as stdout:
        proc = subprocess.Popen(
            [SPELLBOOK, "serve", "--vault", str(tmp_path / "vault"), "--embedder", "hashing"],
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env=child_env(SPELLBOOK_CACHE_DIR=str(tmp_path / "cache")),
        )
    assert proc.stdin is not None
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "stats", "arguments": {}}},
    ):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while answers.read_bytes().count(b"\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.stdin.close()  # end of input ends the session (calls still running are cancelled): after the answers
    assert proc.wait(timeout=30) == 0
    got = {m["id"]: m for m in map(json.loads, answers.read_text().splitlines())}
    assert got[1]["result"]["serverInfo"]["name"] == "spellbook"
    assert got[2]["result"]["structuredContent"]["vault"] == str(tmp_path / "vault")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve"], True),
        (["serve", "--vault", "v", "--embedder", "hashing"], True),
        (["serve", "--http"], False),
        (["serve", "--htt"], False),  # argparse takes an unambiguous abbreviation
        (["serve", "--help"], False),
        (["serve", "-h"], False),
        (["index"], False),
        ([], False),
    ],
)
def test_which_commands_take_the_wire(argv: list[str], expected: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(front.os, "isatty", lambda fd: False)
    assert front.serves_stdio(argv) is expected
    monkeypatch.setattr(front.os, "isatty", lambda fd: True)  # a person at a terminal: the plain path
    assert front.serves_stdio(argv) is False


def test_the_cache_is_in_the_configured_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from spellbook.config import Settings
    from spellbook.defaults import cache_dir

    for env in ({"SPELLBOOK_CACHE_DIR": str(tmp_path / "mine")}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {}):
        for name in ("SPELLBOOK_CACHE_DIR", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert Path(cache_dir()) == Settings().cache_dir.expanduser()


def test_the_digest_follows_the_source_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    package = tmp_path / "spellbook"
    (package / "server").mkdir(parents=True)
    (package / "startup").mkdir()
    (package / "startup" / "front.py").write_text("")
    tool = package / "server" / "tools.py"
    tool.write_text("descriptions")
    monkeypatch.setattr(front, "__file__", str(package / "startup" / "front.py"))
    before = front.cache_digest()
    assert front.cache_digest() == before
    tool.write_text("other descriptions")  # a new version, an edit in a checkout
    edited = front.cache_digest()
    assert edited != before
    (package / "server" / "new.py").write_text("")
    assert front.cache_digest() not in (before, edited)


def test_the_heap_is_one_pool_before_the_fronts_thread_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The front's thread is the process's first: glibc gives a thread that allocates while another
    holds the heap's lock a pool of its own unless the limit is set before (startup/heap.py); a pool
    of its own left the owner 6-8 MB larger after a 10k-note scribe session."""
    import sys

    import spellbook.cli
    import spellbook.cli.main
    from spellbook.startup import heap

    calls: list[str] = []
    monkeypatch.setattr(sys, "argv", ["spellbook", "serve"])
    monkeypatch.setattr(front, "serves_stdio", lambda argv: argv == ["serve"])
    monkeypatch.setattr(heap, "limit_arenas", lambda *args: calls.append("one heap pool") or True)
    monkeypatch.setattr(front, "start", lambda *args: calls.append("front"))
    monkeypatch.setattr(spellbook.cli.main, "run", lambda: calls.append("command"))
    spellbook.cli.run()
    assert calls == ["one heap pool", "front", "command"]


def test_a_stdio_server_runs_without_the_sdks_http_and_crypto_packages(tmp_path: Path) -> None:
    """``spellbook serve`` over stdio never loads sse_starlette, uvicorn or cryptography, which the
    SDK imports for HTTP and request-state encryption (startup/deferred.py; ~11 MB of a server), and
    it refuses a ``requestState`` it never issued, as the SDK refuses a forged one."""
    wire = Wire(tmp_path / "vault", tmp_path / "cache", tmp_path / "stderr.log")
    try:
        wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        stats = wire.request(2, "tools/call", {"name": "stats", "arguments": {}})
        assert not stats["result"]["isError"]
        scribed = wire.request(3, "tools/call", {"name": "scribe", "arguments": {"text": "Kettle descaling: monthly."}})
        assert not scribed["result"]["isError"], scribed
        mapped = Path(f"/proc/{wire.proc.pid}/maps").read_text()
        assert "cryptography" not in mapped and "watchfiles" not in mapped, "the SDK's HTTP/crypto packages were loaded"
        forged = wire.request(4, "tools/call", {"name": "stats", "arguments": {}, "requestState": "v1.forged"})
        assert forged["error"]["message"] == "Invalid or expired requestState", forged
        again = wire.request(5, "tools/call", {"name": "stats", "arguments": {}})
        assert not again["result"]["isError"]
    finally:
        assert wire.close() == 0
