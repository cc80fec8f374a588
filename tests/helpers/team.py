"""A team of vaults over git: a bare repository as the remote (a path), and clones of it, each a
machine with its own git identity (tests of docs/sync.md)."""

from __future__ import annotations

import re
from pathlib import Path

from spellbook.config import Settings
from tests.helpers.git import git

MARKERS = re.compile(r"^(<<<<<<<|>>>>>>>|=======$)", re.MULTILINE)


def make_remote(tmp: Path) -> Path:
    """A bare repository whose ``main`` holds one first commit."""
    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp / "seed"
    git(tmp, "clone", "-q", str(remote), str(seed))
    (seed / "README.md").write_text("# Team vault\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "start")
    git(seed, "push", "-q", "origin", "HEAD:main")
    return remote


def clone(tmp: Path, remote: Path, name: str) -> Path:
    """A machine's vault: a clone of ``remote`` whose commits are authored by ``name``."""
    vault = tmp / name
    git(tmp, "clone", "-q", str(remote), str(vault))
    git(vault, "config", "user.name", name)
    git(vault, "config", "user.email", f"{name}@example.com")
    return vault


def machine_settings(vault: Path, **more: object) -> Settings:
    return Settings(**{"vault": vault, "embedder": "hashing", "watch": False, **more})


def notes_in(vault: Path) -> dict[str, str]:
    """path -> text of every note outside dot-folders."""
    return {
        p.relative_to(vault).as_posix(): p.read_text()
        for p in vault.rglob("*.md")
        if not any(part.startswith(".") for part in p.relative_to(vault).parts)
    }


def ids_in(vault: Path, trash: bool = False) -> set[str]:
    files = (vault / ".trash").rglob("*.md") if trash else (vault / p for p in notes_in(vault))
    found = set()
    for file in files:
        m = re.search(r"^id: '?([0-9a-f]{16})'?$", file.read_text(), re.MULTILINE)
        if m:
            found.add(m.group(1))
    return found


def remote_heads(remote: Path) -> str:
    return git(remote, "rev-parse", "main").strip()
