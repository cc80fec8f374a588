"""Write a session's notes into the vault through the index owner (``Hub.call``), idempotently.

The notes of a session are found again by its id (``filter={"session": id, "type": "session"}``)
and their part number (the title's ``(part N)`` suffix): a part that exists is revised when its
text changed, a new one is scribed. A lock file per session keeps two captures of one session
(Stop, then SessionEnd a moment later) from both scribing it.

Captured sessions are private to their owner: the first capture makes the vault's ``sessions``
folder 0700, and the store gives what is made in it the same privacy (folders 0700, notes 0600).
A ``sessions`` folder that exists keeps its mode (a person's folder is never changed behind their
back); ``spellbook doctor`` warns when other users can read it (``open_to_others``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spellbook.files import private_folder
from spellbook.sessions.digest import Digest
from spellbook.sessions.notes import CATEGORY, SessionNote, part_of, render_session
from spellbook.sessions.transcript import Session


def capture(hub: Any, session: Session, lock_dir: Path, digested: Digest | None = None) -> dict[str, Any]:
    """Store ``session`` (headed by ``digested``, else its extractive digest); returns what was
    done: {"created": [...], "updated": [...], "unchanged": n}."""
    notes = render_session(session, digested=digested)
    done: dict[str, Any] = {"created": [], "updated": [], "unchanged": 0}
    if not notes:
        return done
    project = notes[0].fields["context"]
    with contextlib.suppress(FileExistsError):
        (hub.settings.vault_dir / CATEGORY).mkdir(mode=0o700)
    with _session_lock(lock_dir, session.session_id):
        existing = _existing_parts(hub, session.session_id, project)
        for note in notes:
            found = existing.get(note.part)
            if found is None:
                result = hub.call("scribe", {"text": note.body, "title": note.title, **note.fields})
                done["created"].append(result["path"])
                continue
            if found["text"].strip() == note.body.strip():  # the body says when the session ended, too
                done["unchanged"] += 1
                continue
            hub.call(
                "revise",
                {
                    "id": found["id"],
                    "text": note.body,
                    "version": found["version"],
                    "context": project,
                    **_revisable(note),
                },
            )
            done["updated"].append(found["path"])
    return done


def _existing_parts(hub: Any, session_id: str, project: str) -> dict[int, dict[str, Any]]:
    listed = hub.call(
        "list_memories", {"filter": {"session": session_id, "type": "session"}, "limit": 200, "context": project}
    )
    ids = [m["id"] for m in listed["memories"]]
    parts: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), 20):
        got = hub.call("get_memories", {"ids": ids[start : start + 20], "context": project})
        for memory in got["memories"]:
            parts.setdefault(part_of(memory["title"]), memory)
    return parts


def open_to_others(vault: Path) -> list[Path]:
    """The folders through which other users of the machine may read captured sessions: the
    ``sessions`` folder, and the vault's ``.git`` (it keeps a copy of every committed note), when
    they and the vault let others in. Empty before the first capture."""
    try:
        if not (vault / CATEGORY).is_dir() or not vault.stat().st_mode & 0o011:
            return []
        return [f for f in (vault / CATEGORY, vault / ".git") if f.is_dir() and f.stat().st_mode & 0o011]
    except OSError:
        return []


def _revisable(note: SessionNote) -> dict[str, Any]:
    """The fields revise may change on a captured note (its place, category/topic, stays)."""
    keep = ("ended", "started", "session", "type", "tags", "source")
    return {k: v for k, v in note.fields.items() if k in keep}


@contextlib.contextmanager
def _session_lock(lock_dir: Path, session_id: str) -> Iterator[None]:
    private_folder(lock_dir)
    name = hashlib.sha1(session_id.encode("utf-8")).hexdigest()[:16]
    fd = os.open(lock_dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.name == "posix":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
