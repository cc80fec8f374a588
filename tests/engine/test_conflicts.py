"""A conflict's text leaves the owner scrubbed, whatever raised it: the file's current content in a
``ConflictError`` passes the privacy filter at one door (server/hub.py), for every tool that
refuses a stale version, for the store's conflict on a race, and for a conflict a service raises
itself. Real files (a note a person wrote with a key in it), real git, the MCP tools through the
SDK's client, and a follower."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from spellbook.config import Settings
from spellbook.errors import ConflictError, FileChangedError
from spellbook.server.hub import Hub
from spellbook.server.tools import build_server
from tests.helpers.git import git

KEY = "sk-ant-api03-" + "Zq8xW2vT5nR1mK7pL4sJ9dF3gH6bN0cV" * 3 + "-AAAA"  # fake, shaped like an Anthropic key
HAND = f"# Provider notes\n\nThe staging key is {KEY}, rotate it monthly.\n"  # a person's note: no id, a key


@pytest.fixture
def hub(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Provider notes.md").write_text(HAND)
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "by hand")
    hub = Hub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    yield hub
    hub.close()


def test_every_tool_refusing_a_stale_version_answers_without_the_secret(hub: Hub) -> None:
    note = hub.call("list_memories", {})["memories"][0]
    other = hub.call("scribe", {"text": "Rotate provider keys monthly.", "title": "Key rotation"})
    commit = git(hub.settings.vault_dir, "log", "-1", "--format=%H", "--", note["path"]).strip()
    stale = {
        "erase": {"id": note["id"], "version": "stale"},
        "revise": {"id": note["id"], "text": "new", "version": "stale"},
        "merge": {"ids": [note["id"], other["id"]], "version": "stale"},
        "restore": {"id": note["id"], "version": commit, "current_version": "stale"},
    }

    async def main() -> None:
        async with Client(build_server(hub)) as client:
            for tool, args in stale.items():
                result = await client.call_tool(tool, args)
                text = result.content[0].text
                assert result.is_error and "changed on disk" in text, (tool, text)
                assert KEY[:20] not in text and "[REDACTED:anthropic-key]" in text, (tool, text)

    anyio.run(main)
    assert (hub.settings.vault_dir / "Provider notes.md").read_text() == HAND  # nothing was written


@pytest.mark.parametrize("role", ["owner", "follower"])
def test_a_conflict_a_service_raises_is_scrubbed_at_the_door(hub: Hub, monkeypatch, role: str) -> None:
    """The door is where a call leaves the owner, not each service: a service that raises a
    changed file with the raw text (as the store does on a race) still hands out no secret."""

    def erase(**_: Any) -> None:
        raise FileChangedError("Provider notes.md", "v1", "v2", HAND, note_id="n1", retry="erase")

    monkeypatch.setattr(hub.engine, "erase", erase)
    caller = hub if role == "owner" else Hub(hub.settings, watch=False, warm_up=False)
    if role == "follower":
        caller.start(background=False)
        assert caller.role == "follower"
    try:
        with pytest.raises(ConflictError) as raised:
            caller.call("erase", {"id": "n1", "version": "v1"})
    finally:
        if caller is not hub:
            caller.close()
    conflict = raised.value
    assert KEY[:20] not in str(conflict) and KEY[:20] not in conflict.content
    assert "[REDACTED:anthropic-key]" in conflict.content and "call erase again" in str(conflict)
    assert (conflict.path, conflict.expected_version, conflict.current_version, conflict.note_id) == (
        "Provider notes.md",
        "v1",
        "v2",
        "n1",
    )


@pytest.mark.parametrize("tool", ["revise", "restore"])
def test_a_person_saving_between_the_read_and_the_write_gets_no_secret_out(hub: Hub, monkeypatch, tool: str) -> None:
    """The store's own conflict: the tool read the note, then the person saved it (a key added by
    hand) before the store wrote; the store refuses with the file's raw text, and the tool's answer
    over the SDK's client holds it scrubbed, naming the memory and the call to retry."""
    note = hub.call("list_memories", {})["memories"][0]
    file = hub.settings.vault_dir / note["path"]
    commit = git(hub.settings.vault_dir, "log", "-1", "--format=%H", "--", note["path"]).strip()
    hub.call("revise", {"id": note["id"], "text": "Rotated; see the vault."})  # restore then has a change to write
    args = {"revise": {"id": note["id"], "text": "new body"}, "restore": {"id": note["id"], "version": commit}}[tool]
    write = hub.engine.vault.write
    saved = HAND + f"\nAnd the backup key is {KEY.replace('Zq8', 'Yq8')}.\n"

    def the_person_saves_first(path: str, text: str, expected_version: str | None = None) -> str:
        file.write_text(saved)
        return write(path, text, expected_version=expected_version)

    monkeypatch.setattr(hub.engine.vault, "write", the_person_saves_first)

    async def main() -> str:
        async with Client(build_server(hub)) as client:
            result = await client.call_tool(tool, args)
            assert result.is_error
            return result.content[0].text

    text = anyio.run(main)
    assert "changed on disk" in text and "backup key" in text, text
    assert f"Memory {note['id']!r}" in text and f"call {tool} again" in text, text
    assert KEY[:20] not in text and KEY.replace("Zq8", "Yq8")[:20] not in text and "[REDACTED:anthropic-key]" in text
    assert file.read_text() == saved  # the person's save stands


@pytest.mark.parametrize("role", ["owner", "follower"])
def test_the_memory_resource_is_the_engine_s_scrubbed_file(hub: Hub, role: str) -> None:
    """``memory://notes/{id}`` asks the engine for the file (Access scrubs it, as every answer),
    also from a follower, which never reads the vault's files itself."""
    note = hub.call("list_memories", {})["memories"][0]
    caller = hub if role == "owner" else Hub(hub.settings, watch=False, warm_up=False)
    if role == "follower":
        caller.start(background=False)
        assert caller.role == "follower"

    async def main() -> str:
        async with Client(build_server(caller)) as client:
            return (await client.read_resource(f"memory://notes/{note['id']}")).contents[0].text

    try:
        text = anyio.run(main)
    finally:
        if caller is not hub:
            caller.close()
    assert text == HAND.replace(KEY, "[REDACTED:anthropic-key]")
