"""Scopes: one vault serving several projects (context) and people (user). A scoped call sees its
scope's memories and the shared ones, never another scope's, through every tool; what it writes is
stamped with its scope. Real files, the real catalog and Chroma, and the MCP client over stdio."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.errors import InvalidInputError, NoteNotFoundError
from spellbook.scope import Scope, resolve, scoped
from spellbook.server.hub import Hub
from spellbook.vault.note import parse_note
from tests.helpers.engine import open_engine
from tests.helpers.stdio import call, error, server

SHOP, BLOG = Scope(context="shop"), Scope(context="blog")


@pytest.fixture
def three(engine: Engine) -> dict[str, dict]:
    """A memory of the shop project, one of the blog project, and a shared one, all about caching."""
    with scoped(SHOP):
        shop = engine.scribe(
            "Shop caching: Redis in front of the catalogue API.",
            title="Shop cache",
            category="eng",
            topic="cache",
            tags=["cache"],
        )
    with scoped(BLOG):
        blog = engine.scribe(
            "Blog caching: the CDN caches rendered posts.",
            title="Blog cache",
            category="eng",
            topic="cache",
            tags=["cache"],
        )
    shared = engine.scribe(
        "Caching rule of thumb: cache what is read often and changes rarely.",
        title="Caching rule",
        category="eng",
        topic="cache",
        tags=["cache"],
    )
    return {"shop": shop, "blog": blog, "shared": shared}


def test_writes_are_stamped_with_their_scope(engine: Engine, vault: Path, three: dict[str, dict]) -> None:
    assert parse_note((vault / three["shop"]["path"]).read_text()).meta["context"] == "shop"
    assert "context" not in parse_note((vault / three["shared"]["path"]).read_text()).meta
    with scoped(Scope(context="shop", user="ana")):
        out = engine.scribe("Ana's note on cache keys.", title="Cache keys")
        with pytest.raises(InvalidInputError, match="scoped to context 'shop'"):
            engine.scribe("Wrong project.", title="X", context="blog")
    meta = parse_note((vault / out["path"]).read_text()).meta
    assert (meta["context"], meta["user"]) == ("shop", "ana")


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_a_scoped_search_never_returns_another_scope(engine: Engine, three: dict[str, dict], mode: str) -> None:
    with scoped(SHOP):
        ids = {h["id"] for h in engine.memorize("caching", limit=10, mode=mode)["results"]}
    assert ids == {three["shop"]["id"], three["shared"]["id"]}
    unscoped = {h["id"] for h in engine.memorize("caching", limit=10, mode=mode)["results"]}
    assert unscoped == {m["id"] for m in three.values()}


def test_every_read_tool_stays_in_scope(engine: Engine, three: dict[str, dict]) -> None:
    blog_id, shop_id = three["blog"]["id"], three["shop"]["id"]
    with scoped(SHOP):
        assert {m["id"] for m in engine.list_memories()["memories"]} == {shop_id, three["shared"]["id"]}
        assert engine.get_index()["total_notes"] == 2
        assert {m["id"] for m in engine.get_topic("cache")["memories"]} == {shop_id, three["shared"]["id"]}
        assert blog_id not in {r["id"] for r in engine.related(shop_id, limit=10)["related"]}
        assert blog_id not in {r["id"] for r in engine.explore_related(shop_id)["related"]}
        timeline = engine.timeline(shop_id, window=5)
        assert blog_id not in {m["id"] for m in timeline["before"] + timeline["after"]}
        assert engine.analyze_knowledge()["notes"] == 2
        exported = engine.export("json")["content"]["memories"]
        assert {m["id"] for m in exported} == {shop_id, three["shared"]["id"]}
        for method, args in (
            ("get_memories", {"ids": [blog_id]}),
            ("revise", {"id": blog_id, "text": "x"}),
            ("erase", {"id": blog_id}),
            ("related", {"id": blog_id}),
            ("timeline", {"id": blog_id}),
            ("get_links", {"id": blog_id}),
            ("link", {"source": shop_id, "target": blog_id}),
        ):
            with pytest.raises(NoteNotFoundError):
                getattr(engine, method)(**args)
        engine.link(shop_id, three["shared"]["id"])  # shared memories are in every scope
    with scoped(BLOG):
        assert engine.get_links(three["shared"]["id"])["backlinks"] == []  # the shop's link is not the blog's
    assert len(engine.get_links(three["shared"]["id"])["backlinks"]) == 1


def test_users_are_scopes_too(engine: Engine) -> None:
    with scoped(Scope(user="ana")):
        ana = engine.scribe("Ana prefers tabs.", title="Ana tabs")
    with scoped(Scope(user="ben")):
        ben = engine.scribe("Ben prefers spaces.", title="Ben spaces")
        assert [h["id"] for h in engine.memorize("prefers", mode="keyword")["results"]] == [ben["id"]]
    with scoped(Scope(user="ana")):
        assert [h["id"] for h in engine.memorize("prefers", mode="keyword")["results"]] == [ana["id"]]
    assert len(engine.memorize("prefers", mode="keyword", filter={"user": "ben"})["results"]) == 1


def test_a_server_scoped_by_settings_refuses_other_scopes() -> None:
    assert resolve(None, None, "shop", None) == SHOP
    assert resolve("Shop", None, "shop", None) == Scope(context="Shop")
    with pytest.raises(InvalidInputError, match="scoped to context 'shop'"):
        resolve("blog", None, "shop", None)
    assert resolve("blog", "ana", None, None) == Scope("blog", "ana")


def test_scopes_hold_after_a_restart(settings: Settings, vault: Path) -> None:
    engine = open_engine(settings)
    with scoped(SHOP):
        engine.scribe("Restart-proof shop note about invoices.", title="Invoices")
    engine.close()
    engine = open_engine(settings)
    try:
        with scoped(BLOG):
            assert engine.memorize("invoices", mode="keyword")["results"] == []
        with scoped(SHOP):
            assert len(engine.memorize("invoices", mode="keyword")["results"]) == 1
    finally:
        engine.close()


def test_the_hub_scopes_each_call_and_forwards_the_scope(settings: Settings) -> None:
    owner = Hub(settings.model_copy(update={"context": "shop"}), watch=False, warm_up=False)
    owner.start(background=False)
    follower = Hub(settings, watch=False, warm_up=False)  # unscoped client on the same vault
    follower.start()
    try:
        shop = owner.call("scribe", {"text": "Owner's shop note on refunds.", "title": "Refunds"})
        blog = follower.call(
            "scribe", {"text": "Blog note on refunds policy.", "title": "Blog refunds", "context": "blog"}
        )
        assert follower.role == "follower"
        found = {
            h["id"]
            for h in follower.call("memorize", {"query": "refunds", "context": "blog", "mode": "keyword"})["results"]
        }
        assert found == {blog["id"]}
        found = {h["id"] for h in owner.call("memorize", {"query": "refunds", "mode": "keyword"})["results"]}
        assert found == {shop["id"]}
        with pytest.raises(InvalidInputError, match="scoped to context 'shop'"):
            owner.call("memorize", {"query": "refunds", "context": "blog"})
    finally:
        follower.close()
        owner.close()


@pytest.mark.slow
def test_scopes_over_mcp_stdio(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def main() -> None:
        async with Client(server(vault)) as client:
            shop = await call(client, "scribe", text="Shop deploys with ArgoCD.", title="Shop deploy", context="shop")
            blog = await call(client, "scribe", text="Blog deploys with Netlify.", title="Blog deploy", context="blog")
            hits = await call(client, "memorize", query="deploys", context="shop")
            assert [h["id"] for h in hits["results"]] == [shop["id"]]
            assert "No memory with id" in await error(client, "get_memories", ids=[blog["id"]], context="shop")
            both = await call(client, "memorize", query="deploys")
            assert {h["id"] for h in both["results"]} == {shop["id"], blog["id"]}
        async with Client(server(vault, "--context", "blog")) as client:
            hits = await call(client, "memorize", query="deploys")
            assert [h["id"] for h in hits["results"]] == [blog["id"]]
            assert "scoped to context 'blog'" in await error(client, "memorize", query="deploys", context="shop")
            listed = await call(client, "list_memories")
            assert [m["id"] for m in listed["memories"]] == [blog["id"]]

    anyio.run(main)


def test_erase_topic_in_a_scope_leaves_other_scopes_alone(engine: Engine, vault: Path, three: dict[str, dict]) -> None:
    engine.describe("eng", "cache", description="Caching notes.")
    with scoped(SHOP):
        preview = engine.erase_topic("cache")
        assert {m["id"] for m in preview["would_remove"]} == {three["shop"]["id"], three["shared"]["id"]}
        done = engine.erase_topic("cache", confirm=True)
        assert {m["id"] for m in done["removed"]} == {three["shop"]["id"], three["shared"]["id"]}
        assert done["description_files"] == []  # the blog still has a memory there
    assert (vault / three["blog"]["path"]).is_file() and (vault / "eng" / "cache" / "_about.md").is_file()
    assert [m["id"] for m in engine.list_memories()["memories"]] == [three["blog"]["id"]]
