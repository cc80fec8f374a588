"""`uv tool install` / `pipx install` install Spellbook's wheel: it must carry every data file the
program reads (the vault template, the embedder's files, the web view's static files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installed_alone_inits_a_vault_and_searches(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("spellbook_memory-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The wheel's copy first (its dependencies come from this environment), run outside the source tree.
    env = {**os.environ, "PYTHONPATH": str(site), "SPELLBOOK_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SPELLBOOK_EMBEDDER", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spellbook", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    where = subprocess.run(
        [sys.executable, "-c", "import spellbook; print(spellbook.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(site))
    assert run("--help").returncode == 0
    vault = tmp_path / "vault"
    assert run("init", str(vault)).returncode == 0
    assert (vault / "system" / "guide" / "How to chunk memories.md").is_file() and (vault / "Welcome.md").is_file()
    found = run("search", "how to chunk memories", "--vault", str(vault), "--limit", "1")  # the default embedder
    assert found.returncode == 0 and "How to chunk memories" in found.stdout, found.stderr
    assert (site / "spellbook" / "embedders" / "data" / "minilm-tokenizer.json").is_file()
    assert (site / "spellbook" / "server" / "web" / "static" / "style.css").is_file()
