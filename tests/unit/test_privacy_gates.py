"""The privacy filter's needles: a detector is skipped when the text holds none of its literals,
and that must never change what is redacted. Each check compares ``redact`` with the needles
against ``redact`` with every detector run on every text."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spellbook.vault import privacy
from spellbook.vault.detectors import BUILTIN
from spellbook.vault.privacy import present_needles
from tests.helpers.secrets import CJK_SECRETS, ENTRIES, INNOCENT

UNGATED = tuple(dataclasses.replace(d, needles=()) for d in BUILTIN)


def ungated(text: str) -> tuple[str, list[privacy.Redaction]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(privacy, "BUILTIN", UNGATED)
        return privacy.redact(text)


def spellings(text: str) -> list[str]:
    """``text`` as written, and with the letters IGNORECASE patterns also match: upper and mixed
    case, the long s, the Kelvin sign, the dotless and dotted i."""
    return [
        text,
        text.upper(),
        text.swapcase(),
        text.title(),
        text.replace("s", "ſ"),
        text.replace("k", "\u212a"),
        text.replace("i", "ı"),
        text.replace("i", "İ"),
    ]


VALUE = "Xk9mPq2wZr7T"
KEYS = [  # a spelling of every key word the generic detectors know (assignment, flag, XML, prose)
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "db_pass",
    "x-pwd",
    "auth_token",
    "api_key",
    "apikey",
    "access.key",
    "app-key",
    "subscription_key",
    "secret",
    "secret_key",
    "private_key",
    "encryption-key",
    "signing_key",
    "master_key",
    "api key",
    "access key",
    "secret key",
]
GENERIC = [f"{key}{sep}{VALUE}" for key in KEYS for sep in ("=", ": ", " is ", " was set to ")]
GENERIC += [f"--{key} {VALUE}" for key in ("password", "pass", "token", "api-key", "apikey", "secret", "access-key")]
GENERIC += [f"<{key}>{VALUE}</{key}>" for key in ("password", "token", "api_key")]
TEXTS = [e["text"] for e in ENTRIES] + INNOCENT + [line for line, _ in CJK_SECRETS] + GENERIC


@pytest.mark.parametrize("text", [s for t in TEXTS for s in spellings(t)])
def test_needles_change_nothing_on_the_corpus(text: str) -> None:
    assert privacy.redact(text) == ungated(text)


def test_every_key_word_is_caught_in_some_line() -> None:
    """So that the lines above exercise the generic detectors, not only the comparison."""
    for key in KEYS:
        assert any(privacy.redact(line)[1] for line in GENERIC if line.startswith(key)), key


def test_every_corpus_secret_holds_a_needle_of_its_detector() -> None:
    """Each kind's detector, given a corpus text of that kind, is not skipped (else the corpus
    test would pass only through another detector)."""
    for entry in ENTRIES:
        text = entry["text"]
        detectors = [d for d in BUILTIN if entry["kind"] in d.kinds]
        assert any(d.may_match_in(present_needles(text, BUILTIN)) for d in detectors), entry


def test_needles_of_ignorecase_patterns_hold_no_i() -> None:
    """re matches "i" to "ı" and "İ", which casefold() keeps apart: a needle with an "i" could
    skip a text the pattern matches."""
    for detector in BUILTIN:
        if detector.folded:
            assert all(n == n.casefold() and "i" not in n for n in detector.needles), detector


def test_most_notes_skip_most_detectors() -> None:
    text = "Deployed the web app on Friday; the rollback script is in ops/rollback.sh. 배포는 금요일에 했다."
    ran = [d for d in BUILTIN if d.may_match_in(present_needles(text, BUILTIN))]
    assert len(ran) <= 1, [sorted(d.kinds) for d in ran]


FRAGMENTS = [
    "password",
    "PASSWORD",
    "paſſword",
    "pass",
    "pwd",
    "token",
    "\u212aey",
    "api_key",
    "secret",
    "Bearer ",
    "basıc ",
    "BASİC ",
    "Authorization: ",
    "=",
    ": ",
    " is ",
    "--password ",
    "<private>",
    "</private>",
    "postgres://u:",
    "@db",
    "AKIA",
    "ghp_",
    "sk-",
    "sk-ant-",
    "eyJ",
    "hf_",
    "xoxb-",
    "AIza",
    "npm_",
    "비밀번호: ",
    "トークン: ",
    "API키=",
    "Xk9mPq2wZr7T",
    "hunter2hunter2",
    "a1B2c3D4e5F6g7H8i9J0",
    " ",
    "\n",
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
@settings(max_examples=400, deadline=None)
def test_needles_change_nothing_on_generated_text(parts: list[str]) -> None:
    text = "".join(parts)
    assert privacy.redact(text) == ungated(text)


def ungated_data(value: object) -> tuple[object, list[str]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(privacy, "BUILTIN", UNGATED)
        return privacy.redact_data(value)


@given(st.lists(st.sampled_from(TEXTS[::3] + FRAGMENTS), max_size=6))
@settings(max_examples=200, deadline=None)
def test_metadata_is_checked_at_once_and_redacted_as_string_by_string(values: list[str]) -> None:
    meta = {"title": values[0] if values else "t", "tags": values[1:3], "extra": {"notes": values[3:]}}
    assert privacy.redact_data(meta) == ungated_data(meta)


def test_metadata_with_nothing_to_redact_comes_back_as_a_copy() -> None:
    meta = {"title": "Deploy notes", "tags": ["ops", "배포"], "links": [{"to": "x"}]}
    out, kinds = privacy.redact_data(meta)
    assert out == meta and kinds == [] and out is not meta and out["tags"] is not meta["tags"]
