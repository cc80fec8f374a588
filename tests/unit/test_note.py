"""The note format contract: parse/render round trips, byte-exact bodies, kept keys."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from spellbook.vault.note import _yaml_field, content_version, parse_note, quote_number_ids, render_note
from spellbook.vault.plain_yaml import plain_field as _plain_field

META = {"id": "abc123", "title": "A title", "tags": ["x", "y/z"], "created": "2026-01-02T03:04:05+09:00"}

bodies = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=400
) | st.sampled_from(
    ["---\n", "---\nkey: value\n---\n", "```\n---\n```\n", "한국어 본문\n\n日本語の本文 🎉", "\r\nline\r\n", "...\n"]
)


@given(body=bodies)
@settings(max_examples=300, deadline=None)
def test_body_round_trips_byte_for_byte(body: str) -> None:
    parsed = parse_note(render_note(META, body))
    assert parsed.body == body
    assert parsed.meta == META
    assert parsed.problem is None


@given(body=bodies)
@settings(max_examples=100, deadline=None)
def test_rendering_is_deterministic_and_idempotent(body: str) -> None:
    text = render_note(META, body)
    assert render_note(META, body) == text
    parsed = parse_note(text)
    assert render_note(parsed.meta, parsed.body, original=parsed) == text


def test_new_note_layout_is_obsidian_style() -> None:
    text = render_note(META, "Body\n")
    assert text == (
        "---\nid: abc123\ntitle: A title\ntags:\n  - x\n  - y/z\ncreated: 2026-01-02T03:04:05+09:00\n---\nBody\n"
    )
    assert yaml.safe_load(text.split("---\n")[1])["tags"] == ["x", "y/z"]


def test_revising_keeps_a_persons_keys_and_formatting_in_place() -> None:
    original = (
        "---\n"
        "id: abc123\n"
        "title: Old\n"
        "aliases: [first, 'second one']   # my comment\n"
        "rating:    5\n"
        "tags:\n- a\n- b\n"
        "---\n"
        "Body\n"
    )
    parsed = parse_note(original)
    meta = {**parsed.meta, "title": "New", "importance": 4}
    out = render_note(meta, parsed.body, original=parsed)
    assert out == (
        "---\n"
        "id: abc123\n"
        "title: New\n"
        "aliases: [first, 'second one']   # my comment\n"
        "rating:    5\n"
        "tags:\n- a\n- b\n"
        "importance: 4\n"
        "---\n"
        "Body\n"
    )


def test_removing_a_key_leaves_the_rest() -> None:
    parsed = parse_note("---\nid: a\ntopic: t\nmine: 1\n---\nx")
    meta = {k: v for k, v in parsed.meta.items() if k != "topic"}
    assert render_note(meta, parsed.body, original=parsed, remove=("topic",)) == "---\nid: a\nmine: 1\n---\nx"


def test_bom_and_crlf_are_kept() -> None:
    original = "\ufeff---\r\nid: a\r\ntitle: T\r\n---\r\nLine one\r\nLine two\r\n"
    parsed = parse_note(original)
    assert parsed.bom and parsed.newline == "\r\n"
    assert parsed.meta == {"id": "a", "title": "T"}
    assert parsed.body == "Line one\r\nLine two\r\n"
    out = render_note({**parsed.meta, "topic": "x"}, parsed.body, original=parsed)
    assert out == "\ufeff---\r\nid: a\r\ntitle: T\r\ntopic: x\r\n---\r\nLine one\r\nLine two\r\n"


def test_no_frontmatter_means_whole_text_is_body() -> None:
    for text in ["# Just a note\n", "", "--- not a fence\n", "---\nno closing fence\n"]:
        parsed = parse_note(text)
        assert parsed.meta == {} and parsed.body == text and parsed.problem is None


def test_bad_frontmatter_is_reported_and_the_text_kept() -> None:
    bad_yaml = parse_note("---\ntitle: [unclosed\n---\nbody\n")
    assert bad_yaml.problem and "malformed YAML" in bad_yaml.problem
    assert bad_yaml.body.endswith("body\n") and bad_yaml.meta == {}
    not_mapping = parse_note("---\n- a\n- b\n---\nbody\n")
    assert not_mapping.problem and "not a mapping" in not_mapping.problem


def test_dates_parse_to_iso_strings() -> None:
    parsed = parse_note("---\ncreated: 2026-01-02\nupdated: 2026-01-02T03:04:05+00:00\n---\n")
    assert parsed.meta == {"created": "2026-01-02", "updated": "2026-01-02T03:04:05+00:00"}


def test_version_is_a_hash_of_the_exact_bytes() -> None:
    assert content_version("a") == content_version(b"a") != content_version("a\n")


# --- the dumper's fast path: the same bytes as PyYAML's emitter -------------------------------

PIECES = [
    "a",
    "Z",
    "7",
    "0",
    "한국어",
    "ひらがな",
    "カタ",
    "漢字",
    "é",
    "ß",
    "²",
    " ",
    "  ",
    "_",
    ".",
    ",",
    "-",
    "(",
    ")",
    "/",
    "'",
    ":",
    ": ",
    " #",
    "#",
    '"',
    "[",
    "]",
    "{",
    "}",
    "!",
    "&",
    "*",
    "?",
    "|",
    ">",
    "%",
    "@",
    "`",
    "\t",
    "\n",
    "yes",
    "No",
    "NULL",
    "true",
    "off",
    "~",
    "=",
    "<<",
    "1e3",
    "0x1F",
    "1_000",
    ".5",
    "12",
    "2024-01-02",
    "T10:00:00",
    "+09:00",
    "\u00a0",
    "\ufeff",
    "\u3099",
    "\u2028",
]


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join))
@settings(max_examples=2000, deadline=None)
def test_plain_strings_are_written_as_the_yaml_emitter_writes_them(value: str) -> None:
    for field in (value, [value, "b"]):
        fast = _plain_field("title", field)
        if fast is not None:
            assert fast == _yaml_field("title", field)


@pytest.mark.parametrize(
    "key, value",
    [
        ("title", "Deploy notes, v2 (prod)"),
        ("title", "배포 메모"),
        ("title", "デプロイ手順"),
        ("tags", ["ops", "배포"]),
        ("importance", 7),
        ("pinned", True),
        ("created", "2026-11-24T14:45:21+00:00"),
        ("id", "d8273e2f4a7c0a59"),
        ("title", "O'Brien's notes"),
    ],
)
def test_common_fields_take_the_fast_path(key: str, value: object) -> None:
    assert _plain_field(key, value) == _yaml_field(key, value)


@pytest.mark.parametrize(
    "key, value",
    [
        ("title", "yes"),
        ("title", "12"),
        ("title", "a: b"),
        ("title", "x #y"),
        ("title", ""),
        ("title", "[[Link]]"),
        ("title", "two\nlines"),
        ("tags", []),
        ("tags", ["a", 1]),
        ("ratio", 0.5),
        ("on", "x"),
        ("meta", {"a": 1}),
        ("title", "2024-13-45"),
        ("title", "trailing "),
    ],
)
def test_everything_else_goes_through_pyyaml(key: str, value: object) -> None:
    assert _plain_field(key, value) is None


def test_the_plain_character_check_is_the_per_character_test_on_every_code_point() -> None:
    """``_plain_str`` checks characters with one regex (``\\w`` and a few marks): on every code point
    it says what ``c.isalnum() or c in _PLAIN_PUNCTUATION`` says."""
    from spellbook.vault.plain_yaml import _PLAIN_CHARS, _PLAIN_PUNCTUATION

    differ = [
        hex(i)
        for i in range(0x110000)
        if (chr(i).isalnum() or chr(i) in _PLAIN_PUNCTUATION) != (_PLAIN_CHARS.fullmatch(chr(i)) is not None)
    ]
    assert differ == []


@given(st.lists(st.sampled_from(PIECES), max_size=5).map("".join))
@settings(max_examples=2000, deadline=None)
def test_the_resolver_shortcut_answers_as_the_resolver(value: str) -> None:
    from spellbook.vault.plain_yaml import _RESOLVER, _resolves_to_str

    assert _resolves_to_str(value) == (
        _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == "tag:yaml.org,2002:str"
    )


KEYS = [
    "id",
    "title",
    "tags",
    "created",
    "importance",
    "x1",
    "yes",
    "null",
    "On",
    "y",
    "a b",
    "key-x",
    "한글",
    "_k",
    "",
]
SCALARS = (
    st.sampled_from(PIECES)
    | st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join)
    | st.sampled_from(
        [
            "7",
            "0",
            "-3",
            "007",
            "010",
            "0_7",
            "1_000",
            "-0",
            "+5",
            "1.5",
            "2026-01-02",
            "2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05.1234567+09:00",
            "2026-13-01",
            "2026-02-30T01:02:03Z",
            "2026-1-2",
            "12:30",
            "true",
            "false",
            "True",
            "TRUE",
            "한국어 제목",
            "٣٤",
            "２０２６-01-02",
            "plain words, (v2)",
            "it's",
        ]
    )
)
LINES = st.one_of(
    st.tuples(st.sampled_from(KEYS), SCALARS).map(lambda kv: f"{kv[0]}: {kv[1]}\n"),
    st.tuples(st.sampled_from(KEYS), st.lists(SCALARS, max_size=3)).map(
        lambda kv: f"{kv[0]}:\n" + "".join(f"  - {v}\n" for v in kv[1])
    ),
    st.sampled_from(["# a comment\n", "\n", "title:  two spaces\n", "- x\n", "    - deep\n", "id: x\r\n", "k: v"]),
)


@given(st.lists(LINES, min_size=1, max_size=6).map("".join))
@settings(max_examples=3000, deadline=None)
def test_plain_frontmatter_is_read_as_pyyaml_reads_it(raw: str) -> None:
    """The loader's fast path (plain_yaml.read_plain) gives what PyYAML gives, value and type,
    or steps aside; parse_note's answer (meta, problem) is the same either way."""
    from spellbook.vault import note

    fast = note.read_plain(raw)
    if fast is not None:
        assert _typed(fast) == _typed(yaml.safe_load(raw))
    text = f"---\n{raw}---\nbody\n"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(note, "read_plain", lambda raw: None)
        slow = parse_note(text)
    got = parse_note(text)
    assert (_typed(got.meta), got.problem, got.body) == (_typed(slow.meta), slow.problem, slow.body)


def test_what_spellbook_writes_takes_the_fast_path() -> None:
    from spellbook.vault.plain_yaml import read_plain

    meta = {
        "id": "d8273e2f4a7c0a59",
        "title": "발효 시간, 된장찌개 교훈",
        "category": "bench",
        "tags": ["cooking", "ko"],
        "importance": 3,
        "pinned": True,
        "created": "2026-11-24T14:45:21+00:00",
        "updated": "2026-11-24",
    }
    text = render_note(meta, "body\n")
    assert read_plain(text.split("---\n")[1]) is not None
    assert parse_note(text).meta == meta


# --- YAML 1.2 readers (Obsidian, js-yaml, ruamel.yaml) read what Spellbook writes as written --------

NUMBERISH = st.lists(st.sampled_from(list("0179eE.-+oxbaf")), min_size=1, max_size=10).map("".join)
# (no "_": ruamel.yaml takes "-_" for an integer and fails to build it; 1_000 is in the examples)


def _read_as_yaml_1_2(text: str) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text[4 : text.index("\n---\n", 3) + 1])


@pytest.mark.parametrize("value", ["123e4567", "12E45678", "1e-5", "1.", "0o17", "1789982980889920", "0x1f", "1_000"])
def test_an_id_that_yaml_1_2_reads_as_a_number_is_written_quoted(value: str) -> None:
    """A random hex id can look like 123e4567: YAML 1.1 (PyYAML) reads that as a string, YAML 1.2
    (Obsidian) as a number (Infinity), which a property edit there writes back over the id."""
    text = render_note({"id": value, "merged_into": value, "tags": [value]}, "body\n")
    assert f"id: '{value}'\n" in text
    assert _read_as_yaml_1_2(text) == {"id": value, "merged_into": value, "tags": [value]}
    assert parse_note(text).meta == {"id": value, "merged_into": value, "tags": [value]}


@given(NUMBERISH)
@settings(max_examples=2000, deadline=None)
def test_strings_come_back_strings_under_yaml_1_1_and_1_2(value: str) -> None:
    meta = {"id": value, "tags": [value, "b"]}
    text = render_note(meta, "body\n")
    assert parse_note(text).meta == meta
    assert _typed(_read_as_yaml_1_2(text)) == _typed(meta)


def test_a_hand_written_plain_number_like_value_still_reads_as_the_string_it_was() -> None:
    """Reading stays YAML 1.1: an id written unquoted by an older Spellbook is the same id."""
    assert parse_note("---\nid: 123e4567\ntitle: t\n---\nbody\n").meta == {"id": "123e4567", "title": "t"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("---\nid: 123e4567\ntitle: T  # c\n---\nbody\n", "---\nid: '123e4567'\ntitle: T  # c\n---\nbody\n"),
        (
            "\ufeff---\r\nid: 12E45 # kept\r\nmerged_into: 1e5\r\n# a comment\r\n---\r\nb\r\n",
            "\ufeff---\r\nid: '12E45' # kept\r\nmerged_into: '1e5'\r\n# a comment\r\n---\r\nb\r\n",
        ),
        ("---\nid: '123e4567'\n---\nbody\n", None),  # quoted already
        ("---\nid: abc123\n---\nbody\n", None),  # a string under YAML 1.2 too
        ("---\ntitle: 1e5\n---\nbody\n", None),  # not an id: a person's value, theirs to keep
        ("---\nid: 123e4567\n", None),  # no closing fence: no frontmatter
        ("# no frontmatter\nid: 1e5\n", None),
    ],
)
def test_an_old_unquoted_number_like_id_is_quoted_and_nothing_else_changes(text: str, expected: str | None) -> None:
    out = quote_number_ids(text)
    assert out == expected
    if out is not None:
        assert parse_note(out).meta == parse_note(text).meta
        assert quote_number_ids(out) is None


def _typed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value).__name__, value
