"""File naming, the vault path guard, and heading chunking."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from spellbook.errors import VaultPathError
from spellbook.index import chunker
from spellbook.index.chunker import chunk_body
from spellbook.vault.paths import is_ignored, note_path, resolve_path, sanitize_segment


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Deploy: how/why?", "Deploy how why"),
        ("../../etc/passwd", "etc passwd"),
        ("  .hidden  ", "hidden"),
        ("CON", "CON note"),
        ("nul.txt", "nul.txt note"),
        ("배포 파이프라인", "배포 파이프라인"),
        ("a" * 200, "a" * 80),
        ("", "untitled"),
        ("[[link]] #tag ^block", "link tag block"),
    ],
)
def test_sanitize_segment(title: str, expected: str) -> None:
    assert sanitize_segment(title) == expected


def test_note_path_places_by_category_and_topic() -> None:
    assert note_path("projects", "spellbook", "Design/Plan") == "projects/spellbook/Design Plan.md"
    assert note_path("../..", None, "x") == "general/x.md"


def test_resolve_path_refuses_to_leave_the_vault(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (tmp_path / "outside.md").write_text("secret")
    (vault / "link.md").symlink_to(tmp_path / "outside.md")
    (tmp_path / "v2").mkdir()  # shares the vault's name as a prefix
    (vault / "sibling").symlink_to(tmp_path / "v2")
    (vault / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    bad_paths = [
        "../outside.md",
        "/etc/passwd",
        "a/../../x.md",
        "C:/x.md",
        "",
        "link.md",
        "..\\outside.md",
        "a\\..\\..\\x.md",
        "//etc/passwd",
        "sibling/x.md",
        "dangling.md",
        "a/\x00.md",
    ]
    for bad in bad_paths:
        with pytest.raises(VaultPathError):
            resolve_path(vault, bad)
    assert resolve_path(vault, "a/b.md") == vault / "a" / "b.md"
    assert resolve_path(vault, "./a//b.md") == vault / "a" / "b.md"
    (vault / "real").mkdir()
    (vault / "alias").symlink_to(vault / "real")  # a link that stays inside is fine
    assert resolve_path(vault, "alias/n.md") == vault / "alias" / "n.md"
    assert resolve_path(vault, "a\\b.md") == vault / "a" / "b.md"


def test_ignored_paths() -> None:
    assert is_ignored(".obsidian/workspace.md")
    assert is_ignored(".spellbook/x.md")
    assert is_ignored("notes/.note.md.abc.tmp")
    assert is_ignored("notes/image.png")
    assert is_ignored("notes/draft.md~")
    assert not is_ignored("notes/Idea.md")


def test_chunks_follow_headings_not_code_fences() -> None:
    body = (
        "Intro line\n\n# Setup\n\nInstall it.\n\n```sh\n# not a heading\nmake\n```\n\n"
        "## Linux\n\napt-get\n\n# Use\n\nRun it.\n"
    )
    chunks = chunk_body(body)
    assert [c.heading for c in chunks] == ["", "Setup", "Setup > Linux", "Use"]
    assert "# not a heading" in chunks[1].text
    assert "".join(c.text for c in chunks) == body  # nothing lost, nothing added


def test_long_sections_split_by_paragraph_then_sentence() -> None:
    para = "This is a sentence about things. " * 20  # ~660 chars
    body = "# Big\n\n" + "\n\n".join([para] * 6) + "\n\n" + "한국어 문장입니다. " * 300
    chunks = chunk_body(body, max_chars=1000)
    assert len(chunks) > 6
    assert all(len(c.text) <= 1000 for c in chunks)
    assert all(c.heading == "Big" for c in chunks)
    assert "".join(c.text for c in chunks) == body


def test_blank_sections_make_no_chunks() -> None:
    assert chunk_body("") == []
    assert [c.heading for c in chunk_body("# A\n\n# B\ntext\n")] == ["B"]


MARKDOWN = [
    "# ",
    "## ",
    "#",
    "\\#",
    " # ",
    "    # ",
    "Title",
    "text",
    "한국어",
    "見出し",
    "=",
    "===",
    "-",
    "---",
    "- ",
    "* ",
    "> ",
    ">",
    "1. ",
    "```",
    "~~~",
    "    ",
    " ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "**b**",
    "`c`",
    "[[Link]]",
    "<h1>x</h1>",
    "\u2028",
    "\x00",
    "＃",
    "=\t",
    "- - -",
    "Setext\n===",
    "a -",
    "x=",
]


@given(st.lists(st.sampled_from(MARKDOWN), max_size=14).map("".join))
@settings(max_examples=3000, deadline=None)
def test_sections_are_the_full_parse_s_headings(body: str) -> None:
    """The chunker parses blocks only, and only a body where a heading is possible: its sections
    are those of markdown-it's whole commonmark parse."""
    full = MarkdownIt("commonmark")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunker, "_md", full)
        patch.setattr(chunker, "_HEADING_HINT", chunker.re.compile(""))  # always parse
        expected = chunker._sections(body, body.splitlines(keepends=True))
    assert chunker._sections(body, body.splitlines(keepends=True)) == expected


def test_vault_stat_compares_without_resolving_but_never_leaves_the_vault(tmp_path: Path) -> None:
    """``Vault.stat`` (a search's check that a hit's file is what was indexed) joins the path
    without resolving symlinks, and refuses what ``Vault.file`` refuses."""
    from spellbook.vault.store import Vault

    root = tmp_path / "vault"
    (root / "a").mkdir(parents=True)
    (root / "a" / "n.md").write_text("x", encoding="utf-8")
    vault = Vault(root)
    assert vault.stat("a/n.md").st_size == 1
    for bad in ("../outside.md", "a/../../outside.md", "/etc/passwd", "a\\..\\..\\x.md"):
        with pytest.raises(VaultPathError):
            vault.stat(bad)
    with pytest.raises(FileNotFoundError):
        vault.stat("a/missing.md")
