"""A session's digest: what a next session must know of it, picked from its own words. Pure, no model.

Extractive rules over the exchanges (docs/sessions.md): what was asked (the prompts' gists), what
came of it (the first sentence of each substantial final answer), decisions with their reasons,
errors with what fixed them, commands run and whether they passed, files changed, and what was left
open (TODOs, next steps, "still need"). Sentences are cut at ``.!?`` and at ``。！？`` with or without
a space, so Korean and Japanese text keeps its characters whole; the cue words cover English,
Korean and Japanese. The digest heads the session's note as one ``- Label: item`` line per item
(``render``), which ``parse`` reads back for the SessionStart briefing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from spellbook.sessions.transcript import Session, Turn

ITEM_CHARS = 240
LIMITS = {"asked": 4, "outcome": 5, "decided": 5, "fixed": 5, "open": 6, "ran": 8, "files": 12}
LABELS = {
    "asked": "Asked",
    "outcome": "Outcome",
    "decided": "Decided",
    "fixed": "Fixed",
    "open": "Open",
    "ran": "Ran",
    "files": "Files changed",
}
JOINED = {"ran": "; ", "files": ", "}  # shown on one line, split back by parse
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^\s.])|(?<=[。！？])\s*|\n+")
_DECISION = re.compile(
    r"\b(?:decided|decision|we chose|chose|choose|going with|go with|settled on|opted|switch(?:ed|ing)? (?:\w+ )*?to|"
    r"let's use|we'll use|"
    r"instead of|rather than|pinned)\b|\b(?:raised|lowered|increased|decreased|bumped|changed)\b.*\bfrom\b|"
    r"결정|하기로|대신|決定|決め|ことにし|代わりに|採用",
    re.IGNORECASE,
)
_REASON = re.compile(
    r"\b(?:because|since|so that|due to|as it|the reason)\b|때문|위해|왜냐하면|ので|ため|なぜなら", re.IGNORECASE
)
_TROUBLE = re.compile(
    r"\b(?:error|errors|exception|fail(?:s|ed|ure|ing)?|crash(?:es|ed)?|bug|broke|broken|flak(?:e|es|y)|"
    r"hang|hung|leak|mismatch|oomkill(?:ed)?|timed out|traceback)\b|오류|에러|실패|버그|エラー|失敗|不具合|バグ",
    re.IGNORECASE,
)
_FIX = re.compile(
    r"\b(?:fix(?:ed|es)?|caused by|came from|root cause|was due to|resolved|solved|the cause|workaround|"
    r"gotcha)\b|수정|고쳤|고침|원인|해결|修正|原因|解決|直し",
    re.IGNORECASE,
)
_OPEN = re.compile(
    r"\b(?:todo|fixme|next step|next steps|left open|still need|still needs|not yet|not started|follow[- ]up|"
    r"open question|remaining|we need to|needs to be done|for later|do (?:it|this|that) later)\b|"
    r"해야 합니다|해야 함|남은|아직|다음 단계|"
    r"次のステップ|残り|まだ|必要があります|今後",
    re.IGNORECASE,
)
_OPEN_LEAD = re.compile(
    r"^(?:todo|fixme|next steps?|left open|follow[- ]up|次のステップ|다음 단계)\s*[:：\-–]\s*", re.IGNORECASE
)
_PREAMBLE = re.compile(r"^(?:let me|i'll|i will|sure|okay|ok|great|now)\b", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_LINE = re.compile(r"^- (Asked|Outcome|Decided|Fixed|Open|Ran|Files changed): (.+)$", re.MULTILINE)


@dataclass
class Digest:
    asked: list[str] = field(default_factory=list)
    outcome: list[str] = field(default_factory=list)
    decided: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    open: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    by: str = ""  # the summariser that wrote it (sessions/summariser.py); empty: these rules

    def items(self) -> list[tuple[str, str]]:
        """(kind, item) in the order the digest shows them."""
        return [(kind, item) for kind in LABELS for item in getattr(self, kind)]


def digest(session: Session) -> Digest:
    """The digest of ``session``, from its prompts, answers, commands and files."""
    out = Digest()
    for x in session.exchanges:
        _read_exchange(out, x)
    out.files = list(dict.fromkeys(_short(f, session.cwd) for x in session.exchanges for f in x.files))
    out.ran = _commands(session.exchanges)
    for kind, limit in LIMITS.items():
        items = list(dict.fromkeys(getattr(out, kind)))
        # Over the limit, the last ones stay (the state the session ended in), files and asks the first ones.
        setattr(out, kind, items[:limit] if kind in ("asked", "files") else items[-limit:])
    return out


def render(d: Digest) -> str:
    """The digest as the lines that head a session note: ``- Label: item``, one item a line (the
    commands and the files on one line each); an outcome already said as a decision or fix is left out."""
    said = " ".join(d.decided + d.fixed)
    lines = [f"Digest written by {d.by} (the extractive digest is the fallback)."] if d.by else []
    for kind, item in d.items():
        if kind in JOINED or (kind == "outcome" and item in said):
            continue
        lines.append(f"- {LABELS[kind]}: {_one_line(item)}")
    for kind, separator in JOINED.items():
        if getattr(d, kind):
            lines.append(f"- {LABELS[kind]}: {separator.join(getattr(d, kind))}")
    return "\n".join(lines) + "\n" if lines else ""


def parse(body: str) -> Digest:
    """The digest that heads a session note's ``body`` (before its first section), as ``render`` wrote it."""
    head = body.split("\n## ", 1)[0]
    out = Digest()
    kinds = {label: kind for kind, label in LABELS.items()}
    for label, item in _LINE.findall(head):
        kind = kinds[label]
        getattr(out, kind).extend(item.split(JOINED[kind]) if kind in JOINED else [item.strip()])
    return out


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (code blocks left out), each one line."""
    text = re.sub(r"```.*?(?:```|\Z)", " ", text, flags=re.DOTALL)
    parts = (" ".join(p.split()).lstrip("-*• ").strip() for p in _SENTENCE_END.split(text))
    return [p for p in parts if len(p) > 1]


def _read_exchange(out: Digest, x: Turn) -> None:
    prompt = _one_line(x.prompt, 140)
    if _weight(prompt) > 20:
        out.asked.append(prompt)
    said = sentences(x.answer)
    substantial = [s for s in said if not _PREAMBLE.match(s)]
    if substantial and _weight(substantial[0]) > 40:
        out.outcome.append(substantial[0])
    trouble = None
    for n, sentence in enumerate(said):
        following = said[n + 1] if n + 1 < len(said) else ""
        if _OPEN.search(sentence):
            out.open.append(_OPEN_LEAD.sub("", sentence))
            continue
        if _DECISION.search(sentence):
            reason = following if not _REASON.search(sentence) and _REASON.match(following or " ") else ""
            out.decided.append(f"{sentence} {reason}".strip())
        if _TROUBLE.search(sentence) and not _FIX.search(sentence):
            trouble = sentence
        elif _FIX.search(sentence):
            joined = f"{trouble}{'' if trouble[-1] in '。！？' else ' '}{sentence}" if trouble else sentence
            out.fixed.append(joined)
            trouble = None
    for sentence in sentences(x.prompt):
        if re.search(r"\b(?:todo|later|next time|remind me)\b|나중에|다음에|後で", sentence, re.IGNORECASE):
            out.open.append(_OPEN_LEAD.sub("", sentence))


def _weight(text: str) -> int:
    """Characters, a CJK character counting for three (a short Korean prompt says as much)."""
    return len(text) + 2 * len(_CJK.findall(text))


def _commands(exchanges: list[Turn]) -> list[str]:
    """Each command with how it went: its last run, and whether an earlier run had failed."""
    runs: dict[str, list[bool | None]] = {}
    for x in exchanges:
        for command, passed in x.commands:
            runs.setdefault(command, []).append(passed)
    out = []
    for command, results in runs.items():
        last = results[-1]
        state = "passed" if last else "failed" if last is False else "ran"
        if last and False in results:
            state += f" after {results.count(False)} failed run{'s' if results.count(False) > 1 else ''}"
        out.append(f"`{command.replace('`', chr(39))}` {state}")
    return out


def _one_line(text: str, limit: int = ITEM_CHARS) -> str:
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[:limit]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,.;:") + "…"


def _short(file: str, cwd: str | None) -> str:
    if cwd and file.startswith(cwd.rstrip(os.sep) + os.sep):
        return file[len(cwd.rstrip(os.sep)) + 1 :]
    return file
