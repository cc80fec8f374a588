"""The same engine against a real `chroma run` server on 127.0.0.1, started and stopped here."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.errors import IndexUnavailableError
from tests.helpers.engine import CountingEmbedder

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    port = free_port()
    data = tmp_path_factory.mktemp("chroma")
    chroma = str(Path(sys.executable).with_name("chroma"))
    proc = subprocess.Popen(
        [chroma, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                break
        except httpx2.HTTPError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma run did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(data, ignore_errors=True)


def test_engine_on_a_chroma_server(tmp_path: Path, chroma_url: str) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "hand.md").write_text("# Hand\n\nOrchids need indirect light.\n")
    settings = Settings(vault=vault, embedder="hashing", watch=False, chroma_url=chroma_url)
    embedder = CountingEmbedder()
    engine = Engine(settings, embedder=embedder)
    engine.start()
    try:
        out = engine.scribe("Basil likes full sun.", title="Basil", category="garden")
        assert engine.memorize("basil sun")["results"][0]["id"] == out["id"]
        assert engine.memorize("orchids light")["results"][0]["path"] == "hand.md"
        engine.revise(out["id"], text="Basil likes full sun and daily water.")
        assert "daily water" in engine.memorize("basil water")["results"][0]["snippet"]
        engine.erase(out["id"])
        assert all(h["id"] != out["id"] for h in engine.memorize("basil", limit=10)["results"])
        assert engine.check()["consistent"]
    finally:
        engine.close()
    # a second vault on the same server gets its own collection
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nOrchids again.\n")
    second = Engine(
        Settings(vault=other, embedder="hashing", watch=False, chroma_url=chroma_url), embedder=CountingEmbedder()
    )
    second.start()
    try:
        assert [h["path"] for h in second.memorize("orchids", limit=10)["results"]] == ["x.md"]
    finally:
        second.close()
    # restart: nothing re-embedded, the index still answers
    embedder = CountingEmbedder()
    engine = Engine(settings, embedder=embedder)
    engine.start()
    try:
        assert embedder.embedded == [] and engine.memorize("orchids")["results"][0]["path"] == "hand.md"
    finally:
        engine.close()


def test_unreachable_server_says_what_to_do(tmp_path: Path) -> None:
    settings = Settings(vault=tmp_path, embedder="hashing", chroma_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(IndexUnavailableError, match="chroma run"):
        Engine(settings, embedder=CountingEmbedder())
