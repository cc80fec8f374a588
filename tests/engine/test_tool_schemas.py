"""Every MCP tool publishes an output schema, and what it returns is exactly what the engine returned,
valid against that schema, with every key declared in it (spellbook/server/models/).

Through the SDK's real client: in memory against a hub that records what the engine handed back
(to compare key for key), and over stdio for what an agent's client sees in tools/list."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from mcp import Client

from spellbook.config import Settings
from spellbook.server.hub import Hub
from spellbook.server.tools import build_server
from tests.helpers.git import ENV
from tests.helpers.stdio import server

SERVER_DIR = Path(__file__).resolve().parents[2] / "spellbook" / "server"


class RecordingHub(Hub):
    """The real hub, keeping a copy of each engine result the tools receive."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.returned: list[tuple[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        out = super().call(method, params, timeout)
        self.returned.append((method, copy.deepcopy(out)))
        return out


def undeclared(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """Keys in ``value`` that ``schema`` does not name (free-form ``dict[str, Any]`` objects aside)."""
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        valid = (a for a in schema["anyOf"] if jsonschema.Draft202012Validator({**a, **_defs(root)}).is_valid(value))
        arm = next(valid)
        return undeclared(value, arm, root, where)
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            out = [f"{where}.{k}" for k in value if k not in props]
            for k, v in value.items():
                out += undeclared(v, props[k], root, f"{where}.{k}") if k in props else []
            return out
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):  # dict[str, Model]
            return [p for k, v in value.items() for p in undeclared(v, extra, root, f"{where}[{k!r}]")]
        return []  # dict[str, Any]: free-form by design (frontmatter, an embedder's health report)
    if isinstance(value, list) and "items" in schema:
        return [p for n, v in enumerate(value) for p in undeclared(v, schema["items"], root, f"{where}[{n}]")]
    return []


def _defs(root: dict[str, Any]) -> dict[str, Any]:
    return {"$defs": root["$defs"]} if "$defs" in root else {}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**ENV, "HOME": str(cwd)}, check=True, capture_output=True)


def test_every_tool_returns_the_engine_dict_valid_and_declared_in_its_schema(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    hub = RecordingHub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    (vault / "_about.md").write_text("---\ndescription: A test vault.\n---\n")  # get_index's description
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "base")
    hub.call("rebuild_index")
    checked: dict[str, int] = {}
    seen_keys: dict[str, set[str]] = {}

    async def main() -> None:
        async with Client(build_server(hub)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}

            async def call(name: str, **args: Any) -> dict[str, Any]:
                before = len(hub.returned)
                result = await client.call_tool(name, args)
                assert not result.is_error, result.content[0].text
                _method, engine_data = hub.returned[before]
                assert len(hub.returned) == before + 1, name
                data = result.structured_content
                # exactly what the engine returned (as JSON): no key dropped, none invented
                assert data == json.loads(json.dumps(engine_data, ensure_ascii=False, default=str)), name
                schema = tools[name].output_schema
                jsonschema.validate(data, schema)
                assert undeclared(data, schema, schema) == [], name
                text = result.content[0].text
                assert text and (name == "export" or not text.lstrip().startswith("{")), name  # a short human text
                checked[name] = checked.get(name, 0) + 1
                seen_keys.setdefault(name, set()).update(data)
                return data

            tea = await call(
                "scribe",
                text="# Brewing\nGreen tea steeps 3 minutes at 80C. password=hunter2secret",
                title="Green tea",
                category="kitchen",
                topic="tea",
                tags=["tea"],
                type="insight",
            )
            tea2 = await call(
                "scribe",
                text="# Brewing\nGreen tea steeps 3 minutes at 80C.",
                title="Green tea again",
                category="kitchen",
                topic="tea",
                tags=["Tea", "teas"],
                importance=4,
            )
            await call(
                "scribe",
                text="Deploys go out on Tuesdays. See [[Nowhere note]].",
                title="Deploy day",
                category="ops",
                tags=["deploy"],
                ttl_days=30,
            )
            loose = await call("scribe", text="An untagged thought.", title="Loose")
            again = await call(
                "scribe",
                text="An untagged thought, again. token=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                title="Loose again",
            )
            await call("memorize", query="green tea brewing")
            await call("memorize", query="deploy", mode="keyword", filter={"category": "ops"})
            full = await call("get_memories", ids=[tea["id"], "no-such-id"])
            await call("related", id=tea["id"])
            await call("timeline", id=tea["id"])
            await call(
                "revise",
                id=tea["id"],
                version=full["memories"][0]["version"],
                text="Green tea steeps 2 minutes. token=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            )
            await call("list_memories", limit=1)
            await call(
                "describe",
                category="kitchen",
                topic="tea",
                description="Brewing tea.",
                summary="Tea notes.",
                keywords=["tea", "brewing"],
            )
            await call("describe", category="kitchen", description="Food and drink.", title="Kitchen")
            await call("get_index")
            await call("get_index", scope="kitchen")
            await call("get_topic", topic="tea")
            await call("stats")
            await call("link", source=tea["id"], target=tea2["id"], relation="extends", reason="same brew")
            await call("link", source=tea["id"], target=tea2["id"], relation="extends")
            await call("get_links", id=tea["id"])
            await call("get_links", id=tea2["id"])
            await call("get_memories", ids=[tea["id"]])
            await call("explore_related", id=tea["id"])
            await call("analyze_knowledge", stale_days=1)
            await call("unlink", source=tea["id"], target=tea2["id"])
            await call("unlink", source=tea["id"], target=tea2["id"])
            versions = (await call("history", id=tea["id"]))["versions"]
            await call("restore", id=tea["id"], version=versions[-1]["version"])
            await call("restore", id=tea["id"], version=versions[-1]["version"])
            await call("export")
            await call("export", format="markdown", filter={"category": "kitchen"})
            await call("export", path="all.json")
            await call("import", path="all.json", dry_run=True)
            await call("import", path="all.json", on_conflict="new_id")
            await call("merge", ids=[loose["id"], again["id"]], text="One untagged thought. password=hunter2secret")
            await call("erase", id=tea2["id"])
            await call("history", id=tea2["id"])
            await call("erase_topic", topic="tea")
            await call("erase_topic", topic="tea", confirm=True)
            await call("rebuild_index")
            assert set(checked) == set(tools), f"not exercised: {set(tools) - set(checked)}"

    try:
        anyio.run(main)
    finally:
        hub.close()
    # the optional keys were there to check, not only the always-present ones
    assert {"redacted", "similar"} <= seen_keys["scribe"]
    assert {"description", "archived_notes"} <= seen_keys["get_index"]
    assert "about" in seen_keys["get_topic"]
    assert "note" in seen_keys["unlink"] and "unchanged" in seen_keys["restore"]
    assert {"path", "bytes", "content"} <= seen_keys["export"]
    assert {"would_remove", "removed", "note"} <= seen_keys["erase_topic"]
    assert "redacted" in seen_keys["merge"]


def test_every_tool_in_tools_list_has_an_output_schema_over_stdio(tmp_path: Path) -> None:
    async def main() -> None:
        async with Client(server(tmp_path / "vault")) as client:
            tools = (await client.list_tools()).tools
            assert len(tools) >= 20
            for tool in tools:
                schema = tool.output_schema
                assert schema and schema.get("type") == "object" and schema.get("properties"), tool.name
                jsonschema.Draft202012Validator.check_schema(schema)
                # definitions written in place: a client checking every result follows no $ref
                assert "$ref" not in json.dumps(schema) and "$defs" not in schema, tool.name
            result = await client.call_tool("stats", {})
            assert not result.is_error
            jsonschema.validate(result.structured_content, next(t for t in tools if t.name == "stats").output_schema)
            assert result.content[0].text.split(",")[0].endswith("notes")  # the text the model reads is still short

    anyio.run(main)


def test_inlined_definitions_check_what_the_references_did() -> None:
    from pydantic import BaseModel

    from spellbook.server.models.base import inline_defs
    from spellbook.server.models.core import MemorizeResult

    schema = MemorizeResult.model_json_schema()
    flat = inline_defs(schema)
    assert "$ref" in json.dumps(schema) and "$ref" not in json.dumps(flat)
    hit = {
        "id": "a",
        "path": "a.md",
        "title": "A",
        "score": 0.5,
        "snippet": "s",
        "category": None,
        "topic": None,
        "tags": [],
        "type": None,
        "updated": None,
        "relevance": 1.0,
    }
    for value in (
        {"query": "q", "mode": "hybrid", "results": [hit]},
        {"query": "q", "mode": "hybrid", "results": [{**hit, "score": "high"}]},
        {"query": "q", "mode": "hybrid", "results": [{k: v for k, v in hit.items() if k != "path"}]},
    ):
        assert jsonschema.Draft202012Validator(flat).is_valid(value) == jsonschema.Draft202012Validator(
            schema
        ).is_valid(value)

    class Tree(BaseModel):
        name: str
        children: list[Tree]

    recursive = Tree.model_json_schema()
    assert inline_defs(recursive) == recursive  # a definition that refers to itself stays a reference


def test_tool_modules_import_no_registry_in_a_circle() -> None:
    """Group modules take what they share from tools_common; only tools.py imports the groups."""
    for file in sorted(SERVER_DIR.glob("tools_*.py")):
        imported = {
            node.module
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert "spellbook.server.tools" not in imported, file.name
        if file.name != "tools_common.py":
            assert not {m for m in imported if m.startswith("spellbook.server.tools_")} - {
                "spellbook.server.tools_common"
            }, file.name


def test_describe_answers_over_a_hand_written_about_file_with_any_frontmatter(tmp_path: Path) -> None:
    """An _about.md a person wrote keeps its frontmatter as it is (a number for a title, keywords as
    one string, a `created` date): describe still answers, and its own keys are not overwritten."""
    vault = tmp_path / "vault"

    async def main() -> None:
        async with Client(server(vault)) as client:
            folder = vault / "kitchen"
            folder.mkdir(parents=True)
            (folder / "_about.md").write_text(
                "---\ntitle: 2024\nkeywords: tea, brewing\ncreated: 2023-05-01\nowner: Ana\n---\nWhat we cook.\n"
            )
            result = await client.call_tool("describe", {"category": "kitchen", "summary": "Food."})
            assert not result.is_error, result.content[0].text
            data = result.structured_content
            assert data["created"] is False and data["path"] == "kitchen/_about.md"  # the tool's own keys
            assert data["title"] == 2024 and data["keywords"] == "tea, brewing" and data["owner"] == "Ana"
            schema = next(t for t in (await client.list_tools()).tools if t.name == "describe").output_schema
            jsonschema.validate(data, schema)
            assert "created: 2023-05-01" in (folder / "_about.md").read_text()

    anyio.run(main)
