"""Vaults as people keep them: a hand-filed tree of nested folders (``en/Bases/Functions.md``),
notes with and without a frontmatter ``title``, first headings that are examples or sections. A
note is named as Obsidian names it (its file name) unless its ``title`` says otherwise, and its
folders are its category and topic unless its frontmatter says otherwise. Real files, catalog and
Chroma (hashing embedder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.index import analysis, indexer

NOTES = {  # path -> text, shaped like the Obsidian help vault
    "en/Bases/Bases syntax.md": "Bases are written in YAML.\n\n```yaml\n# Simple filter:\nfilters: x\n```\n\n"
    "## Filters\n\nA filter narrows the notes.\n",
    "en/Contributing to Obsidian/Style guide.md": "## Headings\n\n# Heading 1\n\nUse sentence case.\n",
    "en/Editing and formatting/Basic formatting syntax.md": "# This is a heading 1\n\nBold with asterisks.\n",
    "en/Bases/Functions.md": "# Functions reference\n\nDate functions parse dates.\n",
    "en/Bases/Deep/Nested/Formula examples.md": "# Example one\n\nA formula adds columns.\n",
    "en/Home.md": "# Welcome\n\nStart here.\n",
    "ko/Bases/함수.md": "# 함수 참조\n\n날짜 함수는 날짜를 읽습니다.\n",
    "ja/Bases/関数.md": "# 関数リファレンス\n\n日付関数は日付を読みます。\n",
    "en/Bases/Titled.md": "---\ntitle: A title someone wrote\n---\n# Another heading\n\nText.\n",
    "en/Bases/Filed elsewhere.md": "---\ncategory: reference\n---\n# Heading\n\nFrontmatter names the category.\n",
    "en/Bases/Own topic.md": "---\ntopic: formulas\n---\nThe frontmatter topic wins over the folder.\n",
    "Loose note.md": "# Loose heading\n\nAt the vault's root.\n",
}


def _write(vault: Path) -> None:
    for path, text in NOTES.items():
        file = vault / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")


def _notes(engine: Engine) -> dict[str, dict]:
    found = engine.list_memories(limit=100)["memories"]
    return {m["path"]: m for m in found}


@pytest.fixture
def shaped(settings: Settings):
    _write(settings.vault)
    engine = Engine(settings)
    engine.start()
    yield engine
    engine.close()


def test_a_note_without_a_title_is_named_by_its_file_name(shaped: Engine) -> None:
    notes = _notes(shaped)
    for path in NOTES:
        expected = "A title someone wrote" if path == "en/Bases/Titled.md" else path.rsplit("/", 1)[-1][:-3]
        assert notes[path]["title"] == expected, path
    hits = shaped.memorize("Bases syntax", mode="keyword", limit=3)["results"]
    assert hits[0]["title"] == "Bases syntax"
    # the headings stay searchable as headings, and are no longer anyone's name
    hits = shaped.memorize("This is a heading 1", mode="keyword", limit=5)["results"]
    found = {h["path"]: h for h in hits}["en/Editing and formatting/Basic formatting syntax.md"]
    assert (found["title"], found["heading"]) == ("Basic formatting syntax", "This is a heading 1")
    sections = shaped.get_memories(ids=[notes["en/Bases/Bases syntax.md"]["id"]])["memories"][0]["chunks"]
    assert [c["heading"] for c in sections if c["heading"]] == ["Filters"]


def test_folders_are_category_and_topic_in_get_index(shaped: Engine) -> None:
    index = shaped.get_index()
    categories = index["categories"]
    assert set(categories["en"]["topics"]) == {
        "Bases",
        "Contributing to Obsidian",
        "Editing and formatting",
        "formulas",
        "(none)",
    }
    assert categories["en"]["topics"]["Bases"]["notes"] == 4  # Functions, syntax, Titled, the deeper one
    assert categories["en"]["topics"]["(none)"]["notes"] == 1  # en/Home.md sits one folder deep
    assert set(categories["ko"]["topics"]) == {"Bases"} and set(categories["ja"]["topics"]) == {"Bases"}
    assert set(categories["reference"]["topics"]) == {"(none)"}  # its frontmatter names another category
    notes = _notes(shaped)
    deep = notes["en/Bases/Deep/Nested/Formula examples.md"]
    assert (deep["category"], deep["topic"]) == ("en", "Bases")
    topic = shaped.get_topic("Bases", category="en")
    assert {m["title"] for m in topic["memories"]} == {
        "Functions",
        "Bases syntax",
        "A title someone wrote",
        "Formula examples",
    }


def test_folder_filters_still_see_the_whole_path(shaped: Engine) -> None:
    deep = shaped.list_memories(filter={"folder": "en/Bases/Deep"})["memories"]
    assert [m["path"] for m in deep] == ["en/Bases/Deep/Nested/Formula examples.md"]
    bases = {m["path"] for m in shaped.list_memories(filter={"folder": "en/Bases"}, limit=50)["memories"]}
    assert "en/Bases/Deep/Nested/Formula examples.md" in bases and "ko/Bases/함수.md" not in bases
    assert {m["path"] for m in shaped.list_memories(filter={"topic": "Bases"}, limit=50)["memories"]} == {
        "en/Bases/Bases syntax.md",
        "en/Bases/Functions.md",
        "en/Bases/Titled.md",
        "en/Bases/Deep/Nested/Formula examples.md",
        "ko/Bases/함수.md",
        "ja/Bases/関数.md",
    }


def test_agent_written_notes_keep_their_title_category_and_topic(shaped: Engine) -> None:
    made = shaped.scribe(
        "# Heading inside\n\nDeploys go through the canary.", title="Canary first", category="ops", topic="deploy"
    )
    plain = shaped.scribe("No category given.", title="Inbox thing")
    notes = _notes(shaped)
    assert made["path"] == "ops/deploy/Canary first.md"
    assert (notes[made["path"]]["title"], notes[made["path"]]["category"], notes[made["path"]]["topic"]) == (
        "Canary first",
        "ops",
        "deploy",
    )
    assert (notes[plain["path"]]["title"], notes[plain["path"]]["category"], notes[plain["path"]]["topic"]) == (
        "Inbox thing",
        "inbox",
        None,
    )


LINKED = {  # links as Obsidian writes them in a table row, beside attachments
    "en/Bases/Views.md": "| View | Icon |\n| --- | --- |\n| [[Table view\\|Table]] | ![[lucide-table.svg]] |\n"
    "| [[Cards view\\|Cards]] | ![[lucide-layout-grid.svg#icon]] |\n\n"
    "See [[Bases syntax]], [[Spec.pdf#page=2]], [[Board.canvas]] and [[Missing page]].\n",
    "en/Bases/Layouts/Table view.md": "Rows and columns.\n\n![[table-example.png]]\n",
    "en/Bases/Layouts/Cards view.md": '---\nrelated: ["[[cover.webp]]", "[[Table view]]"]\n---\nCards.\n',
}


def test_links_read_as_obsidian_reads_them(settings: Settings) -> None:
    """``[[Table view\\|Table]]`` in a table row links to Table view; an image, a PDF or a canvas is
    an attachment, not a broken link between memories."""
    _write(settings.vault)
    for path, text in LINKED.items():
        (settings.vault / path).parent.mkdir(parents=True, exist_ok=True)
        (settings.vault / path).write_text(text, encoding="utf-8")
    engine = Engine(settings)
    engine.start()
    try:
        notes = _notes(engine)
        links = engine.get_links(notes["en/Bases/Views.md"]["id"])["links"]
        assert [(link["target"], link["resolved"]) for link in links] == [
            ("Table view", True),
            ("Cards view", True),
            ("Bases syntax", True),
            ("Missing page", False),
        ]
        assert [
            (link["relation"], link["target"])
            for link in engine.get_links(notes["en/Bases/Layouts/Cards view.md"]["id"])["links"]
        ] == [("related", "Table view")]
        broken = [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "broken_link"]
        assert [(i["notes"][0]["path"], i["target"]) for i in broken] == [("en/Bases/Views.md", "Missing page")]
        backlinks = engine.get_links(notes["en/Bases/Layouts/Table view.md"]["id"])["backlinks"]
        assert "en/Bases/Views.md" in {b["path"] for b in backlinks}
    finally:
        engine.close()


def test_an_index_built_the_old_way_is_rebuilt(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index from before names came from file names (format 8, first-heading titles, no folder
    topics) is rebuilt when opened, so a person's existing index changes too."""
    _write(settings.vault)
    with monkeypatch.context() as old:
        old.setattr(indexer, "INDEX_FORMAT", "8")
        old.setattr(analysis, "title_of", lambda meta, path: "Old heading title")
        old.setattr(analysis, "place_of", lambda meta, path: (path.split("/", 1)[0] if "/" in path else None, None))
        engine = Engine(settings)
        engine.start()
        try:
            assert {m["title"] for m in _notes(engine).values()} == {"Old heading title"}
        finally:
            engine.close()
    engine = Engine(settings)
    engine.start()
    try:
        notes = _notes(engine)
        assert notes["en/Bases/Functions.md"]["title"] == "Functions"
        assert notes["en/Bases/Functions.md"]["topic"] == "Bases"
    finally:
        engine.close()
