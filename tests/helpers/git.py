"""Real git in a temporary vault: a command runner with a fixed identity, HEAD's subject, committed files."""

from __future__ import annotations

import subprocess
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "Person",
    "GIT_AUTHOR_EMAIL": "p@x",
    "GIT_COMMITTER_NAME": "Person",
    "GIT_COMMITTER_EMAIL": "p@x",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**ENV, "HOME": str(cwd)}, check=True, capture_output=True, text=True
    ).stdout


def head(vault: Path, fmt: str = "%s") -> str:
    return git(vault, "log", "-1", f"--format={fmt}").strip()


def committed_files(vault: Path, rev: str = "HEAD") -> list[str]:
    return git(vault, "show", "--name-only", "--format=", rev).splitlines()
