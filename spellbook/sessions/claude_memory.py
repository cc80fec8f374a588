"""Claude Code's own memory as Spellbook memories: read, never written.

Two sources per project, both Claude Code's files:

* its auto-memory folder, ``~/.claude/projects/<project path, each non-alphanumeric a dash>/memory/``
  (``$CLAUDE_CONFIG_DIR/projects/...``): one markdown file a memory, with ``name``, ``description``
  and ``type`` in its frontmatter; ``MEMORY.md`` is only the index of the others and is skipped;
* the sections of the project's ``CLAUDE.md`` a person marks for Spellbook, each between
  ``<!-- spellbook -->`` and ``<!-- /spellbook -->``.

Each becomes one memory with the project as its ``context``, ``source: claude-code`` and the tag
``claude-memory``, under an id derived from the file (and section), so importing again revises the
same memory instead of adding one. ``sync`` runs at every Claude Code SessionStart and keeps them in
step: a changed file revises its memory, a removed one erases it (to the vault's trash). A state
file in the index folder (``claude-memory.json``: source -> id and content hash) spares the index
owner any call when nothing changed. The vault's copies follow Claude Code's files: edit those.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spellbook.errors import SpellbookError
from spellbook.files import atomic_write
from spellbook.vault.note import parse_note

STATE = "claude-memory.json"
MAX_FILE_BYTES = 200_000
_MARKED = re.compile(r"<!--\s*spellbook\s*-->(.*?)<!--\s*/spellbook\s*-->", re.DOTALL | re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Source:
    origin: str  # the file, with #<n> for a CLAUDE.md section
    title: str
    text: str

    @property
    def id(self) -> str:
        return "ccm-" + hashlib.sha1(self.origin.encode("utf-8")).hexdigest()[:16]

    @property
    def digest(self) -> str:
        return hashlib.sha1(f"{self.title}\n{self.text}".encode()).hexdigest()


def memory_folder(project_dir: Path, *, home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else (home or Path.home()) / ".claude"
    return base / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project_dir)) / "memory"


def sources(project_dir: Path, *, home: Path | None = None, env: Mapping[str, str] | None = None) -> list[Source]:
    """What Claude Code remembers for the project at ``project_dir`` (its folder or git root)."""
    found: list[Source] = []
    folder = memory_folder(project_dir, home=home, env=env)
    for file in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        text = _read(file)
        if file.name == "MEMORY.md" or text is None:
            continue
        parsed = parse_note(text)
        meta = parsed.meta if isinstance(parsed.meta, dict) else {}
        body = parsed.body.strip()
        if meta.get("description"):
            body = f"{meta['description']}\n\n{body}".strip()
        if body:
            found.append(Source(str(file), str(meta.get("name") or file.stem)[:200], body))
    claude_md = project_dir / "CLAUDE.md"
    text = _read(claude_md) if claude_md.is_file() else None
    for n, match in enumerate(_MARKED.finditer(text or ""), 1):
        body = match.group(1).strip()
        heading = _HEADING.search(body)
        if body:
            found.append(Source(f"{claude_md}#{n}", heading.group(1) if heading else f"CLAUDE.md, section {n}", body))
    return found


def _read(file: Path) -> str | None:
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            return None
        return file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def sync(
    hub: Any,
    project: str,
    project_dirs: list[Path],
    index_dir: Path,
    *,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Bring ``project``'s imported memories in step with Claude Code's files (for each of
    ``project_dirs``: the session's folder and its git root); returns the counts."""
    state_file = index_dir / STATE
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    mine = {origin: entry for origin, entry in state.items() if entry.get("project") == project}
    current = {s.origin: s for folder in dict.fromkeys(project_dirs) for s in sources(folder, home=home, env=env)}
    done = {"created": 0, "updated": 0, "erased": 0, "unchanged": 0}
    for origin, source in current.items():
        if mine.get(origin, {}).get("digest") == source.digest:
            done["unchanged"] += 1
            continue
        done[_upsert(hub, project, source)] += 1
        state[origin] = {"project": project, "id": source.id, "digest": source.digest}
    for origin in set(mine) - set(current):
        try:
            hub.call("erase", {"id": mine[origin]["id"], "context": project})
            done["erased"] += 1
        except SpellbookError:  # already gone (erased by hand): nothing to undo
            pass
        del state[origin]
    if done["created"] or done["updated"] or done["erased"]:
        atomic_write(state_file, json.dumps(state, indent=1, ensure_ascii=False) + "\n")
    return done


def _upsert(hub: Any, project: str, source: Source) -> str:
    fields = {
        "title": source.title,
        "context": project,
        "source": "claude-code",
        "tags": ["claude-memory"],
        "category": "claude-memory",
        "topic": project,
    }
    try:
        existing = hub.call("get_memories", {"ids": [source.id], "context": project})["memories"]
    except SpellbookError:  # not there yet
        existing = []
    if not existing:
        hub.call("scribe", {"text": source.text, "_id": source.id, **fields})
        return "created"
    if existing[0]["text"].strip() == source.text and existing[0]["title"] == source.title:
        return "unchanged"
    hub.call(
        "revise",
        {
            "id": source.id,
            "text": source.text,
            "title": source.title,
            "version": existing[0]["version"],
            "context": project,
        },
    )
    return "updated"
