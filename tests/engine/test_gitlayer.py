"""git as a layer: each tool write is committed (only Spellbook's files, with the bytes it wrote), a
person's work in progress is never committed or unstaged, and history/restore read versions back.
Real git repositories in temporary folders."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.errors import FileChangedError, InvalidInputError, NoteNotFoundError, VersionControlError
from tests.helpers.git import ENV, committed_files, git, head
from tests.helpers.stdio import call, error, server


def status(cwd: Path) -> dict[str, str]:
    out = git(cwd, "status", "--porcelain=v1", "--untracked-files=all")
    return {line[3:].strip('"'): line[:2] for line in out.splitlines()}


def open_engine(vault: Path, **settings) -> Engine:
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False, **settings), embedder=HashingEmbedder())
    engine.start()
    return engine


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A git vault with a person's work in progress: an unstaged edit, a staged edit, a staged new
    file and an untracked file."""
    root = tmp_path / "vault"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".spellbook/\n.trash/\nprivate/\n")
    (root / "unstaged.md").write_text("# Unstaged\n\nbase\n")
    (root / "staged.md").write_text("# Staged\n\nbase\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    (root / "unstaged.md").write_text("# Unstaged\n\nbase\nthe person's edit, not staged\n")
    (root / "staged.md").write_text("# Staged\n\nbase\nthe person's edit, staged\n")
    (root / "new.md").write_text("# New\n\nstaged new file\n")
    git(root, "add", "staged.md", "new.md")
    (root / "scratch.md").write_text("# Scratch\n\nuntracked\n")
    return root


@pytest.fixture
def engine(vault: Path):
    engine = open_engine(vault)
    yield engine
    engine.close()


def person_untouched(vault: Path, staged_diff: str) -> None:
    assert {k: v for k, v in status(vault).items() if not k.startswith(("ops/", "inbox/"))} == {
        "unstaged.md": " M",
        "staged.md": "M ",
        "new.md": "A ",
        "scratch.md": "??",
    }
    assert git(vault, "diff", "--cached", "--", "staged.md") == staged_diff
    assert (vault / "unstaged.md").read_text().endswith("not staged\n")


def test_each_tool_write_is_one_commit_of_only_that_file(engine: Engine, vault: Path) -> None:
    staged_diff = git(vault, "diff", "--cached", "--", "staged.md")
    stored = engine.scribe("Deploys go through CI.", title="Deploy pipeline", category="ops")
    engine.git.flush()
    assert head(vault) == f'spellbook: scribe "Deploy pipeline" (id {stored["id"]})'
    assert committed_files(vault) == [stored["path"]]
    assert git(vault, "show", f"HEAD:{stored['path']}") == (vault / stored["path"]).read_text()
    assert stored["path"] not in status(vault)  # clean: the index knows the commit
    person_untouched(vault, staged_diff)

    engine.revise(stored["id"], text="Deploys go through ArgoCD.")
    engine.git.flush()
    assert head(vault) == f'spellbook: revise "Deploy pipeline" (id {stored["id"]})'
    assert committed_files(vault) == [stored["path"]]
    person_untouched(vault, staged_diff)

    gone = engine.erase(stored["id"])
    engine.git.flush()
    assert head(vault) == f'spellbook: erase "Deploy pipeline" (id {stored["id"]})'
    assert git(vault, "show", "--name-status", "--format=", "HEAD").splitlines() == [f"D\t{stored['path']}"]
    assert (vault / gone["trash_path"]).is_file() and not git(vault, "ls-files", ".trash")
    person_untouched(vault, staged_diff)
    assert git(vault, "log", "--format=%s").count("spellbook:") == 3
    stats = engine.stats()["git"]
    assert stats["committing"] and stats["commits"] == 3 and stats["pending"] == 0


def test_each_commit_holds_the_bytes_its_tool_wrote(engine: Engine, vault: Path) -> None:
    # The revise lands before the scribe's commit runs: the scribe's commit still holds the scribe's text.
    stored = engine.scribe("First text.", title="Quick", category="ops")
    first = (vault / stored["path"]).read_text()
    engine.revise(stored["id"], text="Second text.")
    engine.git.flush()
    assert git(vault, "show", f"HEAD~1:{stored['path']}") == first
    assert git(vault, "show", f"HEAD:{stored['path']}").endswith("Second text.")


def test_a_hand_edit_to_the_same_file_is_kept_and_the_message_says_so(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Tea steeps for 3 minutes.", title="Tea", category="ops")
    engine.git.flush()
    file = vault / stored["path"]
    file.write_text(file.read_text() + "\nA person's note.\n")
    engine.revise(stored["id"], tags=["tea"])
    engine.git.flush()
    message = git(vault, "log", "-1", "--format=%B")
    assert message.startswith(f'spellbook: revise "Tea" (id {stored["id"]}), with uncommitted hand edits')
    assert "not committed yet" in message
    assert "A person's note." in git(vault, "show", f"HEAD:{stored['path']}")


def test_history_lists_versions_and_restore_brings_one_back(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Version one.", title="Evolving", category="ops")
    engine.revise(stored["id"], text="Version two.")
    engine.revise(stored["id"], text="Version three.")
    history = engine.history(stored["id"])
    versions = history["versions"]
    assert [v["message"].split(" ")[1] for v in versions] == ["revise", "revise", "scribe"]
    assert [v["change"] for v in versions] == ["modified", "modified", "added"]
    assert versions[0]["current"] and not versions[2]["current"]
    assert (
        versions[0]["content_version"]
        == history["current_version"]
        == engine.get_memories([stored["id"]])["memories"][0]["version"]
    )
    assert not history["uncommitted"] and not history["erased"] and not history["more"]
    assert all(v["author"] and v["date"] and len(v["version"]) == 12 for v in versions)
    assert len(engine.history(stored["id"], limit=2)["versions"]) == 2 and engine.history(stored["id"], limit=2)["more"]

    restored = engine.restore(stored["id"], versions[2]["version"])
    file = vault / stored["path"]
    assert file.read_text().endswith("Version one.") and restored["version"] == versions[2]["content_version"]
    assert engine.memorize("Version one", mode="keyword")["results"][0]["id"] == stored["id"]
    after = engine.history(stored["id"])["versions"]
    assert after[0]["message"] == f'spellbook: restore "Evolving" (id {stored["id"]}) to {versions[2]["version"]}'
    assert after[0]["current"] and after[3]["current"]  # the restored text is the first version's
    assert engine.restore(stored["id"], versions[2]["version"])["unchanged"]
    with pytest.raises(InvalidInputError, match="not in the history"):
        engine.restore(stored["id"], git(vault, "rev-list", "--max-parents=0", "HEAD").strip())
    with pytest.raises(InvalidInputError, match="not a commit"):
        engine.restore(stored["id"], "--exec=boom")


def test_restore_refuses_a_file_changed_since_and_never_loses_a_hand_edit(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Version one.", title="Guarded", category="ops")
    engine.revise(stored["id"], text="Version two.")
    old = engine.history(stored["id"])["versions"][1]["version"]
    read = engine.get_memories([stored["id"]])["memories"][0]["version"]
    file = vault / stored["path"]
    file.write_text(file.read_text() + "\nhand edit\n")
    with pytest.raises(FileChangedError, match="changed on disk"):
        engine.restore(stored["id"], old, current_version=read)
    assert file.read_text().endswith("hand edit\n")

    history = engine.history(stored["id"])
    assert history["uncommitted"] and not any(v["current"] for v in history["versions"])
    engine.restore(stored["id"], old)  # without a version check: the hand edit is committed first
    engine.git.flush()
    assert file.read_text().endswith("Version one.")
    log = git(vault, "log", "-2", "--format=%s").splitlines()
    assert log[0].startswith("spellbook: restore") and log[1].startswith('spellbook: snapshot "Guarded"')
    assert git(vault, "show", f"HEAD~1:{stored['path']}").endswith("hand edit\n")


def test_restore_an_erased_memory(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Saffron is the stigma of a crocus.", title="Saffron", category="ops", tags=["spice"])
    engine.erase(stored["id"])
    other = engine.scribe("A new note took the name.", title="Saffron", category="ops")
    assert other["path"] == stored["path"]
    history = engine.history(stored["id"])
    assert history["erased"] and history["title"] == "Saffron" and history["path"] == stored["path"]
    assert [v["change"] for v in history["versions"]] == ["deleted", "added"]
    with pytest.raises(InvalidInputError, match="erased"):
        engine.restore(stored["id"], history["versions"][0]["version"])
    back = engine.restore(stored["id"], history["versions"][1]["version"])
    assert back["path"] == "ops/Saffron 2.md" and back["erased_before"]  # the other note is not overwritten
    engine.git.flush()
    assert engine.get_memories([stored["id"]])["memories"][0]["metadata"]["tags"] == ["spice"]
    assert (vault / other["path"]).read_text().endswith("A new note took the name.")
    assert head(vault).startswith('spellbook: restore "Saffron"') and committed_files(vault) == [back["path"]]


@pytest.mark.parametrize("id", ["5612328435997172", "12e45678", "a.b+c(d)|e"])
def test_an_erased_memory_is_found_however_yaml_wrote_its_id(engine: Engine, vault: Path, id: str) -> None:
    """An id of digits only, or one that reads as a number, is quoted in the frontmatter
    (``id: '5612328435997172'``); one with regex characters must match only itself."""
    decoy = engine.scribe(
        "Another memory, erased too.", title="Decoy", category="ops", _id=id.replace(".", "x").replace("5", "0")
    )
    stored = engine.scribe("Saffron is the stigma of a crocus.", title="Saffron", category="ops", _id=id)
    engine.erase(stored["id"])
    engine.erase(decoy["id"])
    history = engine.history(id)
    assert history["erased"] and history["title"] == "Saffron" and history["path"] == stored["path"]
    assert [v["change"] for v in history["versions"]] == ["deleted", "added"]


def test_a_memory_whose_file_was_emptied_by_hand_is_restored_in_place(engine: Engine, vault: Path) -> None:
    """Emptied in an editor (or caught by the watcher between an editor's truncate and its write):
    the index loses the id, but no commit took it out: not erased, and a restore writes the file."""
    stored = engine.scribe("Version one.", title="Evolving", category="ops")
    engine.revise(stored["id"], text="Version two.")
    file = vault / stored["path"]
    file.write_text("")
    engine.indexer.sync_path(stored["path"])
    with pytest.raises(NoteNotFoundError):
        engine.get_memories([stored["id"]])  # the index lost the id
    history = engine.history(stored["id"])
    assert not history["erased"] and history["title"] == "Evolving" and history["uncommitted"]
    assert [v["change"] for v in history["versions"]] == ["modified", "added"]  # to HEAD, not cut at the scribe
    empty = engine.vault.read(stored["path"]).version
    assert history["current_version"] == empty

    back = engine.restore(stored["id"], history["versions"][1]["version"], current_version=empty)
    assert back["path"] == stored["path"] and not back["erased_before"]
    assert sorted(p.name for p in (vault / "ops").iterdir()) == ["Evolving.md"]  # no second file
    assert file.read_text().endswith("Version one.")
    assert engine.get_memories([stored["id"]])["memories"][0]["path"] == stored["path"]
    engine.git.flush()
    assert git(vault, "show", f"HEAD~1:{stored['path']}") == ""  # the emptied file, committed before the restore


def test_a_restore_during_a_hand_save_is_refused_not_lost(engine: Engine, vault: Path) -> None:
    """The web view's case: the page read version V; an editor saves (truncate, then write) and the
    watcher indexed the file in between; the restore must say the file changed, and keep the save."""
    stored = engine.scribe("Version one.", title="Guarded", category="ops")
    engine.revise(stored["id"], text="Version two.")
    old = engine.history(stored["id"])["versions"][1]["version"]
    read = engine.get_memories([stored["id"]])["memories"][0]["version"]
    file = vault / stored["path"]
    saved = file.read_text() + "\nhand edit\n"
    file.write_text("")
    engine.indexer.sync_path(stored["path"])  # the watcher, between the truncate and the write
    file.write_text(saved)
    with pytest.raises(FileChangedError, match="changed on disk"):
        engine.restore(stored["id"], old, current_version=read)
    assert file.read_text() == saved


def test_a_memory_deleted_by_hand_and_not_committed_is_restored_at_its_path(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Version one.", title="Dropped", category="ops")
    engine.revise(stored["id"], text="Version two.")
    (vault / stored["path"]).unlink()
    engine.indexer.sync_path(stored["path"])
    history = engine.history(stored["id"])
    assert not history["erased"] and history["current_version"] is None and len(history["versions"]) == 2
    back = engine.restore(stored["id"], history["versions"][1]["version"])
    assert back["path"] == stored["path"]
    assert (vault / stored["path"]).read_text().endswith("Version one.")
    assert sorted(p.name for p in (vault / "ops").iterdir()) == ["Dropped.md"]


def test_a_memory_replaced_by_hand_with_another_is_restored_beside_it(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Version one.", title="Shared name", category="ops")
    engine.git.flush()
    file = vault / stored["path"]
    other = "---\nid: other-memory\ntitle: Someone else\n---\nA different memory, put here by hand.\n"
    file.write_text(other)
    engine.indexer.sync_path(stored["path"])
    history = engine.history(stored["id"])
    assert history["erased"] and len(history["versions"]) == 1
    back = engine.restore(stored["id"], history["versions"][0]["version"])
    assert back["path"] == "ops/Shared name 2.md" and back["erased_before"]
    assert file.read_text() == other  # the other memory is not overwritten
    assert engine.get_memories(["other-memory"])["memories"][0]["path"] == stored["path"]

    binary = engine.scribe("Soon to be bytes.", title="Bytes", category="ops")
    engine.git.flush()
    (vault / binary["path"]).write_bytes(b"\x00\xff\xfe not text")
    engine.indexer.sync_path(binary["path"])
    history = engine.history(binary["id"])
    assert history["erased"]
    assert engine.restore(binary["id"], history["versions"][0]["version"])["path"] == "ops/Bytes 2.md"
    assert (vault / binary["path"]).read_bytes() == b"\x00\xff\xfe not text"


def test_a_vault_that_is_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``.git`` in the vault or above it: no git is run for a write (each one ran ``git rev-parse``
    before); a ``git init`` later is seen at the next write."""
    vault = tmp_path / "plain"
    vault.mkdir()
    assert not any((folder / ".git").exists() for folder in (vault, *vault.parents))
    runs: list[list[str]] = []
    real_run = subprocess.run

    def noting(args, *more, **kwargs):
        runs.append(list(args))
        return real_run(args, *more, **kwargs)

    monkeypatch.setattr("spellbook.git.repo.subprocess.run", noting)
    engine = open_engine(vault)
    try:
        stored = engine.scribe("No git here.", title="Plain", category="ops")
        engine.revise(stored["id"], text="Still no git.")
        engine.erase(stored["id"])
        engine.git.flush()
        assert runs == []
        assert not (vault / ".git").exists()
        with pytest.raises(VersionControlError, match="git init"):
            engine.history(stored["id"])
        with pytest.raises(VersionControlError, match="not a git repository"):
            engine.restore(stored["id"], "abcdef12")
        assert engine.stats()["git"]["repository"] is False
        git(vault, "init", "-q")
        later = engine.scribe("Now under git.", title="Later", category="ops")
        engine.git.flush()
        assert committed_files(vault, "HEAD") == [later["path"]]
    finally:
        engine.close()


def test_git_not_installed(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("spellbook.git.repo.shutil.which", lambda name: None)
    before = head(vault, "%H")
    engine = open_engine(vault)
    try:
        stored = engine.scribe("No git binary.", title="Nogit", category="ops")
        with pytest.raises(VersionControlError, match="not installed"):
            engine.history(stored["id"])
        assert head(vault, "%H") == before and engine.stats()["git"]["installed"] is False
    finally:
        engine.close()


def test_commits_off(vault: Path) -> None:
    before = head(vault, "%H")
    engine = open_engine(vault, git_commit="false")
    try:
        stored = engine.scribe("Not committed.", title="Off", category="ops")
        engine.revise(stored["id"], text="Still not committed.")
        engine.git.flush()
        assert head(vault, "%H") == before and status(vault)[stored["path"]] == "??"
        history = engine.history(stored["id"])  # reading history still works
        assert history["versions"] == [] and history["uncommitted"]
        git(vault, "add", stored["path"])
        git(vault, "commit", "-qm", "by hand", "--", stored["path"])
        engine.revise(stored["id"], text="Third.")
        first = engine.history(stored["id"])["versions"][0]["version"]
        with pytest.raises(VersionControlError, match="not committed"):
            engine.restore(stored["id"], first)  # it would overwrite changes git does not have
        assert (vault / stored["path"]).read_text().endswith("Third.")
    finally:
        engine.close()


def test_setting_values() -> None:
    assert Settings(git_commit="off").git_commit == "false"
    assert Settings(git_commit=True).git_commit == "true"
    assert Settings().git_commit == "auto"
    with pytest.raises(ValueError):
        Settings(git_commit="sometimes")


def test_mid_merge_nothing_is_committed(engine: Engine, vault: Path) -> None:
    git(vault, "stash", "-q", "--include-untracked")
    git(vault, "checkout", "-q", "-b", "other")
    (vault / "unstaged.md").write_text("# Unstaged\n\nother side\n")
    git(vault, "commit", "-qam", "other side")
    git(vault, "checkout", "-q", "main")
    (vault / "unstaged.md").write_text("# Unstaged\n\nmain side\n")
    git(vault, "commit", "-qam", "main side")
    merging = subprocess.run(
        ["git", "merge", "other"], cwd=vault, env={**ENV, "HOME": str(vault)}, capture_output=True, check=False
    )
    assert merging.returncode != 0 and (vault / ".git" / "MERGE_HEAD").exists()
    before = head(vault, "%H")
    stored = engine.scribe("Written mid-merge.", title="Midmerge", category="ops")
    engine.git.flush()
    assert head(vault, "%H") == before and (vault / ".git" / "MERGE_HEAD").exists()
    stats = engine.stats()["git"]
    assert stats["skipped"] == 1 and "merge" in stats["last_skip"]["reason"]
    assert status(vault)[stored["path"]] == "??" and status(vault)["unstaged.md"] == "UU"


def test_ignored_files_are_not_committed(engine: Engine, vault: Path) -> None:
    before = head(vault, "%H")
    engine.scribe("A private thought.", title="Secret diary", category="private")
    engine.git.flush()
    assert head(vault, "%H") == before
    assert "ignored" in engine.stats()["git"]["last_skip"]["reason"]


def test_a_fallback_identity_only_when_none_is_configured(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(vault.parent))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(vault.parent / "no-such-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    engine = open_engine(vault)
    try:
        stored = engine.scribe("Who wrote this?", title="Identity", category="ops")
        engine.git.flush()
        me = f"Spellbook on {socket.gethostname()} <spellbook@localhost>"
        assert head(vault, "%an <%ae>|%cn <%ce>") == f"{me}|{me}"  # a machine's commits say which machine
        git(vault, "config", "user.name", "Alice")
        git(vault, "config", "user.email", "alice@example.com")
        engine.revise(stored["id"], text="Alice's vault.")
        engine.git.flush()
        assert head(vault, "%an <%ae>") == "Alice <alice@example.com>"
    finally:
        engine.close()


def test_a_vault_in_a_subfolder_of_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    vault = repo / "notes"
    vault.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text(".spellbook/\n")
    (repo / "code.py").write_text("print(1)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "code.py").write_text("print(2)\n")
    engine = open_engine(vault)
    try:  # a repository that tracks nothing in the vault folder is not the vault's history (auto)
        engine.scribe("Not yet.", title="Early", category="ops")
        engine.git.flush()
        assert head(repo) == "base" and "tracks none" in engine.stats()["git"]["last_skip"]["reason"]
    finally:
        engine.close()
    (vault / "README.md").write_text("# Notes\n")
    git(repo, "add", "notes/README.md")
    git(repo, "commit", "-qm", "track the notes folder", "--", "notes/README.md")
    engine = open_engine(vault)
    try:
        stored = engine.scribe("One.", title="Nested", category="ops")
        engine.revise(stored["id"], text="Two.")
        versions = engine.history(stored["id"])["versions"]
        assert [v["path"] for v in versions] == [stored["path"]] * 2
        assert committed_files(repo) == [f"notes/{stored['path']}"]
        engine.restore(stored["id"], versions[1]["version"])
        engine.git.flush()
        assert (vault / stored["path"]).read_text().endswith("One.")
        assert status(repo) == {"code.py": " M", "notes/ops/Early.md": "??"}
    finally:
        engine.close()


def test_history_follows_a_rename(engine: Engine, vault: Path) -> None:
    stored = engine.scribe("Moved by hand.", title="Wanderer", category="ops")
    engine.git.flush()
    (vault / "archive").mkdir()
    git(vault, "mv", stored["path"], "archive/Wanderer.md")
    git(vault, "commit", "-qm", "archive it", "--", stored["path"], "archive/Wanderer.md")
    engine.reconcile()
    history = engine.history(stored["id"])
    assert [(v["change"], v["path"]) for v in history["versions"]] == [
        ("renamed", "archive/Wanderer.md"),
        ("added", stored["path"]),
    ]
    engine.revise(stored["id"], text="Changed.")
    engine.restore(stored["id"], history["versions"][1]["version"])  # the old content, at the current path
    assert (vault / "archive/Wanderer.md").read_text().endswith("Moved by hand.")
    assert not (vault / stored["path"]).exists()


@pytest.mark.slow
def test_history_and_restore_over_mcp_stdio(vault: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()

    async def main() -> None:
        async with Client(server(vault)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"history", "restore"} <= names
            stored = await call(client, "scribe", text="Cardamom: green pods.", title="Cardamom", category="ops")
            await call(client, "revise", id=stored["id"], text="Cardamom: black pods.")
            result = await client.call_tool("history", {"id": stored["id"]})
            assert not result.is_error and "spellbook: scribe" in result.content[0].text
            versions = result.structured_content["versions"]
            assert len(versions) == 2 and versions[0]["current"]
            restored = await call(client, "restore", id=stored["id"], version=versions[1]["version"])
            assert restored["restored"] == versions[1]["version"]
            full = (await call(client, "get_memories", ids=[stored["id"]]))["memories"][0]
            assert full["text"] == "Cardamom: green pods."
            assert "not a commit" in await error(client, "restore", id=stored["id"], version="0000000")
        async with Client(server(plain)) as client:
            stored = await call(client, "scribe", text="Plain vault.", title="Plain", category="ops")
            message = await error(client, "history", id=stored["id"])
            assert "not a git repository" in message and "git init" in message

    anyio.run(main)
    assert head(vault).startswith('spellbook: restore "Cardamom"')
    person_untouched(vault, git(vault, "diff", "--cached", "--", "staged.md"))


def test_links_and_imports_are_committed_too(engine: Engine, vault: Path, tmp_path: Path) -> None:
    staged_diff = git(vault, "diff", "--cached", "--", "staged.md")
    old = engine.scribe("Jenkins jobs deploy.", title="Old deploy", category="ops")
    new = engine.scribe("ArgoCD deploys.", title="New deploy", category="ops")
    engine.link(new["id"], old["id"], relation="supersedes", reason="ArgoCD replaced Jenkins")
    engine.git.flush()
    assert head(vault) == f'spellbook: link "New deploy" (id {new["id"]})'
    assert committed_files(vault) == [new["path"]]
    engine.unlink(new["id"], old["id"])
    engine.git.flush()
    assert head(vault) == f'spellbook: unlink "New deploy" (id {new["id"]})'

    exported = engine.export("json", path="out.json")
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    target = open_engine(other)
    try:
        report = target.import_memories(exported["path"])
        target.git.flush()
        written = sorted(item["path"] for item in report["created"])
        assert len(written) >= 2 and head(other) == f'spellbook: import "{len(written)} memories from out.json"'
        assert sorted(committed_files(other)) == written
    finally:
        target.close()
    person_untouched(vault, staged_diff)


def test_history_stays_in_scope(engine: Engine, vault: Path) -> None:
    from spellbook.scope import Scope, scoped

    with scoped(Scope(context="shop")):
        live = engine.scribe("Shop refunds take 5 days.", title="Refunds")
        gone = engine.scribe("Old shop promo.", title="Promo")
        engine.erase(gone["id"])
    engine.git.flush()
    with scoped(Scope(context="blog")):
        for note_id in (live["id"], gone["id"]):
            with pytest.raises(NoteNotFoundError):
                engine.history(note_id)
    with scoped(Scope(context="shop")):
        assert engine.history(live["id"])["versions"]
        assert engine.history(gone["id"])["erased"]
    (vault / live["path"]).write_text("")  # emptied by hand: found in git by its id, still in its scope
    engine.indexer.sync_path(live["path"])
    with scoped(Scope(context="blog")), pytest.raises(NoteNotFoundError):
        engine.history(live["id"])
    with scoped(Scope(context="shop")):
        assert not engine.history(live["id"])["erased"]


BOB, ALICE = "Bob's roadmap: buy Initech before Q3.", "Alice's roadmap: ship the v2 editor."


def test_a_path_reused_by_another_scope_shows_none_of_its_versions(engine: Engine, vault: Path) -> None:
    """Bob's "Roadmap" is erased and Alice's lands on the same path: her history, diff and restore
    read only the versions that hold her id and a scope she sees, never Bob's text or scope."""
    from spellbook.scope import Scope, scoped

    with scoped(Scope(user="bob")):
        bob = engine.scribe(BOB, title="Roadmap", category="plans")
        engine.revise(bob["id"], text=BOB + " Keep it quiet.")
        engine.erase(bob["id"])
    with scoped(Scope(user="alice")):
        alice = engine.scribe(ALICE, title="Roadmap", category="plans")
        assert alice["path"] == bob["path"]
        history = engine.history(alice["id"])
        assert [v["change"] for v in history["versions"]] == ["added"] and not history["more"]
        assert bob["id"] not in str(history)
        bobs = git(vault, "log", "--format=%H", "--", bob["path"]).split()[1:]  # the erase, revise, scribe
        assert len(bobs) == 3
        for commit in bobs:
            with pytest.raises(InvalidInputError, match="not in the history"):
                engine.restore(alice["id"], commit)
            with pytest.raises(InvalidInputError, match="not in the history"):
                engine.diff(alice["id"], commit)
        shown = engine.diff(alice["id"], history["versions"][0]["version"])["diff"]
        assert "+" + ALICE in shown and "Initech" not in shown
        with pytest.raises(NoteNotFoundError):
            engine.history(bob["id"])
        assert (vault / alice["path"]).read_text().endswith(ALICE)
    unscoped = engine.history(alice["id"])  # another memory's versions are not this one's in any scope
    assert [v["version"] for v in unscoped["versions"]] == [v["version"] for v in history["versions"]]
    with scoped(Scope(user="bob")):  # Bob's own history is whole, and his restore goes beside Alice's note
        his = engine.history(bob["id"])
        assert his["erased"] and [v["change"] for v in his["versions"]] == ["deleted", "modified", "added"]
        assert "Initech" in engine.diff(bob["id"], his["versions"][0]["version"])["diff"]
        back = engine.restore(bob["id"], his["versions"][2]["version"])
        assert back["path"] == "plans/Roadmap 2.md"
    assert (vault / alice["path"]).read_text().endswith(ALICE)


def test_a_version_that_replaced_another_memory_in_one_commit_diffs_against_its_own(vault: Path) -> None:
    """Commits off, the person commits the vault by hand: Bob's erase and Alice's new note at the
    same path are one commit (a modification to git). Alice's diff is from nothing, not from Bob's text."""
    from spellbook.scope import Scope, scoped

    engine = open_engine(vault, git_commit="false")
    try:
        with scoped(Scope(user="bob")):
            bob = engine.scribe(BOB, title="Roadmap", category="plans")
        git(vault, "add", bob["path"])
        git(vault, "commit", "-qm", "by hand", "--", bob["path"])
        with scoped(Scope(user="bob")):
            engine.erase(bob["id"])
        with scoped(Scope(user="alice")):
            alice = engine.scribe(ALICE, title="Roadmap", category="plans")
            git(vault, "add", alice["path"])
            git(vault, "commit", "-qm", "by hand too", "--", alice["path"])
            versions = engine.history(alice["id"])["versions"]
            assert [(v["message"], v["change"]) for v in versions] == [("by hand too", "modified")]
            shown = engine.diff(alice["id"], versions[0]["version"])["diff"]
            assert "+" + ALICE in shown and "Initech" not in shown and "user: bob" not in shown
    finally:
        engine.close()


def test_a_reused_path_over_mcp_stdio(vault: Path) -> None:
    """The same through the MCP tools: each person's client runs a server scoped to them (--user)."""

    async def main() -> None:
        async with Client(server(vault, "--user", "bob")) as client:
            bob = await call(client, "scribe", text=BOB, title="Roadmap", category="plans")
            await call(client, "erase", id=bob["id"])
        async with Client(server(vault, "--user", "alice")) as client:
            alice = await call(client, "scribe", text=ALICE, title="Roadmap", category="plans")
            result = await client.call_tool("history", {"id": alice["id"]})
            assert not result.is_error and len(result.structured_content["versions"]) == 1
            assert bob["id"] not in result.content[0].text
            erased, scribed = git(vault, "log", "-2", "--skip=1", "--format=%H", "--", bob["path"]).split()
            for commit in (erased, scribed):
                message = await error(client, "restore", id=alice["id"], version=commit)
                assert "not in the history" in message
            full = (await call(client, "get_memories", ids=[alice["id"]]))["memories"][0]
            assert full["text"] == ALICE and full["metadata"]["user"] == "alice"
            assert "No memory" in await error(client, "history", id=bob["id"])

    anyio.run(main)
