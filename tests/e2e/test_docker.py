"""The compose file is valid (Debian's docker-compose; no engine here to build or run images)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from spellbook.cli.main import _parser

ROOT = Path(__file__).resolve().parents[2]
needs_compose = pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")


def compose(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker-compose", "config"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )


@needs_compose
def test_compose_config_is_valid_and_needs_a_token() -> None:
    ok = compose({"SPELLBOOK_TOKEN": "t0ken"})
    assert ok.returncode == 0, ok.stderr
    config = yaml.safe_load(ok.stdout)
    spellbook = config["services"]["spellbook"]
    assert spellbook["environment"]["SPELLBOOK_TOKEN"] == "t0ken"
    assert any("127.0.0.1" in str(p) and "8765" in str(p) for p in spellbook["ports"])  # loopback only
    assert [str(v).split(":")[1] for v in spellbook["volumes"]] == ["/vault"]  # the vault is a volume
    missing = compose({})
    assert missing.returncode != 0 and "SPELLBOOK_TOKEN" in missing.stderr


def test_dockerfile_command_matches_the_cli() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    args = yaml.safe_load(cmd[len("CMD") :])[1:]
    parsed = _parser().parse_args(args)
    assert parsed.command == "serve" and parsed.http and parsed.host == "0.0.0.0" and parsed.port == 8765
