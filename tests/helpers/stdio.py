"""The MCP SDK's stdio client against `spellbook serve`: server parameters, calls that must succeed or fail."""

from __future__ import annotations

import os
import time
from pathlib import Path

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


def stdio_server(vault: Path, **env: str):
    from mcp.client.stdio import StdioServerParameters

    from tests.helpers.processes import SPELLBOOK, child_env

    args = ["serve", "--vault", str(vault), "--embedder", "hashing"]
    return StdioServerParameters(command=SPELLBOOK, args=args, env=child_env(**env))
