"""One table of operations (spellbook/engine/operations.py), and the engine, the hub, the MCP tools
and the web view agree with it: an operation missing from one side, a tool that calls another
operation than its own, or one whose read-only hint says otherwise than the table, fails here."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.engine.operations import OPERATIONS, operation
from spellbook.errors import SpellbookError, UnknownOperationError
from spellbook.server import channel
from spellbook.server.hub import Forward, Hub, Local
from spellbook.server.tools import build_server
from spellbook.server.web import ROUTES, Guard, WebApp
from spellbook.server.web.app import Ask


class Recording:
    """A hub transport that records the operation a call names and answers with an error."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        self.sent.append(method)
        raise SpellbookError("recorded")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "vault").mkdir()
    return Settings(vault=tmp_path / "vault", embedder="hashing", git_commit="false", watch=False)


@pytest.fixture
def recorded(settings: Settings) -> tuple[Hub, Recording]:
    hub, recording = Hub(settings, watch=False), Recording()
    hub._transport = recording  # what a started hub picks by its role; here, the calls are only recorded
    return hub, recording


def _minimal(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments of the right types for a tool's required parameters."""
    samples = {"string": "x", "array": ["x", "y"], "integer": 1, "number": 1.0, "boolean": False, "object": {}}
    props = schema.get("properties", {})
    return {name: samples[props[name].get("type", "string")] for name in schema.get("required", [])}


def test_every_operation_is_an_engine_method_of_its_service(settings: Settings) -> None:
    engine = Engine(settings, embedder=HashingEmbedder(64))
    try:
        for op in OPERATIONS.values():
            bound = getattr(engine, op.name)
            assert inspect.ismethod(bound) and bound == getattr(getattr(engine, op.service), op.method), op.name
    finally:
        engine.close()


def test_the_tools_are_the_table_s_and_each_calls_its_own_operation(recorded: tuple[Hub, Recording]) -> None:
    hub, recording = recorded

    async def main() -> dict[str, tuple[Any, list[str]]]:
        calls = {}
        async with Client(build_server(hub)) as client:
            for listed in (await client.list_tools()).tools:
                recording.sent.clear()
                result = await client.call_tool(listed.name, _minimal(listed.input_schema))
                assert result.is_error and "recorded" in result.content[0].text, (listed.name, result)
                calls[listed.name] = (listed, list(recording.sent))
        return calls

    calls = anyio.run(main)
    tools = {op.tool: op for op in OPERATIONS.values() if op.tool}
    assert sorted(calls) == sorted(tools)  # no tool outside the table, no tool of the table missing
    for name, (listed, sent) in calls.items():
        op = tools[name]
        assert sent == [op.name], (name, sent)
        assert listed.annotations.read_only_hint is not op.writes, name
        assert listed.output_schema is not None and listed.output_schema.get("title") == op.result.split(".")[1], name


def test_the_hub_serves_the_table_and_refuses_any_other_name(settings: Settings) -> None:
    hub = Hub(settings, watch=False, warm_up=False, reconcile_on_open=False)
    assert isinstance(hub._transport, Forward)  # starting: an owner, if there is one, answers
    hub.start(background=False)
    follower = Hub(settings, watch=False)
    follower.start(background=False)
    try:
        assert isinstance(hub._transport, Local) and isinstance(follower._transport, Forward)  # chosen with the role
        assert follower.call("stats")["notes"] == 0
        assert hub._channel is not None and hub._channel.methods == frozenset(OPERATIONS)
        for op in OPERATIONS.values():
            assert callable(getattr(hub.engine, op.name)), op.name
        with pytest.raises(UnknownOperationError, match="no operation 'memorise'"):
            hub.call("memorise", {"query": "x"})
        assert hub.call("stats")["notes"] == 0
    finally:
        follower.close()
        hub.close()
    with pytest.raises(UnknownOperationError):
        operation(None)


def test_an_owner_that_does_not_offer_an_operation_is_its_own_error_and_the_page_says_so(settings: Settings) -> None:
    """An owner process of an older version serves fewer operations: a follower gets an
    ``UnknownOperationError`` (by type, over the real channel), and the web view answers 501."""
    index = settings.index_path
    index.mkdir(parents=True, exist_ok=True)
    older = channel.ChannelServer(index, lambda method, params: {"notes": 0}, frozenset({"stats"}))
    info = older.start()
    (index / "owner.json").write_text(json.dumps({"pid": os.getpid(), **info}))
    hub = Hub(settings, watch=False)  # not started: it forwards, as a follower does
    try:
        assert hub.call("stats") == {"notes": 0}
        with pytest.raises(UnknownOperationError) as raised:
            hub.call("graph", {})
        assert raised.value.by_owner and "restart it with this version" in str(raised.value)
        status, body = anyio.run(_get, WebApp(hub, Guard(None, None, set()), ROUTES), "/graph")
    finally:
        older.close()
    assert status == 501 and "does not offer" in body


def test_a_page_answering_a_get_calls_no_operation_that_writes(recorded: tuple[Hub, Recording]) -> None:
    hub, recording = recorded
    guard = Guard(None, None, set())

    async def ask(post: bool, method: str) -> None:
        await Ask(hub, guard, {}, {}, {}, {}, post=post).call(method, id="x")

    with pytest.raises(PermissionError, match="erase writes"):
        anyio.run(ask, False, "erase")
    assert recording.sent == []
    for post, method in ((True, "erase"), (False, "get_links")):
        with pytest.raises(SpellbookError, match="recorded"):
            anyio.run(ask, post, method)
    assert recording.sent == ["erase", "get_links"]


async def _get(app: WebApp, path: str) -> tuple[int, str]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [(b"host", b"127.0.0.1")]}
    await app(scope, receive, send)
    return sent[0]["status"], sent[1]["body"].decode()
