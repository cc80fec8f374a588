"""The opt-in summariser: a model writes the session's digest, under a hard daily token cap.

Off unless ``SPELLBOOK_SUMMARISER`` is ``ollama:<model>`` (Ollama's ``/api/chat``, through the
``ollama`` client) or ``openai:<model>`` (any OpenAI-compatible ``/chat/completions``, through
httpx). It runs in the capture process. Before a call, the prompt's cautious token count, doubled,
plus the most the answer may spend (``MAX_ANSWER_TOKENS``) is set against what is left of
``DAILY_TOKENS`` today: a call that could pass the cap is not made. After it,
the usage the API reports (prompt + completion tokens) is added to the day's spend in the index
folder (engine/spend.py); a call that timed out is charged what it could have cost. On an error, a
timeout, the cap, or an answer with no digest lines in it, the extractive digest stays. A session
captured again with the same words (Stop, then SessionEnd) reuses its digest without a call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import replace
from typing import Any

from spellbook.engine.spend import DAILY_TOKENS, ledger
from spellbook.sessions.digest import Digest, parse
from spellbook.sessions.quoting import estimate_tokens
from spellbook.sessions.transcript import Session

log = logging.getLogger("spellbook.summariser")

MAX_ANSWER_TOKENS = 400
INPUT_CHARS = 16_000  # of the session's prompts and answers, its beginning and its end
TIMEOUT_SECONDS = 30.0
INSTRUCTIONS = (
    "You write the digest of a coding session for the developer's next session. Answer with lines only, "
    "each starting with one of these labels and a colon: Outcome, Decided, Fixed, Open. Outcome: what came of "
    "the work. Decided: a decision and its reason. Fixed: an error and what fixed it. Open: what is left to do. "
    "One item a line, at most 12 lines, in the language of the session. Keep exact values (ports, timeouts, "
    "versions, names). Do not invent anything that is not in the session."
)


def summarise(settings: Any, session: Session, fallback: Digest) -> Digest:
    """The model's digest of ``session`` (with the commands, files and asks of ``fallback``), or
    ``fallback`` itself when the summariser is off, over its cap, failing or says nothing usable."""
    if not settings.summariser:
        return fallback
    kind, model = settings.summariser.split(":", 1)
    prompt = _transcript(session)
    kept = (
        settings.index_path
        / "sessions"
        / (hashlib.sha1(session.session_id.encode("utf-8")).hexdigest()[:16] + ".digest.json")
    )
    key = hashlib.sha1(f"{settings.summariser}\n{prompt}".encode()).hexdigest()
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        saved = json.loads(kept.read_text(encoding="utf-8"))
        if saved["key"] == key:  # Stop, then SessionEnd, on the same words: no second call
            return replace(fallback, **saved["digest"])
    reserve = 2 * (estimate_tokens(INSTRUCTIONS) + estimate_tokens(prompt)) + MAX_ANSWER_TOKENS
    with ledger(settings.index_path) as day:
        left = DAILY_TOKENS - day["tokens"]
        if reserve > left:
            day["refused"] += 1
            log.info("summariser: %d tokens left today, a call may cost %d: the extractive digest stays", left, reserve)
            return fallback
        try:
            text, used = (_ollama if kind == "ollama" else _openai)(settings, model, prompt)
        except Exception as exc:  # noqa: BLE001 - any failure of the model leaves the extractive digest
            day["fallbacks"] += 1
            if "timeout" in type(exc).__name__.lower() or "timed out" in str(exc).lower():
                day["tokens"] += reserve  # it may have run to the end: charge what it could have cost
            log.warning(
                "summariser %s failed (%s): the extractive digest stays", settings.summariser, type(exc).__name__
            )
            return fallback
        day["calls"] += 1
        day["tokens"] += used if used is not None else reserve
    written = parse("\n".join(f"- {line.strip().lstrip('-* ').strip()}" for line in text.splitlines()))
    if not (written.outcome or written.decided or written.fixed or written.open):
        log.warning("summariser %s: no digest lines in its answer; the extractive digest stays", settings.summariser)
        return fallback
    made = {
        "outcome": written.outcome,
        "decided": written.decided,
        "fixed": written.fixed,
        "open": written.open,
        "by": settings.summariser,
    }
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps({"key": key, "digest": made}, ensure_ascii=False), encoding="utf-8")
    return replace(fallback, **made)


def _transcript(session: Session) -> str:
    parts = [f"User: {x.prompt}\nAssistant: {x.answer}" for x in session.exchanges]
    text = "\n\n".join(parts)
    if len(text) > INPUT_CHARS:
        half = INPUT_CHARS // 2
        text = text[:half] + "\n\n[…]\n\n" + text[-half:]
    return text


def _ollama(settings: Any, model: str, prompt: str) -> tuple[str, int | None]:
    import ollama

    client = ollama.Client(host=settings.ollama_url, timeout=TIMEOUT_SECONDS)
    answer = client.chat(
        model=model,
        messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": prompt}],
        options={"num_predict": MAX_ANSWER_TOKENS, "temperature": 0},
    )
    counts = (answer.get("prompt_eval_count"), answer.get("eval_count"))
    used = sum(c for c in counts if c) if any(c is not None for c in counts) else None
    return str((answer.get("message") or {}).get("content") or ""), used


def _openai(settings: Any, model: str, prompt: str) -> tuple[str, int | None]:
    import httpx

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    response = httpx.post(
        settings.openai_url.rstrip("/") + "/chat/completions",
        json={
            "model": model,
            "max_tokens": MAX_ANSWER_TOKENS,
            "temperature": 0,
            "messages": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": prompt}],
        },
        headers={"Authorization": f"Bearer {key}"} if key else {},
        timeout=TIMEOUT_SECONDS,
    )
    response.raise_for_status()
    data = response.json()
    usage = data.get("usage") or {}
    used = usage.get("total_tokens") or (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)) or None
    return str(data["choices"][0]["message"]["content"] or ""), used
