"""The MCP SDK's stdio client against `spellbook serve`: server parameters, calls that must succeed or
fail; ``Wire``: the server on raw pipes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.helpers.processes import SPELLBOOK, child_env


def server(vault: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=SPELLBOOK, args=["serve", "--vault", str(vault), "--embedder", "hashing", *extra], env=child_env()
    )


async def call(client: Client, tool: str, **args):
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error(client: Client, tool: str, **args) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def eventually(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await anyio.sleep(0.1)


def stdio_server(vault: Path, constants: dict[str, object] | None = None, **env: str):
    """``spellbook serve`` over stdio on ``vault``, with ``constants`` set in it first (processes.tuned)."""
    from mcp.client.stdio import StdioServerParameters

    from tests.helpers.processes import SPELLBOOK, child_env, tuned

    args = ["serve", "--vault", str(vault), "--embedder", "hashing"]
    command = tuned(constants) if constants else [SPELLBOOK]
    return StdioServerParameters(command=command[0], args=[*command[1:], *args], env=child_env(**env))


class Wire:
    """``spellbook serve`` on raw pipes: JSON-RPC lines each way, every line the server wrote kept."""

    def __init__(self, vault: Path, cache: Path, stderr: Path, **env: str) -> None:
        self.proc = subprocess.Popen(
            [SPELLBOOK, "serve", "--vault", str(vault), "--embedder", "hashing"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.open("w"),
            env=child_env(SPELLBOOK_CACHE_DIR=str(cache), **env),
        )
        self.received: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, id_: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})})
        return self.until(lambda m: m.get("id") == id_)

    def until(self, wanted) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server closed stdout"
            message = json.loads(line)
            self.received.append(message)
            if wanted(message):
                return message

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.received += [json.loads(line) for line in self.proc.stdout.read().splitlines()]
        return self.proc.wait(timeout=30)
