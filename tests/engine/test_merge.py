"""merge: several memories become one. Real files in temporary vaults (agent notes and notes a
person wrote by hand), the engine in process with the hashing embedder, real git for the commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from spellbook.engine import Engine
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError
from spellbook.scope import Scope, scoped
from spellbook.vault.note import parse_note
from tests.helpers.git import committed_files, git, head

HAND = (  # a person's note: flow-style lists, a comment, links in every form, one in code
    "---\n"
    "# my own comment\n"
    "aliases: [Brew notes]\n"
    'related: ["[[Steeping]]", "[[Oolong]]"]   # kept as I wrote it\n'
    "owner: Ana\n"
    "---\n"
    "# Brew notes\n\n"
    "See [[Steeping|how long]], [[steeping#Temperature]] and ![[Steeping]].\n"
    "Also [[kitchen/Steeping.md]], but not `[[Steeping]]` nor:\n"
    "```\n[[Steeping]]\n```\n"
)


@pytest.fixture
def notes(engine: Engine, vault: Path) -> dict[str, dict]:
    """Two near-duplicates written by an agent, a third memory they link to, and a hand-written note."""
    tea = engine.scribe(
        text="# Brewing\n\nGreen tea: 3 minutes at 80C.\n",
        title="Green tea",
        category="kitchen",
        tags=["tea"],
        keywords=["brew"],
        questions=["How long does green tea steep?"],
    )
    steep = engine.scribe(
        text="Steep green tea three minutes; oolong longer, see [[Oolong]].\n",
        title="Steeping",
        category="kitchen",
        tags=["Tea", "green"],
        keywords=["steep", "brew"],
        questions=["At what temperature?"],
        entities=["Sencha"],
    )
    oolong = engine.scribe(text="Oolong: 5 minutes at 90C.\n", title="Oolong", category="kitchen", tags=["tea"])
    engine.link(steep["id"], oolong["id"], "extends", reason="oolong is the longer case")
    engine.link(oolong["id"], steep["id"], "related", reason="both about steeping")
    engine.link(steep["id"], tea["id"], "related")  # becomes a link of the survivor to itself: dropped
    (vault / "Brew notes.md").write_text(HAND)
    engine.reconcile()
    listed = engine.list_memories(limit=50)["memories"]
    hand = next(m for m in listed if m["path"] == "Brew notes.md")
    return {"tea": tea, "steep": steep, "oolong": oolong, "hand": hand}


def test_merge_appends_the_others_text_and_unions_their_metadata(engine: Engine, vault: Path, notes) -> None:
    tea, steep = notes["tea"], notes["steep"]
    version = engine.get_memories([tea["id"]])["memories"][0]["version"]
    out = engine.merge([tea["id"], steep["id"]], version=version)

    assert (out["id"], out["path"], out["title"]) == (tea["id"], tea["path"], "Green tea")
    assert out["merged"] == [
        {"id": steep["id"], "path": steep["path"], "title": "Steeping", "trash_path": ".trash/kitchen/Steeping.md"}
    ]
    text = (vault / tea["path"]).read_text()
    parsed = parse_note(text)
    assert parsed.body == (
        "# Brewing\n\nGreen tea: 3 minutes at 80C.\n\n## Steeping\n\n"
        "Steep green tea three minutes; oolong longer, see [[Oolong]].\n"
    )
    meta = parsed.meta
    assert meta["id"] == tea["id"] and meta["title"] == "Green tea"
    assert meta["tags"] == ["tea", "green"]  # 'Tea' is 'tea'
    assert meta["keywords"] == ["brew", "steep"]
    assert meta["questions"] == ["How long does green tea steep?", "At what temperature?"]
    assert meta["entities"] == ["Sencha"]
    assert meta["extends"] == ["[[Oolong]]"] and "related" not in meta  # no link to itself
    assert meta["link_reasons"] == {"extends": {"Oolong": "oolong is the longer case"}}
    assert out["version"] == engine.get_memories([tea["id"]])["memories"][0]["version"]

    # the index: the survivor found by the merged text, the other gone, the links right
    hits = engine.memorize("steep oolong longer", mode="keyword")["results"]
    assert hits[0]["id"] == tea["id"] and steep["id"] not in {h["id"] for h in hits}
    with pytest.raises(NoteNotFoundError):
        engine.get_memories([steep["id"]])
    assert {m["id"] for m in engine.list_memories(limit=50)["memories"]} >= {tea["id"], notes["oolong"]["id"]}
    links = engine.get_links(tea["id"])
    assert {(b["path"], b["relation"]) for b in links["backlinks"]} == {
        ("kitchen/Oolong.md", "related"),
        ("Brew notes.md", "related"),
        ("Brew notes.md", "wikilink"),
    }
    assert {(item["relation"], item.get("path")) for item in links["links"]} == {
        ("extends", "kitchen/Oolong.md"),
        ("wikilink", "kitchen/Oolong.md"),
    }
    assert engine.check()["consistent"]


def test_the_merged_note_goes_to_the_trash_with_merged_into(engine: Engine, vault: Path, notes) -> None:
    steep = notes["steep"]
    before = (vault / steep["path"]).read_text()
    engine.merge([notes["tea"]["id"], steep["id"]])
    assert not (vault / steep["path"]).exists()
    trashed = (vault / ".trash" / steep["path"]).read_text()
    assert trashed == before.replace("\n---\n", f"\nmerged_into: {notes['tea']['id']}\n---\n", 1)  # one key more


def test_every_link_to_a_merged_note_points_at_the_survivor(engine: Engine, vault: Path, notes) -> None:
    out = engine.merge([notes["tea"]["id"], notes["steep"]["id"]])
    hand = (vault / "Brew notes.md").read_text()
    assert hand == HAND.replace('"[[Steeping]]"', '"[[Green tea]]"').replace(
        "See [[Steeping|how long]], [[steeping#Temperature]] and ![[Steeping]].\nAlso [[kitchen/Steeping.md]]",
        "See [[Green tea|how long]], [[Green tea#Temperature]] and ![[Green tea]].\nAlso [[Green tea]]",
    )  # only the targets changed: the comment, the flow lists, aliases, code and owner kept their bytes
    oolong = parse_note((vault / notes["oolong"]["path"]).read_text()).meta
    assert oolong["related"] == ["[[Green tea]]"]
    assert oolong["link_reasons"] == {"related": {"Green tea": "both about steeping"}}
    assert {(r["path"], r["links"]) for r in out["relinked"]} == {("Brew notes.md", 5), ("kitchen/Oolong.md", 1)}
    assert "not_relinked" not in out
    broken = [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "broken_link"]
    assert broken == []


def test_a_link_escaped_in_a_table_row_points_at_the_survivor(engine: Engine, vault: Path, notes) -> None:
    """Obsidian escapes the alias bar of a link in a table row (``[[Steeping\\|steep]]``): the link is
    to Steeping and is re-pointed; the image beside it is an attachment, not a broken link."""
    table = "| Step | Picture |\n| --- | --- |\n| [[Steeping\\|steep]] | ![[steeping.png]] |\n"
    (vault / "Table.md").write_text(table)
    engine.reconcile()
    out = engine.merge([notes["tea"]["id"], notes["steep"]["id"]])
    assert (vault / "Table.md").read_text() == table.replace("[[Steeping\\|", "[[Green tea\\|")
    assert ("Table.md", 1) in {(r["path"], r["links"]) for r in out["relinked"]}
    assert [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "broken_link"] == []


def test_text_passed_replaces_the_concatenation(engine: Engine, vault: Path, notes) -> None:
    tea, steep, oolong = notes["tea"], notes["steep"], notes["oolong"]
    out = engine.merge(
        [steep["id"], oolong["id"]],
        into=tea["id"],
        text="Green tea 3 min at 80C; oolong 5 min at 90C. Was [[Steeping]].\n",
    )
    assert [m["id"] for m in out["merged"]] == [steep["id"], oolong["id"]]
    parsed = parse_note((vault / tea["path"]).read_text())
    assert parsed.body == "Green tea 3 min at 80C; oolong 5 min at 90C. Was [[Green tea]].\n"
    assert "extends" not in parsed.meta and "related" not in parsed.meta  # all three are one note now
    assert not (vault / steep["path"]).exists() and not (vault / oolong["path"]).exists()
    hand = (vault / "Brew notes.md").read_text()  # both its links now name Green tea; its line keeps its form
    assert 'related: ["[[Green tea]]", "[[Green tea]]"]   # kept as I wrote it\n' in hand
    assert hand.count("[[Green tea") == 6 and hand.count("[[Steeping]]") == 2  # the two in code


def test_hand_written_survivor_keeps_its_formatting_and_gets_an_id(engine: Engine, vault: Path, notes) -> None:
    hand, tea = notes["hand"], notes["tea"]
    out = engine.merge([hand["id"], tea["id"]])
    text = (vault / "Brew notes.md").read_text()
    assert text.startswith("---\n# my own comment\naliases: [Brew notes]\n")
    assert "owner: Ana\n" in text and f"id: {hand['id']}\n" in text
    meta = parse_note(text).meta
    assert meta["tags"] == ["tea"] and meta["keywords"] == ["brew"]
    assert [(r["path"], r["links"]) for r in out["relinked"]] == [("kitchen/Steeping.md", 1)]
    assert parse_note((vault / notes["steep"]["path"]).read_text()).meta["related"] == ["[[Brew notes]]"]
    assert parse_note(text).body.endswith("## Green tea\n\n# Brewing\n\nGreen tea: 3 minutes at 80C.\n")


def test_one_git_commit_for_the_whole_merge(engine: Engine, vault: Path, notes) -> None:
    assert engine.git.flush()  # the fixture's writes, before there is a repository
    (vault / ".gitignore").write_text(".spellbook/\n.trash/\n")
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "base")
    engine.merge([notes["tea"]["id"], notes["steep"]["id"]])
    assert engine.git.flush()
    assert head(vault) == f'spellbook: merge "Green tea" (id {notes["tea"]["id"]}) with 1 memory'
    assert git(vault, "rev-list", "--count", "HEAD").strip() == "2"
    assert sorted(committed_files(vault)) == sorted(
        ["Brew notes.md", "kitchen/Green tea.md", "kitchen/Oolong.md", "kitchen/Steeping.md"]
    )
    assert git(vault, "status", "--porcelain").strip() == ""  # the commit holds exactly the files on disk
    assert "kitchen/Steeping.md" not in git(vault, "ls-files")


def test_a_person_edit_of_the_survivor_is_a_conflict_and_nothing_moves(engine: Engine, vault: Path, notes) -> None:
    tea, steep = notes["tea"], notes["steep"]
    version = engine.get_memories([tea["id"]])["memories"][0]["version"]
    file = vault / tea["path"]
    file.write_text(file.read_text().replace("3 minutes", "2 minutes"))  # the person's edit
    before = {p: p.read_bytes() for p in vault.rglob("*.md")}
    with pytest.raises(FileChangedError) as raised:
        engine.merge([tea["id"], steep["id"]], version=version)
    assert "2 minutes" in raised.value.content and "call merge" in str(raised.value)
    assert raised.value.current_version != version
    assert {p: p.read_bytes() for p in vault.rglob("*.md")} == before
    assert not (vault / ".trash").exists()


def test_a_survivor_saved_during_the_merge_puts_the_others_back(
    engine: Engine, vault: Path, notes, monkeypatch
) -> None:
    """The person saves the survivor after merge read it, while the others are moving: the survivor
    write is refused, and the others go back where they were, unchanged."""
    tea, steep = notes["tea"], notes["steep"]
    file = vault / tea["path"]
    trash = engine.vault.trash

    def trash_while_the_person_saves(path: str) -> str:
        file.write_text(file.read_text() + "A line the person added.\n")
        return trash(path)

    monkeypatch.setattr(engine.vault, "trash", trash_while_the_person_saves)
    others = {p: p.read_bytes() for p in vault.rglob("*.md") if p != file}
    with pytest.raises(FileChangedError) as raised:
        engine.merge([tea["id"], steep["id"]])
    assert "A line the person added" in raised.value.content and raised.value.retry == "merge"
    assert {p: p.read_bytes() for p in vault.rglob("*.md") if p != file} == others
    assert file.read_text().endswith("A line the person added.\n") and "## Steeping" not in file.read_text()
    assert not list((vault / ".trash").rglob("*.md"))


def test_an_edit_of_a_merged_note_during_the_merge_is_not_lost(engine: Engine, vault: Path, notes, monkeypatch) -> None:
    """A person saves one of the others after merge first read it: what the survivor receives is
    the file as it was when it moved to the trash, their edit included."""
    tea, steep = notes["tea"], notes["steep"]
    other = vault / steep["path"]
    trash = engine.vault.trash

    def trash_after_an_edit(path: str) -> str:
        if path == steep["path"]:
            other.write_text(other.read_text() + "Never boil it.\n")
        return trash(path)

    monkeypatch.setattr(engine.vault, "trash", trash_after_an_edit)
    engine.merge([tea["id"], steep["id"]])
    assert parse_note((vault / tea["path"]).read_text()).body.endswith("see [[Oolong]].\nNever boil it.\n")
    assert "Never boil it." in (vault / ".trash" / steep["path"]).read_text()


def test_a_linking_note_saved_during_relinking_keeps_the_edit(engine: Engine, vault: Path, notes, monkeypatch) -> None:
    hand = vault / "Brew notes.md"
    write = engine.vault.write
    edits = []

    def write_after_a_save(path: str, text: str, expected_version: str | None = None) -> str:
        if path == "Brew notes.md" and not edits:
            edits.append(path)
            hand.write_text(hand.read_text() + "Added while merging.\n")
        return write(path, text, expected_version=expected_version)

    monkeypatch.setattr(engine.vault, "write", write_after_a_save)
    out = engine.merge([notes["tea"]["id"], notes["steep"]["id"]])
    text = hand.read_text()
    assert text.endswith("Added while merging.\n") and text.count("[[Green tea") == 5
    assert ("Brew notes.md", 5) in {(r["path"], r["links"]) for r in out["relinked"]}


def test_bad_input_is_refused_before_anything_changes(engine: Engine, vault: Path, notes) -> None:
    tea, steep = notes["tea"]["id"], notes["steep"]["id"]
    before = {p: p.read_bytes() for p in vault.rglob("*.md")}
    cases = [
        ({"ids": [tea]}, InvalidInputError, "at least 2 ids"),
        ({"ids": [tea, steep, tea]}, InvalidInputError, "more than once"),
        ({"ids": [tea, "no-such-id"]}, NoteNotFoundError, "No memory with id 'no-such-id'"),
        ({"ids": [tea, steep], "into": "nope"}, NoteNotFoundError, "the survivor"),
        ({"ids": [tea, ""]}, InvalidInputError, "is empty"),
        ({"ids": [f"id{n}" for n in range(51)]}, InvalidInputError, "at most 50"),
        ({"ids": "abc"}, InvalidInputError, "list of memory ids"),
        ({"ids": [tea, steep], "text": "  "}, InvalidInputError, "text is empty"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            engine.merge(**args)
    (vault / "Broken.md").write_text("---\ntags: [unclosed\n---\nBody.\n")
    engine.reconcile()
    broken = next(m["id"] for m in engine.list_memories(limit=50)["memories"] if m["path"] == "Broken.md")
    with pytest.raises(InvalidInputError, match="Broken.md has malformed YAML"):
        engine.merge([tea, broken])
    assert {p: p.read_bytes() for p in vault.rglob("*.md") if p.name != "Broken.md"} == before
    assert not (vault / ".trash").exists()


def test_a_memory_of_another_scope_cannot_be_merged(engine: Engine, vault: Path) -> None:
    with scoped(Scope(context="shop")):
        shop = engine.scribe(text="Prices change on Mondays.", title="Prices")
    with scoped(Scope(context="blog")):
        blog = engine.scribe(text="Posts go out on Mondays.", title="Posts")
        with pytest.raises(NoteNotFoundError, match=shop["id"]):
            engine.merge([blog["id"], shop["id"]])
    assert (vault / shop["path"]).exists() and (vault / blog["path"]).exists()


def test_a_merged_note_whose_place_was_taken_stays_in_the_trash(
    engine: Engine, vault: Path, notes, monkeypatch
) -> None:
    """The survivor is saved during the merge (so the others go back), but a new file already took
    one of the others' places: neither file is overwritten; that note stays in .trash/."""
    tea, steep = notes["tea"], notes["steep"]
    survivor, other = vault / tea["path"], vault / steep["path"]
    original = other.read_bytes()
    trash = engine.vault.trash

    def trash_then_the_place_is_taken(path: str) -> str:
        moved = trash(path)
        other.write_text("A new note at the same place.\n")
        survivor.write_text(survivor.read_text() + "Saved meanwhile.\n")
        return moved

    monkeypatch.setattr(engine.vault, "trash", trash_then_the_place_is_taken)
    with pytest.raises(FileChangedError):
        engine.merge([tea["id"], steep["id"]])
    assert other.read_text() == "A new note at the same place.\n"
    assert (vault / ".trash" / steep["path"]).read_bytes() == original
    assert survivor.read_text().endswith("Saved meanwhile.\n")


def test_a_note_that_keeps_changing_is_reported_not_relinked(engine: Engine, vault: Path, notes, monkeypatch) -> None:
    hand = vault / "Brew notes.md"
    write = engine.vault.write

    def write_after_every_save(path: str, text: str, expected_version: str | None = None) -> str:
        if path == "Brew notes.md":
            hand.write_text(hand.read_text() + "x\n")  # a person (or a sync tool) saving it again and again
        return write(path, text, expected_version=expected_version)

    monkeypatch.setattr(engine.vault, "write", write_after_every_save)
    out = engine.merge([notes["tea"]["id"], notes["steep"]["id"]])
    assert [(n["path"], n["reason"]) for n in out["not_relinked"]] == [
        ("Brew notes.md", "it kept changing on disk (3 tries)")
    ]
    assert "Brew notes.md still links to a merged memory" in out["note"] and "[[Green tea]]" in out["note"]
    assert hand.read_text() == HAND + "x\nx\nx\n"  # every save kept, no link changed
    assert [r["path"] for r in out["relinked"]] == ["kitchen/Oolong.md"]


def test_a_merge_relinks_only_the_notes_the_caller_sees(engine: Engine, vault: Path) -> None:
    """A shop-scoped merge of a shared note into a shop note leaves the blog's note that links the
    shared one untouched (no write into a scope it cannot see, no shop title in the blog's note):
    its link is unresolved for the blog, and names the survivor only when the blog sees it."""
    shared = engine.scribe(text="Cache what is read often.", title="Caching rule", category="eng")
    dupe = engine.scribe(text="Cache reads, not writes.", title="Cache rule 2", category="eng")
    with scoped(Scope(context="shop")):
        shop = engine.scribe(text="Shop caching: Redis in front of the catalogue.", title="Shop cache", category="eng")
        shop_link = engine.scribe(text="Follow [[Cache rule 2]].", title="Shop checklist", category="eng")
    with scoped(Scope(context="blog")):
        blog_link = engine.scribe(
            text="See [[Cache rule 2]] and [[Caching rule]].", title="Blog checklist", category="eng"
        )
    blog_file = vault / blog_link["path"]
    before = blog_file.read_bytes()
    with scoped(Scope(context="shop")):
        out = engine.merge([shop["id"], dupe["id"]])
    assert [r["path"] for r in out["relinked"]] == [shop_link["path"]]
    assert (vault / shop_link["path"]).read_text().endswith("Follow [[Shop cache]].")
    assert blog_file.read_bytes() == before  # not written: the shop's merge cannot see it
    with scoped(Scope(context="blog")):
        links = {item["target"]: item for item in engine.get_links(blog_link["id"])["links"]}
        assert not links["Cache rule 2"]["resolved"] and "merged_into" not in links["Cache rule 2"]  # not the blog's
        assert links["Caching rule"]["resolved"]
    links = {item["target"]: item for item in engine.get_links(blog_link["id"])["links"]}  # unscoped: sees the shop's
    assert links["Cache rule 2"]["merged_into"] == {"id": shop["id"], "path": shop["path"], "title": "Shop cache"}

    other = engine.scribe(text="Never cache writes.", title="Write rule", category="eng")
    with scoped(Scope(context="blog")):
        engine.link(blog_link["id"], other["id"], "related")
    with scoped(Scope(context="shop")):
        engine.merge([shared["id"], other["id"]])  # into a shared survivor: the blog sees where it went
    with scoped(Scope(context="blog")):
        links = {item["target"]: item for item in engine.get_links(blog_link["id"])["links"]}
        assert not links["Write rule"]["resolved"] and links["Write rule"]["merged_into"]["id"] == shared["id"]
    assert "[[Write rule]]" in blog_file.read_text()
