"""SPELLBOOK_PLAIN_START (spellbook/startup/switch.py): with it on, no start-up trick runs, and it is
on by itself when a package the tricks were written against is installed at another version.

Each case is a real ``spellbook serve`` (or a fresh interpreter) beside the same one with the
tricks on, so each check can tell the two apart: the libraries the server maps (the SDK's crypto
package, chromadb's gRPC exporter), the handshake cache the front keeps, OpenBLAS's thread count, the heap's pools."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from spellbook.startup import switch
from tests.helpers.processes import ROOT, child_env
from tests.helpers.stdio import Wire

pytestmark = pytest.mark.slow

INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "plain-test", "version": "1"}}
SITE = Path(sysconfig.get_paths()["purelib"])


def serve_once(tmp_path: Path, name: str, **env: str) -> dict:
    """A stdio server's handshake, tool list and a write; what it mapped once Chroma was open, its
    log, and the handshake cache files it left."""
    cache = tmp_path / f"{name}-cache"
    log = tmp_path / f"{name}.log"
    wire = Wire(tmp_path / f"{name}-vault", cache, log, **env)
    try:
        wire.request(1, "initialize", INITIALIZE)
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert len(wire.request(2, "tools/list")["result"]["tools"]) > 20
        scribed = wire.request(
            3, "tools/call", {"name": "scribe", "arguments": {"text": "The boiler is serviced in May."}}
        )
        assert not scribed["result"]["isError"], scribed
        found = wire.request(4, "tools/call", {"name": "memorize", "arguments": {"query": "boiler service"}})
        assert found["result"]["structuredContent"]["results"], found
        maps = Path(f"/proc/{wire.proc.pid}/maps")
        deadline = time.monotonic() + 20
        while "chromadb_rust_bindings" not in maps.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # the vector writer opens Chroma behind the write
        mapped = maps.read_text()
        assert "chromadb_rust_bindings" in mapped
    finally:
        assert wire.close() == 0
    return {"mapped": mapped, "log": log.read_text(), "cached": sorted(p.name for p in cache.glob("mcp-front-*"))}


def test_a_plain_stdio_server_runs_none_of_the_tricks(tmp_path: Path) -> None:
    tricks = serve_once(tmp_path, "tricks", SPELLBOOK_PLAIN_START="")
    assert "start-up tricks off" not in tricks["log"]
    assert "cryptography" not in tricks["mapped"]  # deferred: the SDK's crypto package never loaded
    assert "cygrpc" not in tricks["mapped"]  # chroma_local: no chromadb package, nor the gRPC it imports
    assert len(tricks["cached"]) == 1  # front: the handshake kept for the next start

    plain = serve_once(tmp_path, "plain", SPELLBOOK_PLAIN_START="1")
    assert "start-up tricks off (SPELLBOOK_PLAIN_START=1)" in plain["log"]
    assert "cryptography" in plain["mapped"]  # the SDK imported as it comes
    assert "cygrpc" in plain["mapped"]  # chromadb's own client, imported as it comes
    assert plain["cached"] == []  # the SDK did its own handshake, on its own transport


PROBE = """
import json, os
from spellbook import startup
from spellbook.startup import heap
startup.begin(["index"])
print(json.dumps({"blas": os.environ.get("OPENBLAS_NUM_THREADS"), "heap": heap.limit_arenas(),
                  "plain": startup.plain()}))
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", {"blas": "1", "heap": True, "plain": False}),
        ("1", {"blas": None, "heap": False, "plain": True}),
        ("blas", {"blas": None, "heap": True, "plain": False}),
    ],
)
def test_a_commands_process_knobs_with_and_without_the_tricks(value: str, expected: dict) -> None:
    env = child_env(SPELLBOOK_PLAIN_START=value)
    env.pop("OPENBLAS_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == expected


def fake_upgrade(tmp_path: Path, version: str) -> Path:
    """A folder that, put first on ``PYTHONPATH``, makes the installed chromadb look like
    ``version``: the real package (a link to it) beside a wheel's record of that version."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "chromadb").symlink_to(SITE / "chromadb", target_is_directory=True)
    record = folder / f"chromadb-{version}.dist-info"
    record.mkdir()
    (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: chromadb\nVersion: {version}\n", encoding="utf-8")
    return folder


def test_the_versions_are_read_where_python_imports_each_package_from(tmp_path: Path) -> None:
    assert switch.mismatched() == []  # this test run's own packages: the pinned versions
    upgraded = fake_upgrade(tmp_path, "1.6.0")
    assert switch.mismatched([str(upgraded), str(SITE)]) == ["chromadb 1.6.0 (tricks written for 1.5.9)"]
    assert switch.mismatched([str(SITE), str(upgraded)]) == []  # the first folder holding it wins
    (tmp_path / "here" / "chromadb").mkdir(parents=True)  # a folder of that name, not a package: Python passes it
    assert switch.mismatched([str(tmp_path / "here"), str(SITE)]) == []
    assert switch.mismatched([str(tmp_path / "empty")]) == [
        f"{name} not found (tricks written for {version})" for name, _, version in switch.WRITTEN_AGAINST
    ]


def test_an_upgraded_package_turns_the_tricks_off_by_itself(tmp_path: Path) -> None:
    upgraded = fake_upgrade(tmp_path, "1.6.0")
    plain = serve_once(tmp_path, "upgraded", SPELLBOOK_PLAIN_START="", PYTHONPATH=str(upgraded))
    assert "start-up tricks off (installed chromadb 1.6.0 (tricks written for 1.5.9))" in plain["log"]
    assert "cryptography" in plain["mapped"] and "cygrpc" in plain["mapped"] and plain["cached"] == []


def test_the_versions_the_tricks_were_written_for_are_the_pinned_ones() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', pyproject))
    for _, distribution, version in switch.WRITTEN_AGAINST:
        assert pins.get(distribution.replace("_", "-")) == version, (distribution, pins)


@pytest.mark.parametrize(
    ("value", "off"),
    [
        ("", set()),
        ("0", set()),
        ("false", set()),
        ("1", set(switch.TRICKS)),
        ("yes", set(switch.TRICKS)),
        ("front, heap", {"front", "heap"}),
        ("front,bogus", set(switch.TRICKS)),  # a word that names no trick: all off, never none
    ],
)
def test_the_switchs_values(value: str, off: set[str]) -> None:
    assert set(switch._decide(value)[0]) == off
