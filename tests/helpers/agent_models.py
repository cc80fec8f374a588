"""Scripted stand-ins for the OpenAI Responses API (Codex CLI) and the Gemini API (Gemini CLI), so
the real CLIs run whole sessions offline in the tests, as ``stub_model.py`` does for Claude Code.

A script is a list of turns, one per model request: ``{"tool": name, "input": {...}}`` calls a
tool (for Codex, an MCP tool is ``{"namespace": "mcp__spellbook", "tool": "scribe", ...}``),
``{"text": "..."}`` answers and ends the turn. Requests that come after the script ran out
get "(script finished)". Every request body is kept in ``requests`` (a test reads the context the
CLI sent: its instructions and the hook's additional context). Binds 127.0.0.1; ``close()`` stops it.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ModelStub:
    def __init__(self, kind: str, turns: list[dict[str, Any]]) -> None:
        self.kind, self.turns, self.requests = kind, list(turns), []  # kind: "openai" or "gemini"
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # model lists
                self._send(200, "application/json", json.dumps({"data": [], "models": []}).encode())

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b"{}"
                if self.headers.get("content-encoding") == "zstd":
                    self._send(415, "text/plain", b"no zstd")
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                with stub.lock:
                    stub.requests.append({"path": self.path, "body": body})
                    turn = (
                        stub.turns.pop(0)
                        if stub.turns and stub._scripted(self.path, body)
                        else {"text": "(script finished)"}
                    )
                if stub.kind == "openai":
                    self._send(200, "text/event-stream", _responses_sse(turn))
                elif "countTokens" in self.path:
                    self._send(200, "application/json", b'{"totalTokens": 10}')
                elif "streamGenerateContent" in self.path:
                    self._send(200, "text/event-stream", b"data: " + json.dumps(_gemini(turn)).encode() + b"\r\n\r\n")
                else:
                    self._send(200, "application/json", json.dumps(_gemini(turn)).encode())

            def _send(self, code: int, kind: str, data: bytes) -> None:
                self.send_response(code)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _scripted(self, path: str, body: dict[str, Any]) -> bool:
        """Only the agent's main requests take script turns (not title or summary side-calls)."""
        if self.kind == "openai":
            return bool(body.get("tools"))
        return bool(body.get("tools"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _responses_sse(turn: dict[str, Any]) -> bytes:
    rid = f"resp_{uuid.uuid4().hex[:12]}"
    if "tool" in turn:
        item = {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:12]}",
            "call_id": f"call_{uuid.uuid4().hex[:12]}",
            "name": turn["tool"],
            "arguments": json.dumps(turn.get("input", {})),
        }
        if "namespace" in turn:  # Codex groups an MCP server's tools in a namespace (mcp__<server>)
            item["namespace"] = turn["namespace"]
    else:
        item = {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.get("text", "ok"), "annotations": []}],
        }
    events = [
        {"type": "response.created", "response": {"id": rid}},
        {"type": "response.output_item.done", "item": item, "output_index": 0},
        {
            "type": "response.completed",
            "response": {
                "id": rid,
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": None,
                    "output_tokens": 5,
                    "output_tokens_details": None,
                    "total_tokens": 15,
                },
            },
        },
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _gemini(turn: dict[str, Any]) -> dict[str, Any]:
    if "tool" in turn:
        part: dict[str, Any] = {"functionCall": {"name": turn["tool"], "args": turn.get("input", {})}}
    else:
        part = {"text": turn.get("text", "ok")}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    }
