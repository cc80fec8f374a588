"""The hierarchical index: get_index(scope), folder descriptions (_about.md), describe, get_topic's
header, and generated overview notes. Real files in temporary vaults."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.errors import InvalidInputError
from tests.helpers.engine import open_engine
from tests.helpers.stdio import stdio_server

CATEGORY_ABOUT = """---
title: Operations
description: How we run production. Deploys, servers and on-call.
keywords: [ops, production]
---
Longer notes a person keeps about this category.
"""

TOPIC_ABOUT = """---
summary: How code reaches production
keywords:
  - ci
  - argocd
---
# Deploy

Everything about the deploy pipeline, from merge to running pods.
"""


def _write(vault: Path, path: str, text: str) -> Path:
    file = vault / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    return file


def _seed(engine: Engine) -> dict[str, str]:
    ids = {
        "deploy": engine.scribe(
            "Deploys go through GitHub Actions, then ArgoCD.",
            title="Deploy pipeline",
            category="ops",
            topic="deploy",
            tags=["ci"],
        )["id"],
        "rollback": engine.scribe(
            "Roll back with argocd app rollback.",
            title="Rollback",
            category="ops",
            topic="deploy",
            tags=["ci", "argocd"],
        )["id"],
        "oncall": engine.scribe("Alice is on call this week.", title="On-call", category="ops", topic="oncall")["id"],
        "tea": engine.scribe(
            "Green tea steeps for 2 minutes.", title="Tea", category="kitchen", topic="drinks", tags=["tea"]
        )["id"],
    }
    return ids


def test_get_index_shows_descriptions_summaries_keywords_and_counts(engine: Engine, vault: Path) -> None:
    _seed(engine)
    _write(vault, "ops/_about.md", CATEGORY_ABOUT)
    _write(vault, "ops/deploy/_about.md", TOPIC_ABOUT)
    _write(vault, "people/_about.md", "Who is who: colleagues, their roles, how to reach them.\n")
    engine.reconcile()
    index = engine.get_index()
    assert index["total_notes"] == 4 and index["total_categories"] == 3 and index["total_topics"] == 3
    assert index["total_chunks"] == 4 and index["updated"]
    ops = index["categories"]["ops"]
    assert ops["title"] == "Operations" and ops["description"].startswith("How we run production.")
    assert ops["keywords"] == ["ops", "production"]
    assert (ops["notes"], ops["chunks"], ops["topic_count"]) == (3, 3, 2)
    deploy = ops["topics"]["deploy"]
    assert deploy["summary"] == "How code reaches production" and deploy["keywords"] == ["ci", "argocd"]
    assert (deploy["notes"], deploy["chunks"], deploy["title"]) == (2, 2, "deploy")
    oncall = ops["topics"]["oncall"]  # no description: keywords fall back to the topic's most used tags
    assert "summary" not in oncall and oncall["keywords"] == [] and oncall["notes"] == 1
    assert index["categories"]["kitchen"]["topics"]["drinks"]["keywords"] == ["tea"]
    # a described category without memories yet is listed (where to file things), the body as description
    people = index["categories"]["people"]
    assert people["notes"] == 0 and people["description"].startswith("Who is who")


def test_get_index_scope_narrows_to_one_category(engine: Engine) -> None:
    _seed(engine)
    scoped = engine.get_index(scope="OPS")
    assert list(scoped["categories"]) == ["ops"] and scoped["scope"] == "OPS"
    assert scoped["total_notes"] == 3 and scoped["total_topics"] == 2
    with pytest.raises(InvalidInputError, match=r"No category 'nope'\. Categories: kitchen, ops"):
        engine.get_index(scope="nope")


def test_folder_notes_are_not_memories(engine: Engine, vault: Path) -> None:
    _seed(engine)
    _write(vault, "ops/deploy/_about.md", TOPIC_ABOUT + "\nThe word zanzibar appears only here.\n")
    _write(vault, "ops/_overview.md", "# A person's own overview\n\nzanzibar\n")
    engine.reconcile()
    for mode in ("hybrid", "keyword", "semantic"):
        hits = engine.memorize("zanzibar deploy pipeline", mode=mode, limit=20)["results"]
        assert not any(h["path"].endswith(("_about.md", "_overview.md")) for h in hits)
    listed = engine.list_memories(limit=200)
    assert listed["total"] == 4 and not any(m["path"].endswith("_about.md") for m in listed["memories"])
    assert engine.stats()["notes"] == 4 and engine.stats()["files"] == 6
    assert engine.check()["consistent"]


def test_describe_writes_about_files_and_keeps_hand_edits(engine: Engine, vault: Path) -> None:
    _seed(engine)
    out = engine.describe("ops", topic="deploy", description="From merge to running pods.", keywords=["ci"])
    assert out["created"] and out["path"] == "ops/deploy/_about.md"
    file = vault / out["path"]
    assert file.read_text() == "---\ndescription: From merge to running pods.\nkeywords:\n  - ci\n---\n"
    # a person adds a key, a comment and a body in Obsidian
    file.write_text(file.read_text().replace("---\n", "---\nowner: alice  # keep me\n", 1) + "Ask Alice first.\n")
    engine.reconcile()
    engine.describe("ops", topic="deploy", summary="Merge to prod", keywords=[])
    text = file.read_text()
    assert "owner: alice  # keep me\n" in text and text.endswith("Ask Alice first.\n")
    assert "summary: Merge to prod" in text and "keywords" not in text  # [] removed it
    topic = engine.get_index(scope="ops")["categories"]["ops"]["topics"]["deploy"]
    assert topic["summary"] == "Merge to prod" and topic["keywords"] == ["ci", "argocd"]  # tags, most used first
    again = engine.describe("OPS", topic="Deploy", summary="Merge to prod")  # the folder on disk, whatever the case
    assert again["path"] == "ops/deploy/_about.md" and not again["created"]
    category = engine.describe("ops", description="Operations.")
    assert (
        category["path"] == "ops/_about.md" and engine.get_index()["categories"]["ops"]["description"] == "Operations."
    )
    with pytest.raises(InvalidInputError, match="Nothing to write"):
        engine.describe("ops")
    with pytest.raises(InvalidInputError, match="category is empty"):
        engine.describe(" ", description="x")
    with pytest.raises(InvalidInputError, match="summary is"):
        engine.describe("ops", summary="x" * 500)


def test_get_topic_starts_with_the_topic_description(engine: Engine, vault: Path) -> None:
    _seed(engine)
    _write(vault, "ops/deploy/_about.md", TOPIC_ABOUT)
    engine.reconcile()
    topic = engine.get_topic("deploy")
    about = topic["about"]
    assert about["path"] == "ops/deploy/_about.md" and about["summary"] == "How code reaches production"
    assert about["description"].startswith("Everything about the deploy pipeline")
    assert "# Deploy" in about["text"] and about["keywords"] == ["ci", "argocd"]
    assert [m["title"] for m in topic["memories"]] == ["Deploy pipeline", "Rollback"]
    assert "about" not in engine.get_topic("oncall")


def test_index_survives_a_restart_and_a_rebuild(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    try:
        _seed(engine)
        engine.describe("ops", topic="deploy", summary="How code reaches production")
        before = engine.get_index()
    finally:
        engine.close()
    engine = open_engine(settings)  # restart: the catalog on disk
    try:
        assert engine.get_index() == before
        assert engine.check()["consistent"]
    finally:
        engine.close()
    shutil.rmtree(settings.index_path)  # the index is derived: rebuilt from the files alone
    engine = open_engine(settings)
    try:
        after = engine.get_index()
        assert after["categories"]["ops"]["topics"]["deploy"]["summary"] == "How code reaches production"
        on_disk = [p for p in vault.rglob("*.md") if not p.name.startswith("_")]
        assert after["total_notes"] == len(on_disk) == 4
    finally:
        engine.close()


def test_overview_notes_list_topics_without_churn_and_never_overwrite_edits(vault: Path) -> None:
    settings = Settings(vault=vault, embedder="hashing", watch=False, overview_notes=True)
    engine = open_engine(settings)
    try:
        _seed(engine)
        _write(vault, "ops/deploy/_about.md", TOPIC_ABOUT)
        engine.reconcile()  # reconcile maintains: overviews written
        file = vault / "ops" / "_overview.md"
        text = file.read_text()
        assert text.startswith("---\ngenerated_by: spellbook\n")
        assert "## deploy\n\nHow code reaches production\n\n- [[ops/deploy/Deploy pipeline|Deploy pipeline]]" in text
        assert "- [[ops/oncall/On-call|On-call]]" in text
        assert (vault / "kitchen" / "_overview.md").is_file()
        stamp = file.stat().st_mtime_ns
        assert engine.write_overviews(force=True) == {"written": [], "kept": []}
        assert file.stat().st_mtime_ns == stamp  # byte-identical content: no write
        # never a memory
        assert not any(
            h["path"].endswith("_overview.md") for h in engine.memorize("Deploy pipeline", limit=20)["results"]
        )

        engine.scribe("Bob is on call next week.", title="Next on-call", category="ops", topic="oncall")
        engine.write_overviews()
        assert "[[ops/oncall/Next on-call|Next on-call]]" in file.read_text()

        edited = file.read_text().replace("## deploy", "## deploy (my notes)")  # a person edits the body
        file.write_text(edited)
        engine.reconcile()
        engine.scribe("Carol too.", title="Carol", category="ops", topic="oncall")
        assert engine.write_overviews(force=True)["kept"] == ["ops/_overview.md"]
        assert file.read_text() == edited  # left alone

        file.write_text("---\ntitle: my overview\n---\nMine now.\n")  # no marker: a person's file
        engine.reconcile()
        engine.write_overviews(force=True)
        assert file.read_text() == "---\ntitle: my overview\n---\nMine now.\n"
        assert engine.check()["consistent"]
    finally:
        engine.close()


# --- over real MCP stdio ------------------------------------------------------------------------


@pytest.mark.slow
def test_structure_tools_over_stdio(tmp_path: Path) -> None:
    import time

    import anyio
    from mcp import Client

    from tests.helpers.stdio import call, error, eventually

    vault = tmp_path / "vault"
    params = stdio_server(vault, SPELLBOOK_OVERVIEW_NOTES="true")
    seen: dict = {}

    async def first_run() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"describe", "erase_topic", "get_index", "get_topic"} <= set(tools)
            assert "scope" in tools["get_index"].input_schema["properties"]
            await call(
                client,
                "scribe",
                text="Deploys go through GitHub Actions.",
                title="Deploy",
                category="ops",
                topic="deploy",
                tags=["ci"],
            )
            await call(
                client, "scribe", text="Roll back with argocd.", title="Rollback", category="ops", topic="deploy"
            )
            described = await call(
                client,
                "describe",
                category="ops",
                topic="deploy",
                description="From merge to running pods.",
                summary="How code ships",
                keywords=["ci", "argocd"],
            )
            assert described["path"] == "ops/deploy/_about.md" and (vault / described["path"]).is_file()
            await call(client, "describe", category="ops", description="Operations: how we run production.")

            result = await client.call_tool("get_index", {"scope": "ops"})
            assert not result.is_error and "How code ships" in result.content[0].text
            index = result.structured_content
            assert list(index["categories"]) == ["ops"]
            topic = index["categories"]["ops"]["topics"]["deploy"]
            assert (topic["summary"], topic["keywords"], topic["notes"]) == ("How code ships", ["ci", "argocd"], 2)
            assert index["categories"]["ops"]["description"] == "Operations: how we run production."

            # a person edits the description in Obsidian: the watcher picks it up
            about = vault / "ops/deploy/_about.md"
            about.write_text(about.read_text().replace("How code ships", "How code reaches prod"))

            async def edited():
                data = await call(client, "get_index", scope="ops")
                return data["categories"]["ops"]["topics"]["deploy"].get("summary") == "How code reaches prod"

            assert await eventually(edited, timeout=5)

            topic_result = await client.call_tool("get_topic", {"topic": "deploy"})
            assert topic_result.content[0].text.startswith("# About: ")
            assert topic_result.structured_content["about"]["description"] == "From merge to running pods."

            assert "No category 'nope'" in await error(client, "get_index", scope="nope")
            assert "Nothing to write" in await error(client, "describe", category="ops")
            hits = (await call(client, "memorize", query="merge running pods", limit=20))["results"]
            assert not any(h["path"].endswith("_about.md") for h in hits)

            overview = vault / "ops" / "_overview.md"

            async def written():
                return overview.is_file() and "[[ops/deploy/Rollback|Rollback]]" in overview.read_text()

            assert await eventually(written, timeout=10)
            stamp = overview.stat().st_mtime_ns
            await anyio.sleep(5)  # two maintenance rounds and the watcher's pass over our own write
            assert overview.stat().st_mtime_ns == stamp, "overview rewritten with identical content"
            seen["index"] = await call(client, "get_index")

    async def second_run() -> None:
        async with Client(params) as client:
            index = await call(client, "get_index")
            assert index == seen["index"]  # the same after a restart
            notes = [p for p in vault.rglob("*.md") if not p.name.startswith("_") and ".trash" not in p.parts]
            assert index["total_notes"] == len(notes)
            assert (await call(client, "stats"))["notes"] == len(notes)

    started = time.monotonic()
    anyio.run(first_run)
    anyio.run(second_run)
    assert time.monotonic() - started < 120
