"""vault/relink.py: only link targets change, in the body and the link keys of the frontmatter; every
other byte of a note stays."""

from __future__ import annotations

from spellbook.vault.fields import relation_links, wikilinks
from spellbook.vault.note import parse_note
from spellbook.vault.relink import relink_note, relink_text

OLD = {"steeping", "kitchen/steeping"}


def test_every_link_form_changes_its_target_only() -> None:
    text = "[[Steeping]] [[steeping|shown]] [[Steeping#Heat]] [[Steeping^block]] ![[Steeping]] [[kitchen/Steeping.md]]"
    out, n = relink_text(text, OLD, "Green tea")
    assert (
        out == "[[Green tea]] [[Green tea|shown]] [[Green tea#Heat]] [[Green tea^block]] ![[Green tea]] [[Green tea]]"
    )
    assert n == 6


def test_other_names_and_code_are_left_alone() -> None:
    text = (
        "[[Steeping tips]] [[Oolong]] `[[Steeping]]`\n```\n[[Steeping]]\n```\n~~~md\n[[Steeping]]\n~~~\n[[Steeping]]\n"
    )
    out, n = relink_text(text, OLD, "Green tea")
    assert n == 1 and out == text.removesuffix("~~~\n[[Steeping]]\n") + "~~~\n[[Green tea]]\n"


def test_a_crlf_note_with_a_bom_keeps_every_other_byte() -> None:
    text = (
        '\ufeff---\r\ntitle: Hand\r\nrelated: ["[[Steeping]]", "[[Oolong]]"]  # mine\r\n'
        "extends:\r\n  - '[[Steeping|s]]'\r\nother: [[Steeping]]\r\n---\r\nSee [[Steeping]].\r\n"
    )
    out, n = relink_note(text, OLD, "Green tea")
    assert n == 3
    assert out == text.replace('[[Steeping]]", ', '[[Green tea]]", ').replace(
        "'[[Steeping|s]]'", "'[[Green tea|s]]'"
    ).replace("See [[Steeping]]", "See [[Green tea]]")
    assert "other: [[Steeping]]" in out  # not a link key: not a link the index reads


def test_bare_names_in_links_and_link_reasons_are_written_again() -> None:
    text = (
        '---\nlinks: [Steeping, Oolong]\nrelated:\n  - "[[Steeping]]"\n'
        "link_reasons:\n  related:\n    Steeping: same tea\n---\nBody.\n"
    )
    out, n = relink_note(text, OLD, "Green tea")
    meta = parse_note(out).meta
    assert n == 2 and meta["links"] == ["Green tea", "Oolong"] and meta["related"] == ["[[Green tea]]"]
    assert meta["link_reasons"] == {"related": {"Green tea": "same tea"}}
    assert parse_note(out).body == "Body.\n"


def test_notes_without_usable_frontmatter_change_in_the_text_only() -> None:
    plain = "# Plain\n\nSee [[Steeping]].\n"
    assert relink_note(plain, OLD, "Green tea") == ("# Plain\n\nSee [[Green tea]].\n", 1)
    broken = "---\nrelated: [unclosed\n---\nSee [[Steeping]].\n"
    assert relink_note(broken, OLD, "Green tea") == (broken.replace("See [[Steeping]]", "See [[Green tea]]"), 1)
    untouched = "---\ntitle: x\n---\nNo links.\n"
    assert relink_note(untouched, OLD, "Green tea") == (untouched, 0)


def test_a_link_with_its_bar_escaped_in_a_table_row_is_relinked() -> None:
    text = "| [[Steeping\\|how]] | [[Steeping#Heat\\|heat]] | ![[steeping.png]] |\n"
    out, n = relink_text(text, OLD, "Green tea")
    assert n == 2 and out == "| [[Green tea\\|how]] | [[Green tea#Heat\\|heat]] | ![[steeping.png]] |\n"


def test_links_are_read_as_obsidian_reads_them() -> None:
    """A bar escaped in a table row ends the target; a file Obsidian opens besides notes (an image,
    a PDF, a canvas...) is an attachment, not a link between memories; a dot in a name is kept."""
    body = (
        "| [[Table view\\|Table]] | [[Page#Head\\|p]] | ![[icon.SVG]] | [[spec.pdf#page=2]] | ![[x.canvas]] |\n"
        "[[Release v1.2]] [[Notes.md]] [[a\\b]] ![[Embedded note]] [[Board.base]] ![[talk.mp3]]"
    )
    assert wikilinks(body, ["[[cover.png]]", "Plain", "Spec.pdf"]) == [
        "Table view",
        "Page",
        "Release v1.2",
        "Notes.md",
        "a\\b",
        "Embedded note",
        "Plain",
    ]
    assert relation_links({"related": ["[[diagram.webp]]", "[[Other\\|o]]"]}) == [("related", "Other")]
