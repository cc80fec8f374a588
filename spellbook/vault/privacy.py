"""Privacy filter: find secrets in text and replace them with ``[REDACTED:<kind>]``.

Pure and dependency free (standard library ``re`` only, every built-in pattern compiled once at
import). ``redact`` is meant to run on everything that is about to reach the vault (a note's
body *and* its metadata) and on every tool answer.

    >>> redact("export GITHUB_TOKEN=ghp_" + "a1B2c3D4e5" * 4)[0]
    'export GITHUB_TOKEN=[REDACTED:github-token]'

What is found (``KINDS``), strongest evidence first:

* ``private``        a whole ``<private>...</private>`` span (multi-line, tags case-insensitive,
                     spaces allowed inside the tag: ``< private >``, ``</ private>``).
                     An opening tag that is never closed hides the rest of its paragraph (up to
                     the next blank line): failing closed, because the writer asked for privacy.
* ``private-key``    PEM private keys, ``-----BEGIN [RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP ...]PRIVATE
                     KEY-----`` through the matching END line (an unterminated block is cut at the
                     end of its base64 lines).
* provider tokens recognised by their prefix: ``aws-access-key`` (AKIA/ASIA + 16),
  ``aws-secret-key`` (40 chars after ``aws_secret_access_key =``), ``github-token`` (ghp_, gho_,
  ghu_, ghs_, ghr_, github_pat_), ``gitlab-token`` (glpat-), ``anthropic-key`` (sk-ant-),
  ``openai-key`` (sk-, sk-proj-, sk-svcacct-, sk-admin-), ``slack-token`` (xoxb-, xoxp-, xoxa-,
  xoxr-, xoxs-, xapp-), ``slack-webhook`` (hooks.slack.com URLs), ``stripe-key`` (sk_live_,
  sk_test_, rk_live_, rk_test_, whsec_), ``google-api-key`` (AIza + 35), ``npm-token`` (npm_),
  ``pypi-token`` (pypi-AgEIcHlwaS5vcmc...), ``huggingface-token`` (hf_), ``jwt`` (eyJ... three
  base64url segments).
* ``url-password``   the password of credentials in a URL: ``postgres://user:[REDACTED:url-password]@host``.
* ``bearer-token`` / ``basic-auth``   the credential after ``Authorization: Bearer|Token|Basic``; a
                     bare ``Bearer <token>`` only when the token is long and random-looking.
* ``password`` / ``secret`` / ``api-key`` / ``token``   the VALUE of an assignment whose key names a
                     secret (``password = "..."``, ``DB_PASSWORD=...``, ``"apiKey": "..."``,
                     ``secret: ...``, ``X-API-Key: ...``, ``--token ...``, ``<password>..</password>``)
                     and the value in prose such as "the wifi password is Xk9mPq2w". The key is
                     kept so the note stays readable. Korean, Japanese and Chinese phrases too:
                     ``비밀번호: ...``, ``비밀번호는 ...입니다``, ``パスワード：...``, ``暗証番号: 4821``
                     (4+ digits count for a PIN), ``API 키``, ``토큰``, ``トークン``, ``APIキー``,
                     ``秘密鍵``, ``密码``: the value must be ASCII and end the phrase, so
                     "비밀번호를 잊어버렸어요" or "パスワードは8文字以上" stay as they are.
                     ``password`` also covers a password given on a command line by a tool's
                     short flag (``mysql -pS3cret``, ``sshpass -p``, ``curl -u user:S3cret``,
                     ``docker login -p``, ``redis-cli -a``, ``echo S3cret | sudo -S``, ``openssl
                     -k``), only after that tool's name: spellbook/vault/command_lines.py.
* ``custom``         matches of ``extra_patterns`` (a named group ``secret`` narrows the redaction
                     to that group).

False-positive policy (a redaction is destructive: the vault keeps only the redacted text):

* Nothing is redacted on shape alone unless the shape is a provider's documented prefix. Git
  SHAs, UUIDs, hashes, base64 blobs and long identifiers are left alone unless an assignment key
  says they are a secret (``token: <uuid>`` *is* redacted).
* The word "password" in prose is not a secret; an assignment value must be at least 6
  characters and must not be a placeholder: ``<your-password>``, ``${DB_PASSWORD}``, ``{{ token }}``,
  ``$TOKEN``, ``%s``, ``****``, ``xxxxxx``, anything containing ``changeme``/``example``/
  ``placeholder``/``your_``/``redacted``, or a stop word (``none``, ``null``, ``true``,
  ``string``, ``required``, ...). So ``password = "changeme"`` is kept on purpose: it is a
  well-known default, and notes about setting one up would otherwise lose their meaning.
* Unquoted values that look like code are kept: calls (``get_password()``), attribute paths
  (``settings.SECRET_KEY``), variable names that contain a secret word (``db_password``), values
  with brackets, file paths and URLs. Quoted string literals are always taken at their word.
* ``key: word more words`` (an all-letter value followed by more prose) is read as prose.
* In prose ("the password is X") the value must mix letters and digits (or be quoted) and must
  not look like an algorithm name (``SHA-256``).
* URL passwords are redacted whatever they are (``user:pass@``), except template syntax, and
  except ``host:port@`` look-alikes.

Overlaps: detectors run in the order of ``KINDS`` (``custom`` right after ``private-key``); a
later match that overlaps an earlier one is dropped, so ``password = "ghp_..."`` is reported as
``github-token``. Disabling a specific kind can therefore let a generic one catch the same text
(disable ``jwt`` and ``token: eyJ...`` is still redacted as ``token``).

Linear time: every pattern is free of nested or overlapping quantifiers that could backtrack
catastrophically, and ``<private>`` tags are matched with one pass over the text (an unclosed tag
no longer rescans the rest of the text).

Idempotent: ``[REDACTED:...]`` markers are never matched again, so ``redact(redact(t)[0])[0] ==
redact(t)[0]``.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spellbook.errors import InvalidInputError
from spellbook.vault.detectors import BUILTIN, Detector, Match, shannon_entropy

__all__ = ["KINDS", "MARKER_RE", "Redaction", "describe", "marker", "redact", "redact_data", "shannon_entropy"]

KINDS: tuple[str, ...] = (
    "private",
    "private-key",
    "aws-access-key",
    "aws-secret-key",
    "github-token",
    "gitlab-token",
    "anthropic-key",
    "openai-key",
    "slack-webhook",
    "slack-token",
    "stripe-key",
    "google-api-key",
    "npm-token",
    "pypi-token",
    "huggingface-token",
    "jwt",
    "url-password",
    "bearer-token",
    "basic-auth",
    "password",
    "secret",
    "api-key",
    "token",
    "custom",
)

MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
MAX_DATA_DEPTH = 64  # redact_data refuses deeper nesting (frontmatter is held to 32 levels)


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Redaction:
    """One replaced secret: its kind and its span ``[start, end)`` in the ORIGINAL text."""

    kind: str
    start: int
    end: int


CUSTOM_AT = 2  # user patterns run right after <private> spans and PEM keys
assert {k for d in BUILTIN for k in d.kinds} | {"custom"} == set(KINDS)


@lru_cache(maxsize=64)
def _custom_detector(patterns: tuple[str, ...]) -> Detector:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"Invalid redaction pattern {pattern!r}: {exc}") from None

    def find(text: str) -> Iterator[Match]:
        for regex in compiled:
            group = "secret" if "secret" in regex.groupindex else 0
            for m in regex.finditer(text):
                start, end = m.span(group)
                if start < end:
                    yield "custom", start, end

    return Detector(frozenset({"custom"}), find)


def _check_disabled(disabled: Collection[str]) -> frozenset[str]:
    if isinstance(disabled, str):
        disabled = [disabled]
    unknown = sorted(set(disabled) - set(KINDS))
    if unknown:
        raise ValueError(f"Unknown redaction kind(s) {', '.join(unknown)}; known kinds: {', '.join(KINDS)}.")
    return frozenset(disabled)


class _Spans:
    """Disjoint ``[start, end)`` spans, sorted, with an O(log n) overlap test."""

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for start, end in spans:
            self.add(start, end)

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self.starts, start)
        return (i > 0 and self.ends[i - 1] > start) or (i < len(self.starts) and self.starts[i] < end)

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` outside every span."""
        out, pos = [], start
        for i in range(max(0, bisect.bisect_right(self.starts, start) - 1), len(self.starts)):
            if self.starts[i] >= end:
                break
            if self.starts[i] > pos:
                out.append((pos, self.starts[i]))
            pos = max(pos, self.ends[i])
        if pos < end:
            out.append((pos, end))
        return out


# --- public API --------------------------------------------------------------------------------


DETECTOR_ROUNDS = 4  # passes of one detector over a text while each finds more (bounds the work)


def redact(
    text: str, *, extra_patterns: Sequence[str] = (), disabled: Collection[str] = ()
) -> tuple[str, list[Redaction]]:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``.

    ``extra_patterns``: regular expressions of more secrets (kind ``custom``; a named group
    ``secret`` redacts only that group). ``disabled``: kinds from ``KINDS`` to leave alone.
    Raises ``ValueError`` for an unknown kind or an invalid pattern. Returns the new text and the
    redactions, sorted, with spans in the ORIGINAL text.
    """
    off = _check_disabled(disabled)
    detectors = list(BUILTIN)
    if isinstance(extra_patterns, str):
        extra_patterns = [extra_patterns]
    if extra_patterns:
        detectors.insert(CUSTOM_AT, _custom_detector(tuple(extra_patterns)))
    markers = _Spans(m.span() for m in MARKER_RE.finditer(text))
    taken = _Spans()
    found: list[Redaction] = []
    present = present_needles(text, BUILTIN)
    masked = text  # ``text`` with what is taken so far blanked out (line breaks, same length)
    for detector in detectors:
        if detector.kinds <= off or not detector.may_match_in(present):
            continue
        # A match that begins inside a taken span can run past it and hide a secret after it from
        # the detector (``password=`` in a <private> span, ``password=000000`` after it): the
        # others look at the masked text. A block (private, a key) looks at the text as it is.
        for _ in range(DETECTOR_ROUNDS):
            taken_before, passed_over = len(found), False
            for kind, start, end in detector.find(text if detector.covers_markers else masked):
                if kind in off:
                    continue
                if not detector.covers_markers and markers.overlaps(start, end):
                    continue
                if not taken.overlaps(start, end):
                    parts = [(start, end)]
                elif detector.covers_markers:
                    # A block with an earlier redaction inside it (a key with a <private> span in
                    # it, or its END line in one): the rest of the block is hidden around it. Left
                    # out, its BEGIN line alone would be found by a second pass.
                    parts = taken.gaps(start, end)
                else:
                    passed_over = True  # it may have hidden a match inside it from the detector
                    continue
                for part in parts:
                    taken.add(*part)
                    found.append(Redaction(kind, *part))
            if len(found) > taken_before:
                masked = _blank(text, found)
            # Again on the text blanked since, when this detector passed a match over: what a
            # second redact() would find in the markers' place, this one finds now.
            if not passed_over or len(found) == taken_before:
                break
    if not found:
        return text, []
    found.sort(key=lambda r: r.start)
    out, pos = [], 0
    for r in found:
        out.append(text[pos : r.start])
        out.append(marker(r.kind))
        pos = r.end
    out.append(text[pos:])
    return "".join(out), found


_NEEDLES: list = [None, ()]  # the detectors last asked about, and their needles


def present_needles(text: str, detectors: tuple[Detector, ...]) -> frozenset[tuple[bool, str]]:
    """The needles of ``detectors`` that ``text`` holds (``Detector.keys``), each looked for once:
    detectors share needles, and a test a needle costs far less in Python than one a detector."""
    if _NEEDLES[0] is not detectors:
        _NEEDLES[:] = [detectors, tuple(dict.fromkeys(key for d in detectors for key in sorted(d.keys)))]
    folded = text.casefold()
    return frozenset(key for key in _NEEDLES[1] if key[1] in (folded if key[0] else text))


def _blank(text: str, spans: Iterable[Redaction]) -> str:
    """``text`` with each span replaced by as many line breaks, where a secret's value stops."""
    out, pos = [], 0
    for r in sorted(spans, key=lambda r: r.start):
        out += [text[pos : r.start], "\n" * (r.end - r.start)]
        pos = r.end
    out.append(text[pos:])
    return "".join(out)


def redact_data(
    value: Any, *, extra_patterns: Sequence[str] = (), disabled: Collection[str] = ()
) -> tuple[Any, list[str]]:
    """Redact every string inside ``value`` (dicts, lists, tuples; dict keys are kept as they are).

    For note metadata. Returns the redacted copy and the kinds redacted (spans would be
    meaningless across several strings). Raises ``InvalidInputError`` (a ``ValueError``) for
    data nested deeper than ``MAX_DATA_DEPTH``.
    """
    kinds: list[str] = []
    strings: list[str] = []

    def walk(v: Any, depth: int, redacting: bool) -> Any:
        if isinstance(v, str):
            if not redacting:
                strings.append(v)
                return v
            new, found = redact(v, extra_patterns=extra_patterns, disabled=disabled)
            kinds.extend(r.kind for r in found)
            return new
        if isinstance(v, dict | list | tuple) and depth >= MAX_DATA_DEPTH:
            raise InvalidInputError(
                f"Metadata is nested deeper than {MAX_DATA_DEPTH} levels; flatten it (lists of plain values)."
            )
        if isinstance(v, dict):
            return {k: walk(x, depth + 1, redacting) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, depth + 1, redacting) for x in v]
        if isinstance(v, tuple):
            return tuple(walk(x, depth + 1, redacting) for x in v)
        return v

    copy = walk(value, 0, False)
    joined = "\n".join(strings)  # most metadata holds nothing any detector looks for: one check for all
    if not may_hold_secrets(joined, extra_patterns):
        return copy, kinds
    return walk(value, 0, True), kinds


def may_hold_secrets(text: str, extra_patterns: Sequence[str] = ()) -> bool:
    """False when no built-in detector can find anything in ``text`` (none of the literals each
    of their matches holds is there) and no pattern of the person's own is set."""
    if extra_patterns:
        return True
    present = present_needles(text, BUILTIN)
    return any(d.may_match_in(present) for d in BUILTIN)


def describe(redactions: Iterable[Redaction | str]) -> str:
    """``"2 secrets redacted: github-token, password"``; repeated kinds as ``"password x2"``.

    Accepts ``Redaction`` objects or kind names (what ``redact_data`` returns). Returns
    ``"no secrets redacted"`` for none.
    """
    kinds = [r if isinstance(r, str) else r.kind for r in redactions]
    if not kinds:
        return "no secrets redacted"
    counts = Counter(kinds)
    parts = [k if counts[k] == 1 else f"{k} x{counts[k]}" for k in dict.fromkeys(kinds)]
    return f"{len(kinds)} secret{'s' if len(kinds) != 1 else ''} redacted: {', '.join(parts)}"
