"""Team memory over git (docs/sync.md): three clones of one bare remote, each with its own engine,
writing at once and syncing in turns. Nothing acknowledged is lost, no conflict marker lands in a
note, concurrent body edits leave a conflict copy, and the remote's history is never rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from spellbook.engine import Engine
from spellbook.git.notemerge import merge_note
from spellbook.vault.note import parse_note
from tests.helpers.git import git
from tests.helpers.team import MARKERS, clone, ids_in, machine_settings, make_remote, notes_in, remote_heads


@pytest.fixture
def team(tmp_path: Path):
    remote = make_remote(tmp_path)
    engines = {}
    for name in ("ada", "bob", "cy"):
        engine = Engine(machine_settings(clone(tmp_path, remote, name)))
        engine.start()
        engines[name] = engine
    yield remote, engines
    for engine in engines.values():
        engine.close()


def _sync(engine: Engine, heads: list[str], remote: Path) -> dict:
    result = engine.sync()
    assert result["in_sync"], result
    heads.append(remote_heads(remote))
    return result


def test_three_machines_writing_at_once_lose_nothing(team) -> None:
    remote, e = team
    ada, bob, cy = e["ada"], e["bob"], e["cy"]
    heads: list[str] = []
    acked: set[str] = set()

    def scribe(engine: Engine, text: str, **kw) -> str:
        out = engine.scribe(text, **kw)
        acked.add(out["id"])
        return out["id"]

    shared = scribe(ada, "The deploy runs on Fridays.", title="Deploy day", tags=["ops"])
    gone = scribe(ada, "The staging box is called kestrel.", title="Staging host")
    _sync(ada, heads, remote)
    _sync(bob, heads, remote)
    _sync(cy, heads, remote)

    # At once, before anyone syncs again:
    ada.revise(shared, text="The deploy runs on Thursdays now.", tags=["ops", "release"])
    bob.revise(shared, text="The deploy runs on Fridays after noon.", tags=["ops", "friday"])
    ada.erase(gone)
    bob.revise(gone, text="The staging box is called kestrel-2 since the move.")
    same_a = scribe(ada, "Ada's view of the retro.", title="Retro notes")  # one title, one path, two machines
    same_b = scribe(bob, "Bob's view of the retro.", title="Retro notes")
    c1 = scribe(cy, "Cy keeps the on-call rota in a spreadsheet.", title="On-call rota")
    c2 = scribe(cy, "The on-call rota is in the ops wiki too.", title="On-call rota copy")
    cy.merge([c1, c2])
    acked.discard(c2)  # merged into c1: its text lives on in c1
    link_to = scribe(bob, "Releases are tagged vYYYY.MM.", title="Release tags")
    bob.link(link_to, shared, "related")
    hand = cy.vault.root / "inbox" / "Hand written.md"
    hand.parent.mkdir(exist_ok=True)
    hand.write_text("A note typed in Obsidian about the coffee machine.\n")

    for engine in (ada, bob, cy, ada, bob, cy):
        _sync(engine, heads, remote)

    final = remote_heads(remote)
    for old in heads:  # published history is never rewritten
        git(remote, "merge-base", "--is-ancestor", old, final)
    for name, engine in e.items():
        vault = engine.vault.root
        assert git(vault, "rev-parse", "HEAD").strip() == final, name
        notes = notes_in(vault)
        assert not [p for p, text in notes.items() if MARKERS.search(text)], name
        assert acked <= ids_in(vault), (name, acked - ids_in(vault))
        assert gone in ids_in(vault)  # erased on one machine, edited on another: the edit stays
        copies = [p for p in notes if "(conflict copy)" in p]
        assert len(copies) == 1, (name, copies)
        bodies = {parse_note(notes[p]).body.strip() for p in (copies[0], copies[0].replace(" (conflict copy)", ""))}
        assert bodies == {"The deploy runs on Thursdays now.", "The deploy runs on Fridays after noon."}
        original = parse_note(notes[copies[0].replace(" (conflict copy)", "")]).meta
        assert set(original["tags"]) == {"ops", "release", "friday"}  # fields merge one by one
        copy_meta = parse_note(notes[copies[0]]).meta
        assert copy_meta["id"] != shared and copy_meta["contradicts"]
        retro = sorted(p for p in notes if p.startswith("inbox/Retro notes"))
        assert len(retro) == 2, retro  # a path collision is a second file, not a conflict
        assert {same_a, same_b} <= ids_in(vault)
        assert "inbox/Hand written.md" in notes
        assert engine.check()["consistent"], name  # doctor clean
        assert engine.memorize("coffee machine", limit=3)["results"][0]["path"] == "inbox/Hand written.md"
        contradictions = [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "contradiction"]
        assert contradictions, name
    # The Care page's merge resolves the conflict copy, on every machine once synced.
    copy_id = parse_note(notes_in(ada.vault.root)[copies[0]]).meta["id"]
    ada.merge([shared, copy_id])
    for engine in (ada, bob, cy):
        _sync(engine, heads, remote)
    for engine in (ada, bob, cy):
        assert not [p for p in notes_in(engine.vault.root) if "(conflict copy)" in p]
        assert not [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "contradiction"]
        assert engine.check()["consistent"]
    authors = git(ada.vault.root, "log", "--format=%an", "main").split()
    assert {"ada", "bob", "cy"} <= set(authors)
    assert any(v["author"].startswith("bob") for v in ada.history(shared)["versions"])


def test_offline_sync_says_why_and_the_vault_keeps_working(team, tmp_path: Path) -> None:
    remote, e = team
    ada = e["ada"]
    remote.rename(tmp_path / "moved.git")
    ada.scribe("Written while the remote is away.", title="Offline note")
    result = ada.sync()
    assert not result["in_sync"] and result["kind"] == "unreachable"
    assert "\n" not in result["error"] and "offline" in result["error"]
    assert ada.memorize("remote is away")["results"]
    (tmp_path / "moved.git").rename(remote)
    assert ada.sync()["in_sync"]
    assert "Offline note" in git(remote, "log", "--format=%s", "-1", "main")


def test_a_remote_that_names_a_program_runs_nothing(team, tmp_path: Path) -> None:
    """Fetch and push may use a path, git, http(s) or ssh: an ``ext::`` remote (a command) and the
    repository's upload-pack/receive-pack programs are refused, and the round says why."""
    _, e = team
    ada = e["ada"]
    marker = tmp_path / "ran"
    git(ada.vault.root, "remote", "set-url", "origin", f"ext::sh -c 'ps -o args= -p $PPID > {marker}'")
    result = ada.sync()
    assert not result["in_sync"] and "\n" not in result["error"]
    assert not marker.exists()
    git(ada.vault.root, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))
    git(ada.vault.root, "config", "remote.origin.uploadpack", f"sh -c 'touch {marker}'")
    git(ada.vault.root, "config", "remote.origin.receivepack", f"sh -c 'touch {marker}'")
    assert not ada.sync()["in_sync"]
    assert not marker.exists()


def test_local_folder_stays_on_the_machine(team) -> None:
    remote, e = team
    ada, bob = e["ada"], e["bob"]
    ada.scribe("My own reminder.", title="Private", category="local")
    ada.scribe("Shared knowledge.", title="Public")
    assert ada.sync()["in_sync"] and bob.sync()["in_sync"]
    assert "general/Public.md" not in notes_in(bob.vault.root)  # category None -> inbox
    assert any(p.endswith("Public.md") for p in notes_in(bob.vault.root))
    assert not any(p.startswith("local/") for p in notes_in(bob.vault.root))
    assert "local/" not in git(remote, "ls-tree", "-r", "--name-only", "main")


def test_note_merge_rules() -> None:
    base = "---\nid: a1\ntitle: T\ntags:\n- x\n- y\nupdated: '2026-01-01T00:00:00Z'\n---\nbody\n"
    ours = "---\nid: a1\ntitle: T\ntags:\n- x\n- y\n- o\nupdated: '2026-01-02T00:00:00Z'\n---\nbody\n"
    theirs = "---\nid: a1\ntitle: T\ntags:\n- x\n- t\nupdated: '2026-01-03T00:00:00Z'\n---\nnew body\n"
    merged = merge_note(base, ours, theirs, "a/T.md")
    meta = parse_note(merged.text).meta
    assert meta["tags"] == ["x", "o", "t"]  # y removed there, o and t added: a set merge
    assert meta["updated"].startswith("2026-01-03T00:00:00") and parse_note(merged.text).body == "new body\n"
    assert merged.copy is None
    both = merge_note(base, ours.replace("body", "mine"), theirs, "a/T.md")
    assert parse_note(both.text).body == "mine\n" and both.copy is not None
    assert parse_note(both.copy.text).meta["contradicts"] == ["[[a/T]]"]
    assert merge_note(None, ours, theirs.replace("id: a1", "id: b2"), "a/T.md").collision


def test_a_file_changed_while_the_round_runs_is_merged_not_overwritten(team) -> None:
    _remote, e = team
    ada, bob = e["ada"], e["bob"]
    shared = ada.scribe("First words.", title="Shared")
    assert ada.sync()["in_sync"] and bob.sync()["in_sync"]
    ada.revise(shared["id"], text="Ada's words.")
    assert ada.sync()["in_sync"]
    fetch = bob.team.syncer._fetch

    def fetch_then_hand_edit(branch: str):  # the person saves the note after the round committed what was pending
        theirs = fetch(branch)
        file = bob.vault.root / shared["path"]
        file.write_text(file.read_text().replace("First words.", "Bob typed this meanwhile."))
        return theirs

    bob.team.syncer._fetch = fetch_then_hand_edit
    assert bob.sync()["in_sync"]
    bob.team.syncer._fetch = fetch
    assert bob.sync()["in_sync"] and ada.sync()["in_sync"]
    for engine in (ada, bob):
        texts = "\n".join(notes_in(engine.vault.root).values())
        assert "Ada's words." in texts and "Bob typed this meanwhile." in texts
        assert not MARKERS.search(texts)
        assert engine.check()["consistent"]


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (
            (
                "fatal: '/x/remote.git' does not appear to be a git repository\n"
                "fatal: Could not read from remote repository."
            ),
            "unreachable",
        ),
        ("git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", "auth"),
        ("fatal: could not read Username for 'https://github.com': terminal prompts disabled", "auth"),
        ("fatal: unable to access 'https://example.com/team.git/': The requested URL returned error: 403", "auth"),
        # a path that holds "401" (pytest's /tmp/pytest-of-root/pytest-401/...) is not an HTTP status
        ("fatal: '/tmp/pytest-401/remote.git' does not appear to be a git repository", "unreachable"),
        (
            (
                "remote: error: GH006: Protected branch update failed\n"
                " ! [remote rejected] main -> main (protected branch hook "
                "declined)"
            ),
            "rejected",
        ),
    ],
)
def test_a_failed_fetch_or_push_says_why_in_one_line(stderr: str, kind: str) -> None:
    from spellbook.git.sync import _failed

    failed = _failed("push", stderr)
    assert failed.kind == kind and "\n" not in str(failed) and str(failed).startswith("push: ")


def test_scopes_hold_on_every_machine(team) -> None:
    from spellbook.scope import Scope, scoped

    _remote, e = team
    ada, bob = e["ada"], e["bob"]
    with scoped(Scope(context="alpha")):
        secret = ada.scribe("Alpha's roadmap has a launch in May.", title="Alpha roadmap")["id"]
    assert ada.sync()["in_sync"] and bob.sync()["in_sync"]
    assert secret in ids_in(bob.vault.root)
    with scoped(Scope(context="beta")):
        assert not [h for h in bob.memorize("roadmap launch")["results"] if h["id"] == secret]
    with scoped(Scope(context="alpha")):
        assert [h for h in bob.memorize("roadmap launch")["results"] if h["id"] == secret]
