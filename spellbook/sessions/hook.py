"""``spellbook hook <event>``: what Claude Code runs on its hook events (JSON on stdin).

* ``SessionStart``: prints the context for the new session (stdout is added to the model's context).
* ``UserPromptSubmit``: with ``--prompt-recall`` (what ``install claude-code --hooks --prompt-recall``
  writes) or ``SPELLBOOK_RECALL=on``, prints the passages most likely to answer the prompt
  (sessions/recall.py); nothing when ``SPELLBOOK_RECALL=off`` (whatever the flag), or in a session
  whose prompt was ``#recall off`` (until ``#recall on``).
* ``Stop``, ``PreCompact``, ``SessionEnd``: hand the transcript to a detached ``hook capture``
  process and return at once; that process writes the session's notes through the index owner.

Codex CLI and Gemini CLI run the same hooks with ``--agent codex|gemini``: their events map onto
these (sessions/agents/), their answers are JSON, their transcripts are read in their own format,
and their end-of-turn event captures every turn (neither sends Claude Code's SessionEnd reliably).

A hook never breaks the person's session: every error is logged to ``<index>/hooks.log`` (stderr
when there is no index folder) and the hook exits 0 with nothing on stdout; a watchdog ends it
within ``DEADLINE_SECONDS`` whatever it is waiting for (an index owner that does not answer).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from spellbook.config import settings_from
from spellbook.errors import SpellbookError
from spellbook.files import private_file, private_folder

log = logging.getLogger("spellbook.hook")

CAPTURE_EVENTS = {"stop", "precompact", "sessionend"}
DEADLINE_SECONDS = {"sessionstart": 10.0, "userpromptsubmit": 8.0, "capture": 600.0}
MAX_STDIN_BYTES = 4 * 1024 * 1024
LOG_NAME = "hooks.log"
STOP_EVERY_SECONDS = 300.0
_SWITCH = re.compile(r"\A\s*#recall\s+(off|on)\b", re.IGNORECASE)


def run(event: str, args: Any) -> int:
    """The whole hook; returns 0 whatever happens."""
    agent = getattr(args, "agent", None) or "claude-code"
    key = _event_key(agent, event)
    started = time.perf_counter()
    threading.Timer(DEADLINE_SECONDS.get(key, 10.0), _give_up, args=(key,)).start()
    try:
        settings = settings_from(args)
        if settings.session_prompt_recall is None:  # the environment does not say: the hook's flag does
            settings = settings.model_copy(
                update={"session_prompt_recall": bool(getattr(args, "prompt_recall", False))}
            )
        _log_to(settings)
        payload = _read_payload()
        if getattr(args, "from_plugin", False) and _settings_hooks(payload):
            log.info("hook %s: Spellbook's hooks are in Claude Code's settings too; the plugin's stand down", event)
            return 0
        if agent != "claude-code":
            payload["spellbook_agent"] = agent
        if key in CAPTURE_EVENTS:
            _spawn_capture(settings, payload, key)
        elif key == "capture":
            _capture(settings, payload)
        elif key == "sessionstart":
            _print(_answer(agent, key, _session_start(settings, payload)))
        elif key == "userpromptsubmit":
            _print(_answer(agent, key, _prompt(settings, payload)))
        else:
            log.info("hook %s: nothing to do for this event", event)
        log.info("hook %s done in %.0f ms", event, (time.perf_counter() - started) * 1000)
    except BaseException as exc:
        if isinstance(exc, SystemExit | KeyboardInterrupt):
            return 0
        if isinstance(exc, SpellbookError):  # said plainly (bad settings, no vault): no traceback
            log.error("hook %s failed (the session goes on without it): %s", event, exc)
        else:
            log.exception("hook %s failed (the session goes on without it)", event)
    finally:
        sys.stdout.flush()
        os._exit(0)  # the hub's follower threads must not keep the hook alive


def _settings_hooks(payload: dict[str, Any]) -> bool:
    """Spellbook's hooks are in the user's or the project's Claude Code settings (install --hooks)."""
    from spellbook.sessions.install import installed_hooks, settings_path

    cwd = payload.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR")
    files = [settings_path("user"), *([settings_path("project", project=Path(cwd))] if cwd else [])]
    return any(installed_hooks(file) for file in files)


def _event_key(agent: str, event: str) -> str:
    if agent != "claude-code":
        from spellbook.sessions.agents import SPELLBOOK_EVENTS

        event = SPELLBOOK_EVENTS.get(agent, {}).get(event, event)
    return event.replace("-", "").replace("_", "").lower()


def _answer(agent: str, key: str, text: str) -> str:
    if agent == "claude-code":
        return text
    from spellbook.sessions.agents import answer

    return answer(agent, key, text)


def _give_up(key: str) -> None:
    log.error("hook %s: over %.0f s, gave up (is the index owner answering?)", key, DEADLINE_SECONDS.get(key, 10.0))
    os._exit(0)


def _read_payload() -> dict[str, Any]:
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1) if not sys.stdin.isatty() else b""
    if len(data) > MAX_STDIN_BYTES:
        raise ValueError("hook input over 4 MiB")
    payload = json.loads(data or b"{}")
    if not isinstance(payload, dict):
        raise TypeError("hook input is not a JSON object")
    return payload


def _log_to(settings: Any) -> None:
    """Log to ``<index>/hooks.log``; the index folder is created only inside an existing vault."""
    if not settings.vault_dir.is_dir():
        raise SpellbookError(f"No vault at {settings.vault_dir}; run `spellbook init {settings.vault_dir}`.")
    # The index folder holds every note's text, and the log names sessions and paths: owner only,
    # made so here too when a hook runs before any index exists.
    handler = logging.FileHandler(private_file(private_folder(settings.index_path) / LOG_NAME), encoding="utf-8")
    handler.setFormatter(LineFormatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
    root = logging.getLogger()
    for other in list(root.handlers):  # the CLI's stderr handler: the log file says it all
        root.removeHandler(other)
    root.addHandler(handler)


class LineFormatter(logging.Formatter):
    """One line a record: a value from the hook's input (a session id, a path) may hold a newline or
    another control character, so they are escaped in the message, and a traceback's lines are
    indented; no input can write a line that reads as a record of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return "\n".join("    " + _escape(line) for line in super().formatException(ei).split("\n"))


_CONTROLS = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029)}


def _escape(text: str) -> str:
    return text.translate(_CONTROLS)


def _print(text: str) -> None:
    if text:
        sys.stdout.write(text.rstrip() + "\n")


def _open_hub(settings: Any) -> Any:
    from spellbook.server.hub import Hub

    hub = Hub(settings.model_copy(update={"watch": False}), watch=False, warm_up=False, client="claude-code hook")
    hub.start(background=False)
    return hub


def _project(payload: dict[str, Any]) -> tuple[str, str | None]:
    from spellbook.sessions.notes import project_of

    cwd = payload.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR")
    return project_of(cwd), cwd


def _session_start(settings: Any, payload: dict[str, Any]) -> str:
    from spellbook.sessions.briefing import CONTEXT_TOKENS, session_context

    project, cwd = _project(payload)
    hub = _open_hub(settings)
    try:
        if cwd and "spellbook_agent" not in payload:
            _sync_claude_memory(hub, settings, project, Path(cwd))
        # A running server embeds the query with its loaded model; without one, keyword search
        # spares this process loading the model.
        return session_context(hub, project, cwd, CONTEXT_TOKENS, semantic=hub.role == "follower")
    finally:
        hub.close()


def _sync_claude_memory(hub: Any, settings: Any, project: str, cwd: Path) -> None:
    """Claude Code's auto-memory and marked CLAUDE.md sections -> memories (sessions/claude_memory.py)."""
    from spellbook.sessions.claude_memory import sync

    folders = [cwd, *[f for f in cwd.parents if (f / ".git").exists()][:1]]
    try:
        done = sync(hub, project, folders, settings.index_path)
    except Exception:  # the context is still worth giving
        log.exception("SessionStart: importing Claude Code's memory files failed")
        return
    if done["created"] or done["updated"] or done["erased"]:
        log.info("SessionStart: Claude Code's memory files: %s", done)


def _prompt(settings: Any, payload: dict[str, Any]) -> str:
    from spellbook.sessions.recall import MIN_RELEVANCE, PROMPT_BUDGET, prompt_context

    prompt = str(payload.get("prompt") or "").strip()
    session_id = str(payload.get("session_id") or "")
    switch = _SWITCH.match(prompt)
    if switch:  # the person's switch for this session, remembered in the index folder
        marker = _session_file(settings, session_id, ".recall-off")
        if switch.group(1).lower() == "off":
            marker.touch()
            return "Spellbook prompt recall is off for this session (`#recall on` turns it back on)."
        marker.unlink(missing_ok=True)
        return "Spellbook prompt recall is on for this session."
    if not prompt or not settings.session_prompt_recall or _session_file(settings, session_id, ".recall-off").exists():
        return ""
    project, _ = _project(payload)
    hub = _open_hub(settings)
    try:
        # Without a server, keyword search spares this process loading the model (as at SessionStart).
        return prompt_context(
            hub, project, prompt, MIN_RELEVANCE, PROMPT_BUDGET, session_id or None, semantic=hub.role == "follower"
        )
    finally:
        hub.close()


def _spawn_capture(settings: Any, payload: dict[str, Any], key: str) -> None:
    """Start ``spellbook hook capture`` detached, with the payload on its stdin, and return."""
    if not payload.get("transcript_path"):
        log.info("hook %s: no transcript_path; nothing to capture", key)
        return
    claude = "spellbook_agent" not in payload  # Codex and Gemini: every turn's end (no SessionEnd to wait for)
    if key == "stop" and claude and not _stop_due(settings, str(payload.get("session_id") or "")):
        return  # SessionEnd and PreCompact capture it; Stop only now and then, in case neither comes
    env = dict(
        os.environ,
        SPELLBOOK_VAULT=str(settings.vault_dir),
        SPELLBOOK_INDEX_DIR=str(settings.index_path),
        SPELLBOOK_EMBEDDER=settings.embedder,
    )
    if settings.chroma_url:
        env["SPELLBOOK_CHROMA_URL"] = settings.chroma_url
    with open(settings.index_path / LOG_NAME, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "spellbook", "hook", "capture"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    assert child.stdin is not None
    child.stdin.write(json.dumps(payload).encode("utf-8"))
    child.stdin.close()
    log.info("hook %s: capture of session %s started (pid %d)", key, payload.get("session_id"), child.pid)


def _stop_due(settings: Any, session_id: str) -> bool:
    """Stop fires after every answer: capture on the first, then at most every STOP_EVERY_SECONDS."""
    stamp = _session_file(settings, session_id, ".stop")
    try:
        if time.time() - stamp.stat().st_mtime < STOP_EVERY_SECONDS:
            return False
    except FileNotFoundError:
        pass
    stamp.touch()
    return True


def _session_file(settings: Any, session_id: str, suffix: str) -> Path:
    """``<index>/sessions/<hash of the session id><suffix>``: what a hook remembers of one session."""
    import hashlib

    folder = private_folder(settings.index_path / "sessions")
    return folder / (hashlib.sha1(session_id.encode("utf-8")).hexdigest()[:16] + suffix)


def _capture(settings: Any, payload: dict[str, Any]) -> None:
    from spellbook.sessions.agents import read_session
    from spellbook.sessions.capture import capture
    from spellbook.sessions.notes import redact_session

    transcript = Path(str(payload.get("transcript_path")))
    try:
        session = read_session(payload.get("spellbook_agent"), transcript, payload.get("session_id") or None)
    except (OSError, ValueError) as exc:  # gone, not a regular file, too big: said in one line
        log.error("capture: the transcript was not read: %s", exc)
        return
    if not session.cwd:
        session.cwd = payload.get("cwd")
    if not session.exchanges:
        log.info("capture: session %s has no prompt yet", session.session_id)
        return
    if settings.redact:  # before anything is cut short: a secret cut in two is no longer recognised
        from spellbook.vault.privacy import redact

        options = {"extra_patterns": tuple(settings.redact_patterns), "disabled": tuple(settings.redact_disabled)}
        session = redact_session(session, lambda text: redact(text, **options)[0])
    digested = None
    if settings.summariser:  # opt-in: a model writes the digest, under its daily cap
        from spellbook.sessions.digest import digest
        from spellbook.sessions.summariser import summarise

        digested = summarise(settings, session, digest(session))
    hub = _open_hub(settings)
    try:
        done = capture(hub, session, settings.index_path / "sessions", digested)
    finally:
        hub.close()
    log.info(
        "capture: session %s: created %s, updated %s, unchanged %d",
        session.session_id,
        done["created"],
        done["updated"],
        done["unchanged"],
    )
