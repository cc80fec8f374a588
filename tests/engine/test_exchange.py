"""Export and import against real vaults (engine), over real MCP stdio, and from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from mcp import Client

from spellbook.config import Settings
from spellbook.engine import Engine, exchange
from spellbook.engine.formats import spellbook_export
from spellbook.engine.formats.mcp_memory import graph_id
from spellbook.errors import InvalidInputError
from spellbook.vault.note import parse_note
from tests.helpers.engine import open_engine
from tests.helpers.processes import run
from tests.helpers.stdio import call, error, server

DATA = Path(__file__).parents[1] / "data"
SECRET = "ghp_" + "a1B2c3D4e5" * 4


def fill(engine: Engine, vault: Path) -> dict[str, str]:
    """A vault with every kind of note worth carrying over; returns title -> id of the scribed ones."""
    ids = {}
    ids["deploy"] = engine.scribe(
        "Deploys go through GitHub Actions.\n\n---\n\n```\n# not a heading\n```\n한국어 🎉",
        title="Deploy pipeline",
        category="ops",
        topic="deploy",
        tags=["ci"],
        keywords=["argocd"],
        questions=["How do we deploy?"],
        entities=["ArgoCD"],
        importance=4,
        type="decision",
        context="shop",
        source="https://wiki/deploy",
        links=["[[Tea]]"],
    )["id"]
    ids["tea"] = engine.scribe("Green tea: 80C, 2 minutes", title="Tea", category="kitchen")["id"]
    engine.revise(ids["tea"], text="Green tea: 80C, 3 minutes")  # updated != created now
    (vault / "journal").mkdir()
    (vault / "journal" / "Plain.md").write_text("# Trip\n\nNo frontmatter, links [[Tea]].\n", encoding="utf-8")
    (vault / "journal" / "Custom.md").write_bytes(
        b"---\ntitle: Custom keys\nmood: happy   # a comment\nnested:\n  a: [1, 2]\nwhen: 2024-01-02\n"
        b"created: 2024-01-02T03:04:05+09:00\n---\n---\nbody starts with a fence\r\nCRLF, no final newline"
    )
    (vault / "journal" / "Null id.md").write_text("---\nid:\ntitle: Null id\n---\nempty id key\n", encoding="utf-8")
    (vault / "journal" / "Broken.md").write_text(
        "---\ntitle: [unclosed\n---\nbody of a broken note\n", encoding="utf-8"
    )
    engine.reconcile()
    return ids


def snapshot(vault: Path) -> dict[str, tuple[dict, bytes]]:
    out = {}
    for file in sorted(vault.rglob("*.md")):
        rel = file.relative_to(vault).as_posix()
        if rel.startswith("."):
            continue
        parsed = parse_note(file.read_bytes().decode("utf-8"))
        out[rel] = (parsed.meta, parsed.body.encode("utf-8"))
    return out


def test_round_trip_into_an_empty_vault_is_loss_free(engine: Engine, vault: Path, tmp_path: Path) -> None:
    fill(engine, vault)
    out = engine.export(path="all.json")
    assert out["count"] == 6 and Path(out["path"]).is_file()
    document = json.loads(Path(out["path"]).read_text(encoding="utf-8"))
    assert document["spellbook_export"] == 1 and document["count"] == 6
    entry = next(m for m in document["memories"] if m["title"] == "Deploy pipeline")
    assert set(entry) == {"id", "path", "title", "metadata", "body"}
    assert entry["metadata"]["links"] == ["[[Tea]]"] and entry["metadata"]["created"]

    other = tmp_path / "other"
    other.mkdir()
    target = open_engine(Settings(vault=other, embedder="hashing", watch=False))
    try:
        report = target.import_memories(out["path"])
        assert report["counts"] == {"created": 6, "overwritten": 0, "unchanged": 0, "skipped": 0, "failed": 0}
        assert snapshot(other) == snapshot(vault)  # every frontmatter key and every body byte
        ids = lambda e: sorted((m["id"], m["path"]) for m in e.list_memories(limit=200)["memories"])
        assert ids(target) == ids(engine)  # ids, including derived ones of hand-written notes
        assert (other / "journal" / "Plain.md").read_bytes() == (vault / "journal" / "Plain.md").read_bytes()
        custom = parse_note((other / "journal" / "Custom.md").read_text(encoding="utf-8")).meta
        assert custom["created"] == "2024-01-02T03:04:05+09:00"  # timestamps kept, not reset
        deploy = target.get_memories([entry["id"]])["memories"][0]
        assert deploy["links"][0]["title"] == "Tea"  # links resolve in the new vault
        assert target.memorize("GitHub Actions deploys", mode="keyword")["results"][0]["id"] == entry["id"]
        again = target.export()["content"]
        assert again["memories"] == document["memories"]
    finally:
        target.close()


def test_conflict_policies(engine: Engine, vault: Path, tmp_path: Path) -> None:
    ids = fill(engine, vault)
    file = engine.export(path="backup.json")["path"]
    assert file.startswith(str(vault / ".spellbook" / "exports"))
    before = snapshot(vault)

    skipped = engine.import_memories("backup.json")  # relative: the same exports folder
    assert skipped["counts"]["skipped"] == 6 and skipped["counts"]["created"] == 0
    assert skipped["skipped"][0]["reason"].startswith("id exists at")
    assert snapshot(vault) == before

    engine.revise(ids["tea"], text="Tea changed after the backup")
    restored = engine.import_memories(file, on_conflict="overwrite")
    assert restored["counts"]["overwritten"] == 1 and restored["counts"]["unchanged"] == 5
    assert snapshot(vault) == before  # the backup's text and timestamps are back

    copies = engine.import_memories(file, on_conflict="new_id", dry_run=True)
    assert copies["counts"]["created"] == 6 and snapshot(vault) == before  # a dry run writes nothing
    copies = engine.import_memories(file, on_conflict="new_id")
    created = {c["original_id"]: c for c in copies["created"]}
    assert created[ids["tea"]]["id"] != ids["tea"] and created[ids["tea"]]["path"] == "kitchen/Tea 2.md"
    copy = engine.get_memories([created[ids["tea"]]["id"]])["memories"][0]
    assert copy["text"] == "Green tea: 80C, 3 minutes" and copy["metadata"]["id"] == created[ids["tea"]]["id"]
    assert len(engine.list_memories(limit=200)["memories"]) == 12


def test_overwrite_never_clobbers_a_concurrent_edit(engine: Engine, vault: Path, monkeypatch) -> None:
    ids = fill(engine, vault)
    file = engine.export(path="backup.json")["path"]
    engine.revise(ids["tea"], text="changed by the agent")
    tea = vault / "kitchen" / "Tea.md"
    real_read = engine.vault.read

    def read_then_person_saves(path: str):
        state = real_read(path)
        if path == "kitchen/Tea.md":
            tea.write_text(tea.read_text(encoding="utf-8") + "\nA person's line.", encoding="utf-8")
        return state

    monkeypatch.setattr(engine.vault, "read", read_then_person_saves)
    report = engine.import_memories(file, on_conflict="overwrite")
    assert report["counts"]["failed"] == 1
    assert "changed on disk" in report["failed"][0]["error"] and report["failed"][0]["where"].startswith("memories[")
    assert tea.read_text(encoding="utf-8").endswith("A person's line.")
    assert "Failed memories[" in spellbook_export.import_summary(report)


def write_export(tmp_path: Path, memories: list, **top) -> str:
    file = tmp_path / "import.json"
    file.write_text(json.dumps({"spellbook_export": 1, "memories": memories, **top}), encoding="utf-8")
    return str(file)


def good(n: int = 0, **change) -> dict:
    return {
        "id": f"id{n}",
        "path": f"t/Note {n}.md",
        "title": f"Note {n}",
        "metadata": {"id": f"id{n}"},
        "body": "text",
        **change,
    }


def test_progress_counts_every_memory_a_written_one_once_indexed(engine: Engine, vault: Path, tmp_path: Path) -> None:
    from spellbook.engine.exchange import IMPORT_BATCH

    count = IMPORT_BATCH * 3 + 5
    file = write_export(tmp_path, [good(n) for n in range(count)])
    seen: list[tuple[int, int, int]] = []  # done, total, notes indexed at the time

    def progress(done: int, total: int) -> None:
        seen.append((done, total, engine.stats()["notes"]))

    engine.import_memories(file, progress=progress)
    assert {total for _, total, _ in seen} == {count}
    assert [done for done, _, _ in seen] == sorted(done for done, _, _ in seen)  # never goes back
    assert seen[-1][0] == count and len({done for done, _, _ in seen}) > 3  # steps on the way, then all
    assert all(done <= indexed for done, _, indexed in seen)  # a written memory counts once it is searchable

    seen.clear()
    engine.import_memories(file, on_conflict="skip", progress=progress)  # all there: each is done when read
    assert [done for done, _, _ in seen][:3] == [1, 2, 3] and seen[-1][:2] == (count, count)
    with pytest.raises(InvalidInputError, match="callback"):
        engine.import_memories(file, progress="50%")


def test_an_import_sends_batches_that_grow_then_shrink(engine: Engine, tmp_path: Path, monkeypatch) -> None:
    """The first batch is small, so the model starts at once; the last ones halve, so the embedding
    processes finish together and the last writes are short (exchange.batch_size)."""
    from spellbook.engine.exchange import FIRST_BATCH, IMPORT_BATCH, LAST_BATCH

    sizes: list[int] = []
    sync_batches = engine.indexer.sync_batches

    def counted(batches, done=None):
        def each():
            for batch in batches:
                sizes.append(len(batch))
                yield batch

        return sync_batches(each(), done)

    monkeypatch.setattr(engine.indexer, "sync_batches", counted)
    count = IMPORT_BATCH * 5 + 7
    engine.import_memories(write_export(tmp_path, [good(n) for n in range(count)]))
    assert engine.stats()["notes"] >= count and sum(sizes) == count
    assert sizes[:4] == [FIRST_BATCH, 2 * FIRST_BATCH, 4 * FIRST_BATCH, IMPORT_BATCH]
    top = sizes.index(IMPORT_BATCH)
    tail = sizes[top:]
    assert tail == sorted(tail, reverse=True) and tail[-1] < IMPORT_BATCH  # shrinking to the end
    assert LAST_BATCH <= sizes[-1] < 2 * LAST_BATCH and sizes[-2] >= sizes[-1]


@pytest.mark.parametrize("total", [1, 5, 31, 63, 64, 65, 100, 129, 255, 256, 300, 1000, 10_000])
def test_batch_sizes_cover_every_memory_and_end_no_smaller_than_last_batch(total: int) -> None:
    from spellbook.engine.exchange import FIRST_BATCH, IMPORT_BATCH, LAST_BATCH, batch_size

    sizes: list[int] = []
    left = total
    while left:
        size = batch_size(left, min(IMPORT_BATCH, FIRST_BATCH << len(sizes)))
        assert 0 < size <= left
        sizes.append(size)
        left -= size
    assert sum(sizes) == total and max(sizes) <= max(IMPORT_BATCH, 2 * LAST_BATCH - 1)
    assert sizes[-1] >= min(total, LAST_BATCH)  # never a last batch too small to share out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json at all", "is not JSON"),
        ("[]", "Not a Spellbook export"),
        ('{"spellbook_export": 2, "memories": []}', "Unsupported export version 2"),
        ('{"spellbook_export": 1}', '"memories" must be a list'),
        ('{"spellbook_export": 1, "memories": [], "extra": 1}', "Unknown top-level key"),
        ('{"type": "entity", "name": "x"}\nnot json\n', "line 1: entity 'x' has no entityType"),
    ],
)
def test_bad_files_are_refused_whole(engine: Engine, vault: Path, tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "bad.json"
    file.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError, match=message):
        engine.import_memories(str(file))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (good(1, path="../evil.md"), r"memories\[1\] \(id 'id1'\): path '../evil.md' is not inside the vault"),
        (good(1, path="/etc/evil.md"), r"memories\[1\].*not inside the vault"),
        (good(1, path=".obsidian/x.md"), r"memories\[1\].*not a note path"),
        (good(1, path="t/x.txt"), r"memories\[1\].*not a note path"),
        (good(1, metadata={"id": "other"}), r"memories\[1\].*metadata.id 'other' differs"),
        (good(1, body=3), r"memories\[1\].*body must be a string"),
        (good(1, extra=1), r"memories\[1\].*unknown key"),
        ({"path": "a.md"}, r"memories\[1\]: missing id, metadata, body"),
        ("nope", r"memories\[1\]: must be an object"),
    ],
)
def test_a_bad_entry_is_named_and_nothing_is_imported(
    engine: Engine, vault: Path, tmp_path: Path, entry, message: str
) -> None:
    file = write_export(tmp_path, [good(0), entry, good(2)])
    with pytest.raises(InvalidInputError, match=message) as caught:
        engine.import_memories(file)
    assert "nothing was imported" in str(caught.value)
    assert not list(vault.rglob("*.md"))


def test_symlinked_folder_out_of_the_vault_is_refused(engine: Engine, vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, vault / "link")
    with pytest.raises(InvalidInputError, match=r"memories\[0\].*resolves outside the vault"):
        engine.import_memories(write_export(tmp_path, [good(0, path="link/x.md")]))
    assert not list(outside.iterdir())


def test_imported_text_goes_through_the_privacy_filter(engine: Engine, vault: Path, tmp_path: Path) -> None:
    file = write_export(tmp_path, [good(0, body=f"token {SECRET}", metadata={"id": "id0", "source": SECRET})])
    report = engine.import_memories(file)
    assert report["redacted"] == "2 secrets redacted: github-token x2"
    text = (vault / "t" / "Note 0.md").read_text(encoding="utf-8")
    assert SECRET not in text and "[REDACTED:github-token]" in text


def test_a_repeated_id_in_the_file_follows_the_policy(engine: Engine, vault: Path, tmp_path: Path) -> None:
    file = write_export(tmp_path, [good(0), good(0, path="t/Again.md", body="second")])
    report = engine.import_memories(file)
    assert report["counts"]["created"] == 1 and report["skipped"][0]["where"] == "memories[1]"
    assert not (vault / "t" / "Again.md").exists()


def test_export_paths_are_guarded(engine: Engine, vault: Path, tmp_path: Path, monkeypatch) -> None:
    # The full rule (symlinks, devices, other folders, files Spellbook did not write): test_security_writes.
    fill(engine, vault)
    target = vault / ".spellbook" / "exports" / "out.json"
    assert engine.export(path="out.json")["path"] == str(target)
    with pytest.raises(InvalidInputError, match="exists; pass overwrite=true"):
        engine.export(path=str(target))
    assert engine.export(path=str(target), overwrite=True, filter={"category": "ops"})["count"] == 1
    assert json.loads(target.read_text())["filter"] == {"category": "ops"}
    with pytest.raises(InvalidInputError, match="only be written in"):
        engine.export(format="markdown", path=str(vault / "export.md"))
    with pytest.raises(InvalidInputError, match="'..' is not allowed"):
        engine.export(path="../../escape.json")
    with pytest.raises(InvalidInputError, match="does not exist"):
        engine.export(path="no/such/dir.json")
    monkeypatch.setattr(exchange, "INLINE_EXPORT_CHARS", 500)
    with pytest.raises(InvalidInputError, match="Pass path"):
        engine.export()
    assert not list(vault.rglob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_markdown_export_holds_every_memory(engine: Engine, vault: Path) -> None:
    fill(engine, vault)
    doc = engine.export(format="markdown")["content"]
    assert doc.startswith("# Spellbook export\n")
    rows = engine.list_memories(limit=200)["memories"]
    for row in rows:
        assert f"## {row['title']}\n" in doc and f"- id: `{row['id']}`" in doc and f"- path: `{row['path']}`" in doc
        body = parse_note((vault / row["path"]).read_bytes().decode("utf-8")).body
        assert body.rstrip("\n") in doc
    assert "mood: happy" in doc and "tags:\n  - ci" in doc  # frontmatter as YAML blocks


def test_mcp_memory_graph_import(engine: Engine, vault: Path) -> None:
    report = engine.import_memories(str(DATA / "mcp_memory.jsonl"))
    assert report["format"] == "mcp-memory" and report["counts"]["created"] == 4 and "warnings" not in report
    john = vault / "knowledge-graph" / "person" / "John_Smith.md"
    parsed = parse_note(john.read_text(encoding="utf-8"))
    assert parsed.meta["id"] == graph_id("John_Smith") and parsed.meta["title"] == "John_Smith"
    assert parsed.meta["category"] == "knowledge-graph" and parsed.meta["topic"] == "person"
    assert parsed.meta["tags"] == ["person"] and parsed.meta["links"] == ["[[Anthropic]]", "[[Spellbook]]"]
    assert parsed.meta["relations"] == ["works_at [[Anthropic]]", "contributes_to [[Spellbook]]"]
    assert parsed.body == "- Speaks fluent Spanish\n- Graduated in 2019\n- Prefers morning meetings\n"
    jane = parse_note((vault / "knowledge-graph" / "person" / "Jane Doe.md").read_text(encoding="utf-8")).body
    assert "- Allergic to peanuts\n  Carries an EpiPen\n" in jane  # a multi-line observation stays one bullet
    full = engine.get_memories([graph_id("John_Smith")])["memories"][0]
    assert [link.get("title") for link in full["links"]] == ["Anthropic", "Spellbook"]
    assert [b["title"] for b in full["backlinks"]] == ["Jane Doe"]
    assert engine.list_memories(filter={"category": "knowledge-graph", "topic": "person"})["total"] == 2
    assert engine.memorize("fluent Spanish", mode="keyword")["results"][0]["title"] == "John_Smith"

    before = snapshot(vault)
    assert engine.import_memories(str(DATA / "mcp_memory.jsonl"))["counts"]["skipped"] == 4
    again = engine.import_memories(str(DATA / "mcp_memory.jsonl"), on_conflict="overwrite")
    assert again["counts"]["unchanged"] == 4 and snapshot(vault) == before  # re-syncing a graph is idempotent


def test_mcp_memory_graph_problems(engine: Engine, vault: Path, tmp_path: Path) -> None:
    file = tmp_path / "memory.jsonl"
    file.write_text(
        '{"type":"entity","name":"A","entityType":"t","observations":["x"]}\n'
        '{"type":"relation","from":"Nobody","to":"A","relationType":"knows"}\n',
        encoding="utf-8",
    )
    report = engine.import_memories(str(file), format="mcp-memory")
    assert report["counts"]["created"] == 1 and "line 2: relation from 'Nobody'" in report["warnings"][0]
    file.write_text('{"type":"entity","name":"A","entityType":"t","observations":["x"]}\n{"type":"thing"}\n')
    with pytest.raises(InvalidInputError, match=r"line 2: expected an object with \"type\""):
        engine.import_memories(str(file))


@pytest.mark.slow
def test_export_and_import_over_stdio(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    second.mkdir()
    out = tmp_path / "export.json"

    async def main() -> None:
        async with Client(server(first)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"export", "import"} <= names
            stored = await call(client, "scribe", text="Sourdough rises 12 hours.", title="Bread", category="kitchen")
            inline = await call(client, "export", filter={"category": "kitchen"})
            assert [m["id"] for m in inline["content"]["memories"]] == [stored["id"]]
            written = await call(client, "export", path="export.json")
            assert written["path"] == str(first / ".spellbook" / "exports" / "export.json")
            assert written["count"] >= 3  # the template's system notes too
            assert "exists" in await error(client, "export", path="export.json")
            out.write_bytes(Path(written["path"]).read_bytes())
        async with Client(server(second)) as client:
            report = await call(client, "import", path=str(out))
            assert report["counts"]["created"] == written["count"]
            full = await call(client, "get_memories", ids=[stored["id"]])
            assert full["memories"][0]["text"] == "Sourdough rises 12 hours."
            bad = tmp_path / "bad.json"
            bad.write_text("{not json")
            assert "is not JSON" in await error(client, "import", path=str(bad))
            bad.write_text(json.dumps({"spellbook_export": 1, "memories": [{"id": 1}]}))
            assert "memories[0]" in await error(client, "import", path=str(bad))
            bad.write_text(json.dumps({"spellbook_export": 1, "memories": [good(0, path="../../evil.md")]}))
            assert "not inside the vault" in await error(client, "import", path=str(bad))
            assert not (tmp_path / "evil.md").exists()
            assert "No file at" in await error(client, "import", path="missing.json")

    anyio.run(main)


@pytest.mark.slow
def test_cli_export_and_import(tmp_path: Path) -> None:
    source, dest = tmp_path / "a", tmp_path / "b"
    run("init", str(source))
    (source / "notes").mkdir()
    (source / "notes" / "Hand.md").write_text("---\ntitle: Hand\ncategory: notes\n---\nWritten by a person.\n")
    common = ["--embedder", "hashing"]
    printed = json.loads(run("export", "--vault", str(source), *common, "--category", "notes").stdout)
    assert [m["title"] for m in printed["memories"]] == ["Hand"]
    out = tmp_path / "all.json"
    run("export", "--vault", str(source), *common, "--out", str(out))
    assert "exists" in run("export", "--vault", str(source), *common, "--out", str(out), check=False).stderr
    run("export", "--vault", str(source), *common, "--out", str(out), "--overwrite", "--format", "json")
    markdown = run("export", "--vault", str(source), *common, "--format", "markdown").stdout
    assert "## Hand\n" in markdown and "Written by a person." in markdown
    dest.mkdir()
    dry = run("import", str(out), "--vault", str(dest), *common, "--dry-run")
    assert dry.stdout.startswith("Would import") and not (dest / "notes").exists()
    imported = run("import", str(out), "--vault", str(dest), *common, "--json")
    report = json.loads(imported.stdout)
    assert report["counts"]["created"] == json.loads(out.read_text())["count"] >= 3
    count = report["counts"]["created"]
    assert "importing: 100%" in imported.stderr and f"{count}/{count}" in imported.stderr  # progress (tqdm)
    assert (dest / "notes" / "Hand.md").read_text() == (source / "notes" / "Hand.md").read_text()
    again = run("import", str(out), "--vault", str(dest), *common, "--on-conflict", "skip", "--format", "json")
    assert "0 created" in again.stdout and "skipped" in again.stdout


@pytest.mark.slow
def test_cli_import_under_a_running_server_goes_through_it(tmp_path: Path) -> None:
    from spellbook.server.hub import Hub

    vault = tmp_path / "vault"
    run("init", str(vault))
    file = write_export(tmp_path, [good(n) for n in range(3)])
    owner = Hub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    owner.start(background=False)
    try:
        assert owner.role == "owner"
        imported = run("import", file, "--vault", str(vault), "--embedder", "hashing")
        assert "owns this index; it imports the file" in imported.stderr and "importing" not in imported.stderr
        assert "3 created" in imported.stdout
        assert owner.call("memorize", {"query": "text"})["results"]  # the owner indexed them
    finally:
        owner.close()


# --- new notes are written in batches (Vault.create_many): one fsync pass per batch -------------


def test_a_large_import_writes_every_note_whole_with_the_folder_mode(
    engine: Engine, vault: Path, tmp_path: Path
) -> None:
    (vault / "t").mkdir(mode=0o750)
    os.chmod(vault / "t", 0o750)  # whatever the umask: new notes there get 0640 (0644 elsewhere)
    memories = [good(n, path=f"{'t' if n % 2 else 'u'}/Note {n}.md", body=f"body {n}") for n in range(300)]
    report = engine.import_memories(write_export(tmp_path, memories))
    assert report["counts"]["created"] == 300 and not report["failed"]
    for n in range(300):
        file = vault / ("t" if n % 2 else "u") / f"Note {n}.md"
        assert parse_note(file.read_text(encoding="utf-8")).body == f"body {n}"
        assert file.stat().st_mode & 0o777 == (0o640 if n % 2 else (vault / "u").stat().st_mode & 0o666 & ~0o022)
    assert not list(vault.rglob("*.tmp"))
    assert engine.memorize("body 299")["results"][0]["id"] == "id299"


def test_a_batch_is_made_durable_by_one_syncfs_and_a_few_notes_by_an_fsync_each(
    engine: Engine, vault: Path, tmp_path: Path, monkeypatch
) -> None:
    from spellbook.vault import syncing

    real = syncing._syncfs()
    if real is None:
        pytest.skip("syncfs that reports write errors is Linux 5.8 and later")
    calls: list[int] = []
    monkeypatch.setattr(syncing, "_SYNCFS", [lambda fd: (calls.append(fd), real(fd))])
    monkeypatch.setattr(syncing, "_unwritten_bytes", lambda: 0)  # whatever else this machine writes now
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(syncing.os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))

    memories = [good(n, path=f"{'t' if n % 2 else 'u'}/Note {n}.md", body=f"body {n}") for n in range(40)]
    report = engine.import_memories(write_export(tmp_path, memories))
    assert report["counts"]["created"] == 40
    assert 1 <= len(calls) <= 3  # a call a batch (the folders share one file system), not one a file
    assert len(fsyncs) <= 2 * len(calls)  # the folders' own syncs only
    assert all(parse_note((vault / m["path"]).read_text(encoding="utf-8")).body == m["body"] for m in memories)

    calls.clear()
    fsyncs.clear()
    report = engine.import_memories(write_export(tmp_path, [good(100 + n, path=f"s/Few {n}.md") for n in range(3)]))
    assert report["counts"]["created"] == 3 and not calls and len(fsyncs) >= 3

    fsyncs.clear()  # another program's data waits to be written: a syncfs would wait for it too
    monkeypatch.setattr(syncing, "_unwritten_bytes", lambda: 400 * 2**20)
    more = [good(200 + n, path=f"s/More {n}.md") for n in range(20)]
    report = engine.import_memories(write_export(tmp_path, more))
    assert report["counts"]["created"] == 20 and not calls and len(fsyncs) >= 20


def test_a_batch_whose_sync_fails_is_reported_and_none_of_it_is_placed(
    engine: Engine, vault: Path, tmp_path: Path, monkeypatch
) -> None:
    from spellbook.vault import store

    def disk_error(files: list[str]) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store, "sync_files", disk_error)
    file = write_export(tmp_path, [good(n, path=f"t/Note {n}.md") for n in range(20)])
    report = engine.import_memories(file)
    assert report["counts"]["failed"] == 20 and report["counts"]["created"] == 0
    assert "Input/output error" in report["failed"][0]["error"]
    assert not list(vault.rglob("*.md")) and not list(vault.rglob("*.tmp"))
    assert engine.check()["consistent"]

    monkeypatch.undo()  # the disk is back: importing again writes them all
    again = engine.import_memories(file)
    assert again["counts"]["created"] == 20
    assert engine.memorize("body 7")["results"]


def test_a_name_taken_during_the_import_gets_the_next_number(
    engine: Engine, vault: Path, tmp_path: Path, monkeypatch
) -> None:
    real = engine.vault.create_many

    def person_saves_first(items):  # Obsidian creates the file between the free-name check and the write
        (vault / "t").mkdir(exist_ok=True)
        (vault / "t" / "Note 1.md").write_text("a person's note", encoding="utf-8")
        return real(items)

    monkeypatch.setattr(engine.vault, "create_many", person_saves_first)
    report = engine.import_memories(write_export(tmp_path, [good(0), good(1), good(2)]))
    assert (vault / "t" / "Note 1.md").read_text(encoding="utf-8") == "a person's note"
    assert [c["path"] for c in report["created"]] == ["t/Note 0.md", "t/Note 1 2.md", "t/Note 2.md"]
    assert report["created"][1]["requested_path"] == "t/Note 1.md"
    assert parse_note((vault / "t" / "Note 1 2.md").read_text(encoding="utf-8")).meta["id"] == "id1"


def test_a_note_that_cannot_be_written_is_reported_and_the_rest_are_written(
    engine: Engine, vault: Path, tmp_path: Path, monkeypatch
) -> None:
    from spellbook.vault import store

    real = store.write_temp

    def disk_full_for_note_1(target: Path, text: str, mode: int, folder: Path) -> str:
        if target.name == "Note 1.md":
            raise OSError(28, "No space left on device")
        return real(target, text, mode, folder)

    monkeypatch.setattr(store, "write_temp", disk_full_for_note_1)
    file = write_export(tmp_path, [good(0), good(1), good(2), good(3, id="id1", metadata={"id": "id1"})])
    report = engine.import_memories(file)
    assert report["counts"] == {"created": 2, "overwritten": 0, "unchanged": 0, "skipped": 1, "failed": 1}
    assert report["failed"][0]["id"] == "id1" and "No space left" in report["failed"][0]["error"]
    assert report["skipped"][0]["where"] == "memories[3]"  # the file's first copy of an id decides
    assert not (vault / "t" / "Note 1.md").exists() and not list(vault.rglob("*.tmp"))
    assert engine.check()["consistent"]

    monkeypatch.setattr(store, "write_temp", real)  # space freed: importing again writes what failed
    again = engine.import_memories(file)
    assert again["counts"]["created"] == 1 and again["created"][0]["path"] == "t/Note 1.md"
    assert parse_note((vault / "t" / "Note 1.md").read_text(encoding="utf-8")).meta["id"] == "id1"
