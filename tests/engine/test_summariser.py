"""The opt-in summariser against a local HTTP stub (127.0.0.1, stopped by the test) that speaks
Ollama's /api/chat and OpenAI's /v1/chat/completions: the model's digest heads the note, the day's
spend is counted from the API's usage and shown by stats, the cap is never passed, and on an error,
a timeout or the cap the extractive digest stays."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine.spend import spent
from spellbook.server.hub import Hub
from spellbook.sessions import summariser
from spellbook.sessions.capture import capture
from spellbook.sessions.digest import digest, parse
from spellbook.sessions.summariser import summarise
from spellbook.sessions.transcript import read_transcript
from tests.helpers.coding_sessions import SHOP, write_project
from tests.helpers.processes import SPELLBOOK, child_env

ANSWER = (
    "Outcome: The shop API listens on port 8080.\nDecided: httpx over requests, for HTTP/2.\n"
    "Open: load test checkout with k6."
)


class Stub:
    """A chat endpoint on 127.0.0.1: what it answers, the usage it reports, how long it waits."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []
        self.status, self.delay, self.answer = 200, 0.0, ANSWER
        self.usage = (120, 30)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body, dict(self.headers)))
                time.sleep(stub.delay)
                prompt, completion = stub.usage
                if self.path == "/api/chat":
                    data = {
                        "model": body["model"],
                        "created_at": "2026-11-28T00:00:00Z",
                        "done": True,
                        "done_reason": "stop",
                        "message": {"role": "assistant", "content": stub.answer},
                        "prompt_eval_count": prompt,
                        "eval_count": completion,
                    }
                else:
                    data = {
                        "id": "x",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": stub.answer},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        },
                    }
                raw = json.dumps(data).encode() if stub.status == 200 else b'{"error": "boom"}'
                try:
                    self.send_response(stub.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the client gave up (the timeout test)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    stub = Stub()
    yield stub
    stub.close()


def sessions(tmp_path: Path):
    return [read_transcript(file) for file, _ in write_project(tmp_path, SHOP)]


def test_ollama_writes_the_digest_and_its_spend_is_counted_and_shown_by_stats(
    tmp_path: Path, stub: Stub, vault: Path
) -> None:
    settings = Settings(vault=vault, embedder="hashing", watch=False, summariser="ollama:tiny", ollama_url=stub.url)
    session = sessions(tmp_path)[4]
    made = summarise(settings, session, digest(session))
    path, body, _ = stub.requests[0]
    assert path == "/api/chat" and body["model"] == "tiny" and body["options"]["num_predict"] == 400
    assert "8080 instead of 8000" in body["messages"][1]["content"]
    assert made.by == "ollama:tiny" and made.open == ["load test checkout with k6."]
    assert made.ran == digest(session).ran  # commands and files stay the transcript's own
    assert spent(settings.index_path)["tokens"] == 150 and spent(settings.index_path)["calls"] == 1
    assert summarise(settings, session, digest(session)) == made and len(stub.requests) == 1  # same words: no call
    hub = Hub(settings, watch=False, warm_up=False)
    hub.start(background=False)
    try:
        capture(hub, session, tmp_path / "locks", made)
        note = hub.call("list_memories", {"filter": {"type": "session"}})["memories"][0]
        text = hub.call("get_memories", {"ids": [note["id"]]})["memories"][0]["text"]
        assert "Digest written by ollama:tiny" in text and parse(text).decided == ["httpx over requests, for HTTP/2."]
        stats = hub.call("stats")["summariser"]
        assert (stats["model"], stats["tokens"], stats["daily_tokens"], stats["calls"]) == (
            "ollama:tiny",
            150,
            50_000,
            1,
        )
    finally:
        hub.close()


def test_openai_compatible_endpoint_and_the_daily_cap_is_never_passed(
    tmp_path: Path, stub: Stub, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summariser, "DAILY_TOKENS", 9_000)
    settings = Settings(
        vault=vault,
        embedder="hashing",
        watch=False,
        summariser="openai:small",
        openai_url=stub.url + "/v1",
        openai_api_key="sk-test",
    )
    stub.usage = (2_500, 300)
    made = []
    for session in sessions(tmp_path):
        made.append(summarise(settings, session, digest(session)))
        assert spent(settings.index_path)["tokens"] <= 9_000
    day = spent(settings.index_path)
    assert stub.requests[0][0] == "/v1/chat/completions" and stub.requests[0][2]["Authorization"] == "Bearer sk-test"
    assert stub.requests[0][1]["max_tokens"] == 400
    assert day["calls"] == len(stub.requests) >= 1 and day["tokens"] == 2_800 * day["calls"]
    assert day["refused"] == 8 - day["calls"] >= 1  # once what is left cannot pay for a call, no call is made
    assert [d.by for d in made[day["calls"] :]] == [""] * day["refused"]  # and the extractive digest stays
    assert made[-1].open == ["upgrade Django to 5.1 once django-celery-beat 2.7 is out."]


def test_an_error_or_a_timeout_leaves_the_extractive_digest(
    tmp_path: Path, stub: Stub, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(vault=vault, embedder="hashing", watch=False, summariser="ollama:tiny", ollama_url=stub.url)
    first, second, third = sessions(tmp_path)[:3]
    stub.status = 500
    assert summarise(settings, first, digest(first)) == digest(first)
    assert spent(settings.index_path)["fallbacks"] == 1 and spent(settings.index_path)["tokens"] == 0
    stub.status, stub.delay = 200, 1.5
    monkeypatch.setattr(summariser, "TIMEOUT_SECONDS", 0.3)
    assert summarise(settings, second, digest(second)) == digest(second)
    assert spent(settings.index_path)["fallbacks"] == 2 and spent(settings.index_path)["tokens"] > 400  # charged
    stub.delay, stub.answer = 0.0, "I cannot help with that."
    assert summarise(settings, third, digest(third)) == digest(third)  # nothing usable in the answer
    off = Settings(vault=vault, embedder="hashing", watch=False)
    count = len(stub.requests)
    assert summarise(off, third, digest(third)) == digest(third) and len(stub.requests) == count  # off by default


def test_the_capture_hook_summarises_when_asked_and_session_start_briefs_from_it(tmp_path: Path, stub: Stub) -> None:
    """The real hook processes: ``hook capture`` with SPELLBOOK_SUMMARISER set (the stub answers),
    another without it, then ``hook SessionStart`` prints the briefing from both digests."""
    vault = tmp_path / "vault"
    subprocess.run([SPELLBOOK, "init", str(vault)], env=child_env(), check=True, capture_output=True)
    files = write_project(tmp_path, SHOP)
    base = child_env(SPELLBOOK_EMBEDDER="hashing")
    summarised = dict(base, SPELLBOOK_SUMMARISER="ollama:tiny", SPELLBOOK_OLLAMA_URL=stub.url)
    for file, env in ((files[4][0], summarised), (files[7][0], base)):
        payload = {"session_id": file.stem, "transcript_path": str(file), "cwd": "/home/dev/shop"}
        subprocess.run(
            [SPELLBOOK, "hook", "capture", "--vault", str(vault)],
            input=json.dumps(payload).encode(),
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
    assert len(stub.requests) == 1 and spent(vault / ".spellbook")["tokens"] == 150
    notes = sorted((vault / "sessions" / "shop").glob("*.md"))
    assert ["Digest written by ollama:tiny" in n.read_text(encoding="utf-8") for n in notes] == [True, False]
    start = {"session_id": "new", "cwd": "/home/dev/shop", "hook_event_name": "SessionStart", "source": "startup"}
    out = subprocess.run(
        [SPELLBOOK, "hook", "SessionStart", "--vault", str(vault)],
        input=json.dumps(start).encode(),
        env=base,
        check=True,
        capture_output=True,
        timeout=120,
    ).stdout.decode()
    opened = out.split("## Left open\n", 1)[1].split("\n## ", 1)[0]
    assert "upgrade Django to 5.1" in opened and "load test checkout with k6." in opened  # extractive, then the model's
    assert "- Decided: httpx over requests, for HTTP/2." in out
    assert out.index("### 2026-11-20") < out.index("### 2026-11-11")
