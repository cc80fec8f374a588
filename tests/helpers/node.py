"""The Node tools some tests run: Node 22, the MCP conformance suite, Claude Code, Codex CLI, Gemini CLI.

``make test`` installs them first (``make node-deps``: ``tests/node/install.sh`` into the git-ignored
``.cache/node/``, pinned by ``tests/node/package-lock.json``). Run on their own, the tests install
them the same way when they are missing or stale; without npm that fails, loudly, saying how to fix it.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "tests" / "node" / "package-lock.json"
NODE_DIR = ROOT / ".cache" / "node"


def node_bin() -> Path:
    """``.cache/node/node_modules/.bin``, installed first if missing or older than the lock file."""
    stamp = NODE_DIR / ".installed"
    wanted = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if not stamp.is_file() or stamp.read_text().strip() != wanted:
        result = subprocess.run(
            ["bash", str(ROOT / "tests" / "node" / "install.sh"), str(NODE_DIR)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(
                "Could not install the Node test tools (`make node-deps`, tests/node/install.sh); "
                f"this test needs them.\n{result.stdout}{result.stderr}",
                pytrace=False,
            )
    return NODE_DIR / "node_modules" / ".bin"
