"""The spellbook command, as a person runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.helpers.processes import SPELLBOOK, child_env, run

pytestmark = pytest.mark.slow


def test_init_index_search_stats(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    run("init", str(vault))
    assert (vault / "Welcome.md").exists() and (vault / ".gitignore").read_text().count(".spellbook") == 1
    assert list((vault / "system").rglob("*.md"))
    for n in range(30):
        (vault / "journal").mkdir(exist_ok=True)
        (vault / "journal" / f"Day {n}.md").write_text(
            f"# Day {n}\n\n## Weather\n\nDay {n} was sunny.\n\n## Food\n\nAte dish number {n}.\n"
        )
    (vault / "journal" / "Day 7.md").write_text("# Day 7\n\n## Trip\n\nWe hiked up Mount Hallasan on Jeju.\n")
    common = ["--vault", str(vault), "--embedder", "hashing"]
    indexed = run("index", *common)
    assert "indexing: 100%" in indexed.stderr and "34/34" in indexed.stderr  # progress shown (tqdm)
    assert "34 notes" in indexed.stderr  # then a summary
    again = run("index", *common)
    assert "34 notes" in again.stderr
    found = run("search", *common, "Hallasan hike", "--mode", "keyword")
    assert found.stdout.startswith("1. [") and "journal/Day 7.md › Day 7 > Trip" in found.stdout
    as_json = json.loads(run("search", *common, "Hallasan", "--json").stdout)
    assert as_json["results"][0]["path"] == "journal/Day 7.md"
    stats = json.loads(run("stats", *common, "--json").stdout)
    assert stats["notes"] == 34 and stats["embedder"] == "hashing-v1"
    rebuilt = run("index", *common, "--rebuild")
    assert "34 notes" in rebuilt.stderr


def test_cli_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    missing = run("search", "--vault", str(tmp_path / "nope"), "x", check=False)
    assert missing.returncode == 1 and "spellbook init" in missing.stderr and "Traceback" not in missing.stderr
    vault = tmp_path / "v"
    run("init", str(vault))
    empty = run("search", "--vault", str(vault), "--embedder", "hashing", "  ", check=False)
    assert empty.returncode == 1 and "query is empty" in empty.stderr


def test_cli_forwards_to_a_running_server_instead_of_opening_the_index(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    params = StdioServerParameters(
        command=SPELLBOOK, args=["serve", "--vault", str(vault), "--embedder", "hashing"], env=child_env()
    )

    async def main() -> None:
        async with Client(params) as client:
            stored = await client.call_tool("scribe", {"text": "Sourdough needs a 12 hour rise.", "title": "Bread"})
            owner = (await client.call_tool("stats", {})).structured_content["owner_pid"]
            out = await anyio.to_thread.run_sync(
                lambda: run("search", "--vault", str(vault), "--embedder", "hashing", "sourdough", "--json")
            )
            result = json.loads(out.stdout)
            assert result["results"][0]["id"] == stored.structured_content["id"]
            stats = await anyio.to_thread.run_sync(lambda: run("stats", "--vault", str(vault), "--json"))
            assert json.loads(stats.stdout)["owner_pid"] == owner  # answered by the server process

    anyio.run(main)


def test_doctor_finds_drift_and_repairs_it(tmp_path: Path) -> None:
    from spellbook.config import Settings
    from spellbook.embedders.hashing import HashingEmbedder
    from spellbook.engine import Engine

    vault = tmp_path / "vault"
    run("init", str(vault))
    common = ["--vault", str(vault), "--embedder", "hashing"]
    run("index", *common)
    healthy = run("doctor", *common)
    assert healthy.stdout.startswith("index == vault")
    # Made while no server runs: an edit, a delete, a new file (pending: the next start indexes
    # them), and a vector lost behind the catalog's back (drift: doctor fails).
    (vault / "Welcome.md").write_text("# Welcome\n\nRewritten by hand.\n")
    gone = next(vault.joinpath("system").rglob("*.md"))
    gone.unlink()
    (vault / "New.md").write_text("# New\n\nA new note.\n")
    engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
    untouched = sorted(set(engine.catalog.files()) - {"Welcome.md", gone.relative_to(vault).as_posix()})
    some_chunk = next(ids[0] for ids in map(engine.catalog.chunk_ids, untouched) if ids)
    engine.vectors.delete([some_chunk])
    engine.close()
    sick = run("doctor", *common, "--json", check=False)
    assert sick.returncode == 1
    report = json.loads(sick.stdout)
    assert report["counts"] == {
        "not_indexed": 1,
        "deleted_but_indexed": 1,
        "changed": 1,
        "changed_unseen": 0,
        "vectors_missing": 1,
        "vectors_lost": 1,
        "orphan_vectors": 0,
        "ids_read_as_numbers": 0,
    }
    assert report["not_indexed"] == ["New.md"] and report["changed_since_indexed"] == ["Welcome.md"]
    assert report["drift"] and not report["consistent"]
    repaired = run("doctor", *common, "--repair")
    assert repaired.stdout.startswith("index == vault")
    assert run("doctor", *common).returncode == 0


def test_doctor_quotes_the_ids_yaml_1_2_reads_as_numbers(tmp_path: Path) -> None:
    """An older Spellbook wrote ``id: 123e4567`` unquoted: Obsidian (YAML 1.2) reads Infinity there.
    doctor names such notes; --repair quotes the value, nothing else, and the memory keeps its id."""
    vault = tmp_path / "vault"
    run("init", str(vault))
    common = ["--vault", str(vault), "--embedder", "hashing"]
    old = "---\nid: 123e4567\ntitle: Kettle   # as written\nmerged_into: 9e12\n---\nDescale with citric acid.\n"
    (vault / "Kettle.md").write_text(old)
    (vault / "Quoted.md").write_text("---\nid: '456e789'\ntitle: Quoted\n---\nAlready quoted.\n")
    run("index", *common)
    found = run("doctor", *common, "--json", check=False)
    report = json.loads(found.stdout)
    assert report["ids_read_as_numbers"] == ["Kettle.md"] and report["counts"]["ids_read_as_numbers"] == 1
    assert found.returncode == 0  # a warning: the index is fine
    text = run("doctor", *common).stdout
    assert "WARN  ids: 1 notes write their id unquoted" in text and "spellbook doctor --repair" in text
    repaired = run("doctor", *common, "--repair")
    assert "quoted the id of 1 notes" in repaired.stdout and repaired.stdout.startswith("index == vault")
    assert (vault / "Kettle.md").read_text() == old.replace("123e4567", "'123e4567'").replace("9e12", "'9e12'")
    again = json.loads(run("doctor", *common, "--json").stdout)
    assert again["counts"]["ids_read_as_numbers"] == 0 and again["consistent"]
    hits = json.loads(run("search", *common, "descale citric acid", "--json").stdout)["results"]
    assert hits[0]["path"] == "Kettle.md" and hits[0]["id"] == "123e4567"


def test_install_and_uninstall_a_client(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text('{"mcpServers": {"other": {"command": "x"}}}\n')
    env = child_env(HOME=str(tmp_path))

    def cli(*args):
        return subprocess.run(
            [SPELLBOOK, *args], capture_output=True, text=True, env=env, cwd=project, timeout=60, check=False
        )

    first = cli("install", "claude-code", "--scope", "project", "--vault", "notes")
    assert first.returncode == 0, first.stderr
    config = json.loads((project / ".mcp.json").read_text())
    assert config["mcpServers"]["other"] == {"command": "x"}
    assert config["mcpServers"]["spellbook"] == {
        "command": SPELLBOOK,
        "args": ["serve", "--vault", str(project / "notes")],
    }
    assert "already configured" in cli("install", "claude-code", "--scope", "project", "--vault", "notes").stdout
    assert cli("uninstall", "claude-code", "--scope", "project").returncode == 0
    assert json.loads((project / ".mcp.json").read_text()) == {"mcpServers": {"other": {"command": "x"}}}


def test_merge_from_the_shell(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "Tea.md").write_text("---\nid: tea-1\ntags: [tea]\n---\nGreen tea, 3 minutes.\n")
    (vault / "Tea again.md").write_text("---\nid: tea-2\ntags: [green]\n---\nGreen tea, three minutes.\n")
    (vault / "Index.md").write_text("See [[Tea again]].\n")
    common = ["--vault", str(vault), "--embedder", "hashing"]
    alone = run("merge", *common, "tea-1", check=False)
    assert alone.returncode == 1 and "at least 2 ids" in alone.stderr and "Traceback" not in alone.stderr
    done = run("merge", *common, "tea-1", "tea-2")
    assert "merged Tea again.md -> Tea.md (moved to .trash/Tea again.md)" in done.stdout
    assert "relinked Index.md (1 links)" in done.stdout
    assert (vault / "Index.md").read_text() == "See [[Tea]].\n"
    assert (vault / "Tea.md").read_text().startswith("---\nid: tea-1\ntags:\n  - tea\n  - green\n")
    again = run("merge", *common, "tea-1", "tea-2", check=False)
    assert again.returncode == 1 and "No memory with id 'tea-2'" in again.stderr


def test_an_import_leaves_without_the_teardown_and_loses_nothing(tmp_path: Path) -> None:
    """``spellbook import``/``index`` close everything they opened, then leave at once (no final
    garbage collection, no atexit: 0.25-0.35 s after a 1,000-note import); what they wrote is whole,
    and the exit code is the command's."""
    hooks = tmp_path / "site"
    hooks.mkdir()
    marker = tmp_path / "teardown.txt"
    (hooks / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'a').write(' '.join(sys.argv[1:2]) + '\\n'))\n"
    )
    env = child_env(PYTHONPATH=str(hooks))
    vault = tmp_path / "vault"
    vault.mkdir()
    export = tmp_path / "export.json"
    memories = [
        {
            "id": f"m{n}",
            "path": f"imp/Note {n}.md",
            "title": f"Note {n}",
            "metadata": {"id": f"m{n}"},
            "body": f"Imported body number {n}.",
        }
        for n in range(40)
    ]
    memories.append({"id": "bad", "path": "../outside.md", "title": "x", "metadata": {}, "body": "x"})
    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories[:40]}), encoding="utf-8")
    common = ["--vault", str(vault), "--embedder", "hashing"]
    done = subprocess.run(
        [SPELLBOOK, "import", *common, str(export)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "40 created" in done.stdout, done.stderr[-500:]
    stats = subprocess.run(
        [SPELLBOOK, "stats", *common, "--json"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert json.loads(stats.stdout)["notes"] == 40 and json.loads(stats.stdout)["vectors"] == 40
    doctor = subprocess.run(
        [SPELLBOOK, "doctor", *common], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert doctor.returncode == 0, doctor.stdout[-800:]
    assert marker.read_text().split() == ["stats", "doctor"]  # the import's teardown never ran

    export.write_text(json.dumps({"spellbook_export": 1, "memories": memories}), encoding="utf-8")
    refused = subprocess.run(
        [SPELLBOOK, "import", *common, str(export)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert refused.returncode == 1 and "outside" in refused.stderr  # an error is still reported and exits 1
