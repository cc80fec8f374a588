"""End to end over real stdio with the mcp SDK's client: one server, then two on one vault."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from spellbook.vault.note import parse_note
from tests.helpers.stdio import alive, call, error, eventually, server

pytestmark = pytest.mark.slow


def test_tools_over_stdio(tmp_path: Path) -> None:
    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {
                "scribe",
                "memorize",
                "get_memories",
                "revise",
                "erase",
                "list_memories",
                "stats",
                "rebuild_index",
                "get_index",
            } <= names
            # the template's system notes are there for the agent to read first
            guide = await call(client, "memorize", query="how to chunk memories", filter={"category": "system"})
            assert guide["results"] and all(h["category"] == "system" for h in guide["results"])

            stored = await call(
                client,
                "scribe",
                text="Tea steeps for 3 minutes at 80C.",
                title="Green tea",
                category="kitchen",
                tags=["tea"],
                type="insight",
            )
            assert (vault / stored["path"]).is_file()
            hits = (await call(client, "memorize", query="green tea steeping"))["results"]
            assert hits[0]["id"] == stored["id"]  # read-your-writes
            full = (await call(client, "get_memories", ids=[stored["id"]]))["memories"][0]
            assert full["text"] == "Tea steeps for 3 minutes at 80C." and full["metadata"]["tags"] == ["tea"]

            file = vault / stored["path"]
            file.write_text(file.read_text().replace("3 minutes", "2 minutes"))  # a person edits it
            message = await error(client, "revise", id=stored["id"], text="4 minutes", version=full["version"])
            assert "changed on disk" in message and "2 minutes" in message
            assert "2 minutes" in file.read_text()

            assert "query is empty" in await error(client, "memorize", query=" ")
            assert "No memory with id" in await error(client, "erase", id="nope")
            assert "importance" in await error(client, "scribe", text="x", importance=7)
            assert not list(vault.rglob("x.md"))

            await call(client, "erase", id=stored["id"])
            assert not file.exists() and (vault / ".trash" / stored["path"]).exists()
            rebuilt = await call(client, "rebuild_index")
            assert rebuilt["indexed"] >= 3
            stats = await call(client, "stats")
            assert stats["notes"] == rebuilt["indexed"] and stats["state"] == "ready"

    anyio.run(main)


def test_hand_edits_are_picked_up_by_the_watcher(tmp_path: Path) -> None:
    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as client:
            await call(client, "stats")
            (vault / "Hand written.md").write_text("# Bicycle\n\nThe chain needs oil every 300 km.\n")

            async def found():
                hits = (await call(client, "memorize", query="bicycle chain oil", mode="keyword"))["results"]
                return hits and hits[0]["path"] == "Hand written.md"

            started = time.monotonic()
            assert await eventually(found, timeout=5)
            assert time.monotonic() - started < 2.0
            (vault / "Hand written.md").unlink()

            async def gone():
                hits = (await call(client, "memorize", query="bicycle chain oil", mode="keyword"))["results"]
                return not any(h["path"] == "Hand written.md" for h in hits)

            assert await eventually(gone, timeout=5)

    anyio.run(main)


def test_two_servers_share_one_vault_and_hand_over(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    pids: list[int] = []

    async def main() -> None:
        async with Client(server(vault)) as first:
            owner = (await call(first, "stats"))["owner_pid"]
            pids.append(owner)
            async with Client(server(vault)) as second:
                assert (await call(second, "stats"))["owner_pid"] == owner  # forwarded to the owner
                a = await call(first, "scribe", text="Alpha fact about saffron.", title="Saffron", category="c")
                b = await call(second, "scribe", text="Beta fact about cardamom.", title="Cardamom", category="c")
                started = time.monotonic()
                assert (await call(second, "memorize", query="saffron"))["results"][0]["id"] == a["id"]
                assert (await call(first, "memorize", query="cardamom"))["results"][0]["id"] == b["id"]
                assert time.monotonic() - started < 2.0

                os.kill(owner, signal.SIGKILL)  # the owner dies hard; the second takes over

                async def new_owner():
                    try:
                        stats = await call(second, "stats")
                    except AssertionError:
                        return None
                    return stats["owner_pid"] if stats["owner_pid"] != owner else None

                took_over = await eventually(new_owner, timeout=15)
                assert took_over and took_over != owner
                pids.append(took_over)
                c = await call(second, "scribe", text="Gamma fact about sumac.", title="Sumac", category="c")
                hits = {h["id"] for h in (await call(second, "memorize", query="fact", limit=10))["results"]}
                assert {a["id"], b["id"], c["id"]} <= hits  # nothing lost in the hand-over

    anyio.run(main)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "a server process outlived its client"


def test_resources_and_prompts(tmp_path: Path) -> None:
    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as client:
            stored = await call(client, "scribe", text="Use uv for Python envs.", title="Python envs", category="dev")
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"memory://index", "memory://recent"} <= listed
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "memory://notes/{id}" in templates
            index = json.loads((await client.read_resource("memory://index")).contents[0].text)
            assert index["categories"]["dev"]["notes"] == 1
            recent = json.loads((await client.read_resource("memory://recent")).contents[0].text)
            assert recent["memories"][0]["id"] == stored["id"]
            note = (await client.read_resource(f"memory://notes/{stored['id']}")).contents[0].text
            assert note == (vault / stored["path"]).read_text()
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert {"chunking_guide", "summarize_memories"} <= prompts
            guide = await client.get_prompt("chunking_guide", {})
            assert "one idea" in guide.messages[0].content.text.lower()
            summary = await client.get_prompt("summarize_memories", {"subject": "python environments"})
            assert "Use uv for Python envs." in summary.messages[0].content.text

    anyio.run(main)


def test_a_follower_gives_the_owners_error_text(tmp_path: Path) -> None:
    """A ConflictError crosses the owner/follower hop as itself: the agent reads the same text either way."""
    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as first, Client(server(vault)) as second:
            owner = (await call(first, "stats"))["owner_pid"]
            assert (await call(second, "stats"))["owner_pid"] == owner  # the second is a follower
            stored = await call(second, "scribe", text="Bread proves for 2 hours.", title="Bread", category="k")
            stale = (await call(first, "get_memories", ids=[stored["id"]]))["memories"][0]["version"]
            file = vault / stored["path"]
            file.write_text(file.read_text().replace("2 hours", "90 minutes"))  # a person edits it
            current = (await call(first, "get_memories", ids=[stored["id"]]))["memories"][0]["version"]
            assert current != stale
            texts = [await error(c, "revise", id=stored["id"], text="3 hours", version=stale) for c in (first, second)]
            assert texts[0] == texts[1]
            assert "changed on disk" in texts[1] and repr(current) in texts[1] and "90 minutes" in texts[1]
            assert "No memory with id" in await error(second, "erase", id="nope")
            assert "90 minutes" in file.read_text()

    anyio.run(main)


def test_merge_over_stdio(tmp_path: Path) -> None:
    """scribe's near-duplicate hint names the merge call; merge moves the duplicate to the trash and
    relinks a hand-written note; bad calls come back as is_error with what to do."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Hand.md").write_text("# Hand\n\nI wrote down [[Tea again|the second tea note]].\n")

    async def main() -> None:
        async with Client(server(vault)) as client:
            first = await call(client, "scribe", text="Green tea steeps 3 minutes at 80C.", title="Tea", tags=["tea"])
            result = await client.call_tool(
                "scribe", {"text": "Green tea steeps 3 minutes at 80C.", "title": "Tea again", "keywords": ["steep"]}
            )
            second = result.structured_content
            assert f'merge(ids=["{first["id"]}", "{second["id"]}"])' in result.content[0].text

            assert "No memory with id 'nope'" in await error(client, "merge", ids=[first["id"], "nope"])
            assert "more than once" in await error(client, "merge", ids=[first["id"], first["id"]])
            await error(client, "merge", ids=[first["id"]])  # the schema asks for 2 ids
            stale = await error(client, "merge", ids=[first["id"], second["id"]], version="0" * 16)
            assert "changed on disk" in stale and "call merge again" in stale
            assert (vault / second["path"]).exists()

            merged = await call(client, "merge", ids=[first["id"], second["id"]], version=first["version"])
            assert merged["id"] == first["id"] and merged["merged"][0]["id"] == second["id"]
            assert [r["path"] for r in merged["relinked"]] == ["Hand.md"]
            assert (vault / "Hand.md").read_text() == "# Hand\n\nI wrote down [[Tea|the second tea note]].\n"
            assert not (vault / second["path"]).exists()
            trashed = parse_note((vault / ".trash" / second["path"]).read_text()).meta
            assert trashed["merged_into"] == first["id"]  # read, not matched: an all-digit id is written quoted
            full = (await call(client, "get_memories", ids=[first["id"]]))["memories"][0]
            assert full["text"].endswith("## Tea again\n\nGreen tea steeps 3 minutes at 80C.\n")
            assert full["metadata"]["keywords"] == ["steep"] and full["version"] == merged["version"]
            assert [b["path"] for b in full["backlinks"]] == ["Hand.md"]

    anyio.run(main)
