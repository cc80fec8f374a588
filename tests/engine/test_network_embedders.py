"""Network embedders (Ollama, OpenAI-compatible) against loopback servers answering with real
USE-m3 vectors: batching, retries, errors, and a server whose embedder is down, then back."""

from __future__ import annotations

import collections
import json
import socket
import struct
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import anyio
import numpy as np
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from spellbook.config import Settings
from spellbook.embedders import ollama as ollama_module
from spellbook.embedders import remote
from spellbook.embedders.registry import load_embedder
from spellbook.engine import Engine
from spellbook.errors import EmbedderError, EmbedderUnavailableError
from tests.helpers.processes import SPELLBOOK, child_env, tuned

pytestmark = pytest.mark.slow

KEY = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def use_m3():
    embedder = load_embedder(Settings(embedder="use-m3"))
    embedder.warm_up()
    return embedder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeEndpoint:
    """Ollama's POST /api/embed and OpenAI's POST /v1/embeddings on 127.0.0.1, answering with real
    USE-m3 vectors. ``script`` holds what the next requests get instead of an answer: an HTTP
    status, ``"reset"`` (the connection is cut) or ``"hang"`` (no answer for ``hang_seconds``)."""

    MODELS = ("nomic-embed-text", "text-embedding-3-small")

    def __init__(self, embedder, port: int = 0, api_key: str | None = KEY, hang_seconds: float = 3.0) -> None:
        self.requests: list[dict] = []
        self.script: collections.deque = collections.deque()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                outer.requests.append(
                    {
                        "path": self.path,
                        "texts": texts,
                        "auth": self.headers.get("Authorization"),
                        **{k: v for k, v in body.items() if k != "input"},
                    }
                )
                openai = self.path == "/v1/embeddings"
                if outer.script:
                    action = outer.script.popleft()
                    if action == "reset":
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.close_connection = True
                        self.connection.close()
                        return
                    if action == "hang":
                        time.sleep(outer.hang_seconds)
                        self.close_connection = True
                        return
                    return self.reply(action, {"error": {"message": "overloaded"}} if openai else {"error": "busy"})
                if self.path not in ("/api/embed", "/v1/embeddings"):
                    return self.reply(404, {"error": "not found"})
                if openai and outer.api_key and self.headers.get("Authorization") != f"Bearer {outer.api_key}":
                    given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    return self.reply(401, {"error": {"message": f"Incorrect API key provided: {given}"}})
                if any("TOO LONG" in t for t in texts):
                    message = "This model's maximum context length is 8192 tokens"
                    return self.reply(400, {"error": {"message": message}} if openai else {"error": message})
                if body["model"] not in outer.MODELS:
                    message = f"model '{body['model']}' not found"
                    return self.reply(404, {"error": {"message": message}} if openai else {"error": message})
                vectors = np.asarray(embedder.embed_documents(texts))
                if body.get("dimensions"):
                    vectors = vectors[:, : body["dimensions"]]
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                if openai:
                    data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
                    self.reply(200, {"object": "list", "data": data[::-1], "model": body["model"]})  # any order
                else:
                    self.reply(200, {"model": body["model"], "embeddings": vectors.tolist()})

            def reply(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.api_key = api_key
        self.hang_seconds = hang_seconds
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_settings(url: str, **extra) -> Settings:
    return Settings(embedder="openai", openai_url=f"{url}/v1", openai_api_key=KEY, **extra)


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# --- the embedders on their own --------------------------------------------------------------


def test_openai_embedder_batches_and_returns_the_models_vectors(use_m3) -> None:
    texts = [f"Note {n}: the deploy runs on Fridays at {n} pm." for n in range(7)]
    with FakeEndpoint(use_m3) as server:
        embedder = load_embedder(openai_settings(server.url, openai_batch_size=3))
        assert embedder.model_id == "openai/text-embedding-3-small"
        vectors = embedder.embed_documents(texts)
        assert [len(r["texts"]) for r in server.requests] == [3, 3, 1]  # batches of 3, in order
        assert all(r["path"] == "/v1/embeddings" and r["auth"] == f"Bearer {KEY}" for r in server.requests)
        expected = use_m3.embed_documents(texts)
        assert all(cosine(v, e) > 0.999 for v, e in zip(vectors, expected))  # answers put back in order
        assert embedder.dimensions == 512 and len(server.requests) == 3  # known from the answers

        short = load_embedder(openai_settings(server.url, openai_dimensions=64))
        assert short.model_id == "openai/text-embedding-3-small@64"  # another index identity: a rebuild
        assert len(short.embed_query("espresso")) == 64 and server.requests[-1]["dimensions"] == 64
    assert KEY not in repr(embedder) and KEY not in repr(openai_settings("http://x"))


def test_ollama_embedder_batches(use_m3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ollama_module, "BATCH_SIZE", 2)
    with FakeEndpoint(use_m3) as server:
        embedder = load_embedder(Settings(embedder="ollama", ollama_url=server.url))
        vectors = embedder.embed_documents(["a cat", "a dog", "a bird", "a fish", "a frog"])
        assert len(vectors) == 5 and [len(r["texts"]) for r in server.requests] == [2, 2, 1]
        assert all(r["path"] == "/api/embed" for r in server.requests)


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_retries_on_5xx_429_and_reset_connections(use_m3, provider: str) -> None:
    with FakeEndpoint(use_m3) as server:
        settings = (
            openai_settings(server.url) if provider == "openai" else Settings(embedder="ollama", ollama_url=server.url)
        )
        embedder = load_embedder(settings)
        server.script.extend([500, "reset", 429])
        started = time.monotonic()
        vector = embedder.embed_query("Where is the espresso machine?")
        assert len(server.requests) == 4 and len(vector) == 512  # three failures, then the answer
        assert time.monotonic() - started >= 0.25 + 0.5  # backed off (429's Retry-After: 0 waits nothing)
        server.script.extend([503] * 4)
        with pytest.raises(EmbedderUnavailableError, match="unreachable"):
            embedder.embed_query("x")  # 1 try + 3 retries, then give up
        assert len(server.requests) == 8


def test_refusals_are_not_retried_and_say_what_to_set(use_m3) -> None:
    with FakeEndpoint(use_m3) as server:
        wrong = load_embedder(Settings(embedder="openai", openai_url=f"{server.url}/v1", openai_api_key="sk-wrong-key"))
        with pytest.raises(EmbedderError, match="rejected the API key.*SPELLBOOK_OPENAI_API_KEY") as caught:
            wrong.embed_query("x")
        assert len(server.requests) == 1 and not isinstance(caught.value, EmbedderUnavailableError)
        assert "sk-wrong-key" not in str(caught.value)  # echoed back by the server, scrubbed
        unset = load_embedder(Settings(embedder="openai", openai_url=f"{server.url}/v1"))
        with pytest.raises(EmbedderError, match="it is not set"):
            unset.embed_query("x")
        unknown = load_embedder(openai_settings(server.url, openai_model="text-embedding-9"))
        with pytest.raises(EmbedderError, match="SPELLBOOK_OPENAI_MODEL"):
            unknown.embed_query("x")
        bad_url = load_embedder(Settings(embedder="openai", openai_url=server.url, openai_api_key=KEY))  # no /v1
        with pytest.raises(EmbedderError, match="/v1"):
            bad_url.embed_query("x")
        ollama = load_embedder(Settings(embedder="ollama", ollama_url=server.url, ollama_model="bge-m3"))
        with pytest.raises(EmbedderError, match="ollama pull bge-m3"):
            ollama.embed_query("x")
        assert len(server.requests) == 5  # one each: nothing retried


def test_timeouts_retry_then_the_breaker_skips_the_endpoint(use_m3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("TIMEOUT_SECONDS", 0.3), ("RETRIES", 1), ("RETRY_SECONDS", 1.0)):
        monkeypatch.setattr(remote, name, value)
    with FakeEndpoint(use_m3, hang_seconds=1.5) as server:
        embedder = load_embedder(openai_settings(server.url))
        server.script.extend(["hang", "hang"])
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailableError, match=r"no answer within 0.3 s.*SPELLBOOK_OPENAI_URL"):
            embedder.embed_query("x")
        assert len(server.requests) == 2 and time.monotonic() - started < 1.5
        assert embedder.health()["reachable"] is False
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailableError):
            embedder.embed_documents(["y"])  # breaker open: fails at once, asks nobody
        assert len(server.requests) == 2 and time.monotonic() - started < 0.1
        time.sleep(1.1)
        assert len(embedder.embed_query("z")) == 512  # after the cooldown: tried again, and it answers
        assert embedder.health()["reachable"] is True


def test_a_down_endpoint_does_not_stop_the_server_from_loading(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    settings = Settings(vault=vault, embedder="ollama", ollama_url=f"http://127.0.0.1:{free_port()}", watch=False)
    engine = Engine(settings)
    try:
        engine.embedder.warm_up()  # logs, does not raise
        engine.start()
        assert engine.stats()["embedder_status"]["reachable"] is False
    finally:
        engine.close()


# --- the engine with its endpoint down, then back ---------------------------------------------


def test_writes_land_while_the_endpoint_is_down_and_get_vectors_when_it_is_back(
    tmp_path: Path, use_m3, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "RETRY_SECONDS", 0.5)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Cat.md").write_text("# Cat\n\nOur cat sleeps on the sunny windowsill all afternoon.\n")
    port = free_port()
    settings = openai_settings(f"http://127.0.0.1:{port}", vault=vault, watch=False)
    engine = Engine(settings)
    try:
        report = engine.start()  # the endpoint is down: indexed for keywords only
        assert report.vectors_missing == 1 and "unreachable" in report.embedder_error
        stored = engine.scribe("The espresso machine needs descaling every month.", title="Espresso")
        assert (vault / stored["path"]).is_file()
        assert "not embedded yet" in stored["note"] and "SPELLBOOK_OPENAI_URL" in stored["note"]
        hybrid = engine.memorize("espresso descaling")
        assert hybrid["results"][0]["id"] == stored["id"] and "similarity" not in hybrid["results"][0]
        assert "ranked by keywords alone" in hybrid["note"]
        semantic = engine.memorize("espresso machine", mode="semantic")  # falls back too, and says so
        assert semantic["results"][0]["id"] == stored["id"] and "unreachable" in semantic["note"]
        assert engine.stats()["vectors_missing"] == 2 and engine.check()["counts"]["vectors_missing"] == 2
        revised = engine.revise(stored["id"], text="The espresso machine needs descaling every two months.")
        assert "not embedded yet" in revised["note"]
        assert "no vectors yet" in engine.related(stored["id"])["note"]
    finally:
        engine.close()

    with FakeEndpoint(use_m3, port=port):
        engine = Engine(settings)  # a restart: what is missing is found again, and filled
        try:
            report = engine.start()
            assert report.vectors_missing == 0 and engine.stats()["vectors_missing"] == 0
            assert engine.check()["consistent"]
            hits = engine.memorize("coffee maker maintenance", mode="semantic")
            assert "note" not in hits and hits["results"][0]["id"] == stored["id"]
            assert "similarity" in hits["results"][0]  # ranked by meaning again
        finally:
            engine.close()


def test_missing_vectors_are_filled_while_running(tmp_path: Path, use_m3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "RETRY_SECONDS", 0.3)
    monkeypatch.setattr(remote, "RETRIES", 0)
    vault = tmp_path / "vault"
    vault.mkdir()
    port = free_port()
    settings = Settings(vault=vault, embedder="ollama", ollama_url=f"http://127.0.0.1:{port}", watch=False)
    engine = Engine(settings)
    try:
        engine.start()
        stored = engine.scribe("Minji is allergic to peanuts; never order satay.", title="Allergy")
        other = engine.scribe("The standup is at ten every morning.", title="Standup")
        assert engine.fill_missing_vectors()["vectors_missing"] == 2  # still down: kept for later
        with FakeEndpoint(use_m3, port=port) as server:
            time.sleep(0.35)
            first = engine.memorize("food allergies", mode="semantic")  # answers, and starts the catch-up
            assert "being embedded now" in first["note"]
            deadline = time.monotonic() + 20
            while engine.stats()["vectors_missing"] and time.monotonic() < deadline:
                time.sleep(0.1)
            hits = engine.memorize("who cannot eat nuts?", mode="semantic")["results"]
            assert hits[0]["id"] == stored["id"] and other["id"] in [h["id"] for h in hits]
            assert any(t.startswith("search_document: ") for r in server.requests for t in r["texts"])
    finally:
        engine.close()


def test_a_text_the_model_refuses_does_not_hold_back_the_others(tmp_path: Path, use_m3) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for name, text in (
        ("Cat", "Our cat sleeps on the windowsill."),
        ("Huge", "TOO LONG for the model."),
        ("Tea", "Green tea steeps for three minutes."),
    ):
        (vault / f"{name}.md").write_text(f"# {name}\n\n{text}\n")
    with FakeEndpoint(use_m3) as server:
        engine = Engine(openai_settings(server.url, vault=vault, watch=False))
        try:
            report = engine.start()
            assert report.vectors_missing == 1 and "too long for the model" in report.embedder_error
            assert len(engine.indexer.refused) == 1  # not asked for again until the next reconcile
            asked = len(server.requests)
            assert engine.fill_missing_vectors()["embedded"] == 0 and len(server.requests) == asked
            hits = engine.memorize("where does the cat nap?", mode="semantic")
            assert "note" not in hits and hits["results"][0]["title"] == "Cat"
            assert engine.memorize("TOO LONG", mode="keyword")["results"][0]["title"] == "Huge"
            for n in range(4):  # the endpoint refuses everything now: no text is blamed for it
                (vault / f"Long {n}.md").write_text(f"# Long {n}\n\nTOO LONG, number {n}.\n")
            asked = len(server.requests)
            refused = engine.indexer.sync_paths([f"Long {n}.md" for n in range(4)])
            assert refused.vectors_missing == 4 and len(engine.indexer.refused) == 1
            assert len(server.requests) == asked + 1 + 3  # the batch, then three one by one
        finally:
            engine.close()


# --- over MCP stdio, as a client sees it -------------------------------------------------------


def test_server_starts_with_the_embedder_down_and_catches_up(tmp_path: Path, use_m3) -> None:
    vault = tmp_path / "vault"
    port = free_port()
    env = child_env(SPELLBOOK_OLLAMA_URL=f"http://127.0.0.1:{port}")
    command = tuned({"spellbook.embedders.remote.RETRY_SECONDS": 1.0, "spellbook.embedders.remote.RETRIES": 1})
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], "serve", "--vault", str(vault), "--embedder", "ollama"], env=env
    )

    async def main() -> None:
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"scribe", "memorize"} <= names
            guide = await client.call_tool("memorize", {"query": "how to chunk memories"})
            assert not guide.is_error and guide.structured_content["results"]  # the template, by keywords
            assert "Start Ollama" in guide.structured_content["note"]
            stored = await client.call_tool(
                "scribe", {"text": "Tea steeps for 3 minutes at 80C.", "title": "Green tea"}
            )
            assert not stored.is_error, stored.content[0].text
            assert (vault / stored.structured_content["path"]).is_file()
            assert "not embedded yet" in stored.structured_content["note"]
            stats = (await client.call_tool("stats", {})).structured_content
            assert stats["vectors_missing"] > 0 and stats["embedder_status"]["reachable"] is False

            with FakeEndpoint(use_m3, port=port):
                deadline = time.monotonic() + 60
                while True:  # the server retries on its own (every second here)
                    found = await client.call_tool(
                        "memorize", {"query": "how long should green tea steep?", "mode": "semantic"}
                    )
                    content = found.structured_content
                    top = content["results"][0] if content["results"] else {}
                    if "similarity" in top and top["id"] == stored.structured_content["id"]:  # by meaning
                        break
                    assert time.monotonic() < deadline, content
                    await anyio.sleep(0.5)
                stats = (await client.call_tool("stats", {})).structured_content
                assert stats["embedder_status"]["reachable"] is True

    anyio.run(main)


# --- doctor ------------------------------------------------------------------------------------


def doctor(vault: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = child_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **env)
    environment.pop("CLAUDE_CONFIG_DIR", None)
    return subprocess.run(
        [SPELLBOOK, "doctor", "--vault", str(vault), *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=home,
        timeout=120,
        check=False,
    )


def test_doctor_checks_the_embedder_settings_and_clients(tmp_path: Path, use_m3) -> None:
    vault, home = tmp_path / "vault", tmp_path / "home"
    home.mkdir()
    subprocess.run([SPELLBOOK, "init", str(vault)], check=True, capture_output=True, env=child_env())
    (home / ".claude.json").write_text(
        json.dumps({"mcpServers": {"spellbook": {"command": SPELLBOOK, "args": ["serve", "--vault", str(vault)]}}})
    )
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "spellbook": {"command": "/nowhere/bin/spellbook", "args": ["serve", "--vault", "/elsewhere"]},
                    "other": {"command": "x"},
                }
            }
        )
    )
    with FakeEndpoint(use_m3) as server:
        url = {"SPELLBOOK_EMBEDDER": "ollama", "SPELLBOOK_OLLAMA_URL": server.url}
        assert doctor(vault, home, "--repair", **url).returncode == 0  # first index, with vectors
        healthy = doctor(vault, home, **url)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        out = healthy.stdout
        assert out.startswith("index == vault")
        assert "OK    embedder: ollama/nomic-embed-text answered in" in out and "(512 dimensions)" in out
        assert "OK    vault:" in out and "(writable)" in out and "OK    index folder:" in out
        assert "OK    claude-code (user):" in out
        assert "WARN  cursor (user):" in out and "does not exist" in out and "spellbook install cursor" in out
        assert "INFO  claude-desktop: Spellbook is not installed" in out
        report = json.loads(doctor(vault, home, "--json", **url).stdout)
        assert report["consistent"] and report["counts"]["vectors_missing"] == 0
        by_name = {c["check"]: c for c in report["checks"]}
        assert by_name["embedder"]["status"] == "ok" and by_name["cursor (user)"]["status"] == "warn"

    down = doctor(vault, home, **url)  # the same port, nobody listening
    assert down.returncode == 1
    assert "FAIL  embedder: ollama/nomic-embed-text: Ollama at" in down.stdout and "Start Ollama" in down.stdout

    bad = doctor(vault, home, "--json", SPELLBOOK_OPENAI_BATCH_SIZE="0")
    assert bad.returncode == 1
    check = json.loads(bad.stdout)["checks"][0]
    assert check["status"] == "fail" and "SPELLBOOK_OPENAI_BATCH_SIZE" in check["detail"]
    no_key = doctor(vault, home, SPELLBOOK_EMBEDDER="openai")
    assert no_key.returncode == 1 and "SPELLBOOK_OPENAI_API_KEY" in no_key.stdout
