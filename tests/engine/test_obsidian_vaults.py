"""Any vault Obsidian opens works: every read tool copes with every frontmatter shape.

Obsidian (and its popular plugins: Dataview, Templater, Linter, Tasks) accept a key's value as a
string, a list, a number, a date, a map or nothing at all (``aliases: Fold``, ``aliases:``,
``tags: 2024``, ``cssclasses: wide``...). Hypothesis writes notes with such frontmatter and
Obsidian-style bodies (wikilinks with #heading, ^block and |alias, embeds, callouts, code blocks)
into a real vault, indexes them, and calls every read tool through the MCP SDK's client: no tool
may fail with an unexpected error (a deliberate Spellbook error, like an unknown topic, is fine).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from pathlib import Path

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from spellbook.config import Settings
from spellbook.index.catalog import Catalog, FileRow, NoteRow
from spellbook.server.hub import Hub
from spellbook.server.tools import build_server

pytestmark = pytest.mark.slow

KEYS = (
    "aliases",
    "tags",
    "tag",
    "cssclasses",
    "created",
    "updated",
    "date",
    "links",
    "related",
    "publish",
    "id",
    "title",
    "category",
    "topic",
    "importance",
    "type",
    "expires",
    "keywords",
    "questions",
    "entities",
    "context",
    "user",
    "source",
    "supersedes",
    "status",
    "parent",
    "up",
    "rating",
)
NAMES = ("Fold", "Alpha note", "Beta", "inbox/Gamma", "2024", "Ünïcode", "a#b", "x|y", "")

words = st.sampled_from(NAMES + ("deploy", "#tag", "[[Alpha note]]", "[[Beta|b]]", "note with: colon"))
scalars = st.one_of(
    st.none(),
    words,
    st.integers(-10, 3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.dates(min_value=dt.date(1990, 1, 1), max_value=dt.date(2100, 1, 1)),
    st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2100, 1, 1)),
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=2), max_leaves=6
)
links = st.builds(
    lambda target, part, alias, embed: f"{'!' if embed else ''}[[{target}{part}{alias}]]",
    st.sampled_from(NAMES),
    st.sampled_from(("", "#Heading", "#^block-1", "^block", "#")),
    st.sampled_from(("", "|shown", "|")),
    st.booleans(),
)
pieces = st.one_of(
    links,
    words,
    st.just("> [!note] A callout\n> with [[Alpha note]] inside"),
    st.just("```python\nx = '[[Not a link]]'  # #not-a-tag\n```"),
    st.just("# Heading\n\nText ^block-1"),
    st.just("- [ ] a task #todo"),
)
bodies = st.lists(pieces, max_size=8).map(lambda parts: "\n\n".join(parts))
# The keys Obsidian itself reads, in the shapes people leave them in, often; then anything else.
shapes = st.one_of(
    st.none(), words, st.lists(st.one_of(words, st.none(), st.integers(0, 99)), max_size=3), st.integers(0, 3000)
)
core = st.fixed_dictionaries({}, optional={"aliases": shapes, "tags": shapes, "cssclasses": shapes, "links": shapes})
frontmatters = st.builds(lambda a, b: {**a, **b}, core, st.dictionaries(st.sampled_from(KEYS), values, max_size=5))


def render(meta: dict, body: str, empty_style: bool) -> str:
    """A note as Obsidian would have it on disk; a None value is written ``key:`` or ``key: null``."""
    lines = []
    for key, value in meta.items():
        if value is None and empty_style:
            lines.append(f"{key}:")
        else:
            lines.append(yaml.safe_dump({key: value}, allow_unicode=True, default_flow_style=None).rstrip("\n"))
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    vault = tmp_path_factory.mktemp("obsidian") / "vault"
    vault.mkdir()
    hub = Hub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    yield hub
    hub.close()


def unexpected(result) -> str | None:
    """The text of a result that is a crash rather than a deliberate Spellbook error."""
    if not result.is_error:
        return None
    text = result.content[0].text if result.content else ""
    bare = re.fullmatch(r"Error executing tool \S+", text.strip())  # the SDK's text for a crash
    return text if ("Internal error" in text or bare) else None


async def every_read_tool(server, ids: list[str], topics: list[str]) -> list[str]:
    failures = []
    async with Client(server) as client:
        calls = [
            ("get_memories", {"ids": ids}),
            ("list_memories", {"limit": 50}),
            ("get_index", {}),
            ("analyze_knowledge", {}),
            ("stats", {}),
            ("export", {"format": "json"}),
            ("export", {"format": "markdown"}),
            ("memorize", {"query": "Fold Alpha note deploy"}),
            ("memorize", {"query": "Beta", "mode": "keyword"}),
        ]
        for id in ids:
            calls += [
                ("get_links", {"id": id}),
                ("explore_related", {"id": id}),
                ("related", {"id": id}),
                ("timeline", {"id": id}),
            ]
        calls += [("get_topic", {"topic": t}) for t in topics]
        for tool, args in calls:
            crash = unexpected(await client.call_tool(tool, args))
            if crash:
                failures.append(f"{tool}({args}): {crash}")
    return failures


counter = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(notes=st.lists(st.tuples(frontmatters, bodies, st.booleans()), min_size=1, max_size=4))
def test_every_read_tool_copes_with_any_obsidian_frontmatter(hub: Hub, notes) -> None:
    folder = f"ex{next(counter)}"
    root = hub.engine.vault.root / folder
    root.mkdir()
    names = ("Alpha note", "Beta", "Fold", "Gamma")
    for (meta, body, empty_style), name in zip(notes, names, strict=False):
        (root / f"{name}.md").write_text(render(meta, body, empty_style), encoding="utf-8")
    hub.engine.reconcile()
    rows = [hub.engine.catalog.note_at(f"{folder}/{name}.md") for name in names[: len(notes)]]
    assert all(rows), "every note file is indexed as a note"
    ids = [r.note_id for r in rows if r is not None]
    topics = sorted({r.topic for r in rows if r is not None and r.topic})
    failures = anyio.run(every_read_tool, build_server(hub), ids[:20], topics)
    assert not failures, "\n".join(failures)


def test_aliases_of_every_shape_resolve_links(tmp_path: Path) -> None:
    """``aliases: Fold`` (a string), ``aliases:`` (empty), a number and a list all resolve
    [[links]] in SQL as in Python: the query that failed with "malformed JSON" before."""
    catalog = Catalog(tmp_path / "c.sqlite3")
    shapes = {
        "one.md": "Fold",
        "empty.md": None,
        "number.md": 2024,
        "list.md": ["Alpha", 7, None, ["nested"]],
        "nan.md": float("nan"),
        "map.md": {"a": "b"},
    }
    for path, aliases in shapes.items():
        meta = {"aliases": aliases}
        catalog.replace(
            FileRow(path, "v", 0, 0, None),
            NoteRow(
                path=path,
                note_id=path,
                title=path.removesuffix(".md").title(),
                category=None,
                topic=None,
                type=None,
                context=None,
                importance=None,
                tags=[],
                created=None,
                updated=None,
                folder="",
                managed=False,
                meta=meta,
            ),
            [],
        )
    assert [n.path for n in catalog.links.link_matches("fold", 5)] == ["one.md"]
    assert [n.path for n in catalog.links.link_matches("2024", 5)] == ["number.md"]
    assert [n.path for n in catalog.links.link_matches("alpha", 5)] == ["list.md"]
    assert [n.path for n in catalog.links.link_matches("7", 5)] == ["list.md"]
    assert catalog.links.link_matches("nested", 5) == []
    graph = {source: resolved for source, _, _, resolved in catalog.links.link_graph()}
    assert graph == {}  # no links written, but the query ran over every shape
    assert json.loads(json.dumps(catalog.note_at("nan.md").meta)) == {"aliases": "nan"}
    catalog.close()


def test_an_internal_error_is_a_clear_tool_error(
    hub: Hub, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in a tool reaches the agent as an is_error text naming the tool, what it was called
    on and the exception, not the SDK's bare "Error executing tool"; the traceback is logged."""

    def broken(id: str):
        raise ValueError("malformed JSON")

    monkeypatch.setattr(hub.engine, "get_links", broken)

    async def main() -> str:
        async with Client(build_server(hub)) as client:
            result = await client.call_tool("get_links", {"id": "abc123"})
            assert result.is_error
            return result.content[0].text

    text = anyio.run(main)
    assert "Internal error in get_links on id 'abc123': ValueError: malformed JSON" in text, text
    assert text.strip() != "Error executing tool get_links"  # the SDK's prefix stays; the cause follows it
    assert any(r.exc_info and "get_links" in r.getMessage() for r in caplog.records)
