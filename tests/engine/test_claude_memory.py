"""Claude Code's memory files (auto-memory, marked CLAUDE.md sections) as Spellbook memories, kept in
step through the hub, and never written to. Real files, a real vault and index."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.server.hub import Hub
from spellbook.sessions.claude_memory import memory_folder, sources, sync
from tests.helpers.processes import SPELLBOOK, child_env

MEMORY = """---
name: payment-pool
description: The payment client must reuse one pooled session
metadata:
  type: project
---
Opening a TLS connection per request made checkout time out; keep the pooled session.
"""
CLAUDE_MD = """# Shop

Build with `make`.

<!-- spellbook -->
## Deploy
Staging deploys from the release branch; billing listens on 8443.
<!-- /spellbook -->

Not for Spellbook.
"""


@pytest.fixture
def hub(settings: Settings):
    """The index owner, in this process, as a hook opens it."""
    owner = Hub(settings, watch=False, warm_up=False, client="test")
    try:
        owner.start(background=False)
        yield owner
    finally:
        owner.close()


def layout(tmp_path: Path) -> tuple[Path, Path, dict]:
    home, project = tmp_path / "home", tmp_path / "src" / "shop"
    project.mkdir(parents=True)
    folder = memory_folder(project, home=home, env={})
    folder.mkdir(parents=True)
    (folder / "payment_pool.md").write_text(MEMORY)
    (folder / "MEMORY.md").write_text("- [payment-pool](payment_pool.md)\n")
    (project / "CLAUDE.md").write_text(CLAUDE_MD)
    return home, project, {}


def test_sources_read_the_memory_folder_and_only_the_marked_sections(tmp_path: Path) -> None:
    home, project, env = layout(tmp_path)
    # Claude Code's own name for the project's folder (seen in its transcripts' folder): every / _ . a dash
    assert memory_folder(project, home=home, env=env).parent.name == re.sub(r"[/_.]", "-", str(project))
    found = sources(project, home=home, env=env)
    assert [s.title for s in found] == ["payment-pool", "Deploy"]
    assert found[0].text.startswith("The payment client must reuse one pooled session\n\nOpening a TLS")
    assert "8443" in found[1].text and "Not for Spellbook" not in found[1].text and "make" not in found[1].text


def test_sync_imports_updates_and_erases_and_never_writes_claudes_files(
    hub, settings: Settings, tmp_path: Path
) -> None:
    home, project, env = layout(tmp_path)
    folder = memory_folder(project, home=home, env=env)
    before = {p: p.read_bytes() for p in [*folder.iterdir(), project / "CLAUDE.md"]}

    first = sync(hub, "shop", [project], settings.index_path, home=home, env=env)
    assert (first["created"], first["updated"], first["erased"]) == (2, 0, 0)
    found = hub.call("memorize", {"query": "pooled payment session checkout", "context": "shop", "mode": "keyword"})
    hit = found["results"][0]
    assert hit["title"] == "payment-pool"
    note = hub.call("get_memories", {"ids": [hit["id"]], "context": "shop"})["memories"][0]
    assert note["metadata"]["context"] == "shop" and "claude-memory" in note["metadata"]["tags"]
    assert sync(hub, "shop", [project], settings.index_path, home=home, env=env)["unchanged"] == 2

    (folder / "payment_pool.md").write_text(MEMORY.replace("keep the pooled session", "keep 4 pooled sessions"))
    (project / "CLAUDE.md").write_text(CLAUDE_MD.replace("<!-- spellbook -->", "").replace("<!-- /spellbook -->", ""))
    third = sync(hub, "shop", [project], settings.index_path, home=home, env=env)
    assert (third["updated"], third["erased"]) == (1, 1)
    note = hub.call("get_memories", {"ids": [hit["id"]], "context": "shop"})["memories"][0]
    assert "keep 4 pooled sessions" in note["text"]
    assert not hub.call("memorize", {"query": "billing 8443", "context": "shop", "mode": "keyword"})["results"]
    after = {p: p.read_bytes() for p in before}
    assert after[folder / "MEMORY.md"] == before[folder / "MEMORY.md"]  # read only, never rewritten


def test_the_sessionstart_hook_imports_them(tmp_path: Path) -> None:
    home, project, _ = layout(tmp_path)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    vault = tmp_path / "vault"
    env = child_env(HOME=str(home), SPELLBOOK_EMBEDDER="hashing")
    env.pop("CLAUDE_CONFIG_DIR", None)
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    payload = json.dumps({"session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart"})
    done = subprocess.run(
        [SPELLBOOK, "hook", "SessionStart", "--vault", str(vault)],
        input=payload,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "claude-memory (2: shop)" in done.stdout  # imported before the context was put together
    imported = [p for p in vault.rglob("*.md") if "claude-memory" in p.read_text()]
    assert len(imported) == 2 and all("context: shop" in p.read_text() for p in imported)
