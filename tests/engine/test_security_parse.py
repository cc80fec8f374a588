"""Hostile notes and imports (docs/security.md): parsing budgets, never a crash, never slow.

Every attack runs in a child process with a time limit, so a hang fails the test instead of
hanging the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spellbook.vault.note import MAX_ALIASES, MAX_DEPTH, MAX_FRONTMATTER_BYTES, parse_note
from tests.helpers.processes import ROOT, child_env


def laughs(levels: int = 7) -> str:
    """The "billion laughs" alias bomb: 9 ** levels strings from a few hundred bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        name, prev = chr(ord("a") + i), chr(ord("a") + i - 1)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "---\n" + "\n".join(lines) + "\n---\nthe laughs body\n"


ATTACKS = {
    "nested-600": ("---\ntitle: x\nx: " + "[" * 600 + "]" * 600 + "\n---\nthe deep body\n", "nested deeper"),
    "nested-mapping": ("---\n" + "".join(" " * i + f"k{i}:\n" for i in range(200)) + "---\nbody\n", "nested deeper"),
    "laughs": (laughs(7), "once aliases are expanded"),
    "merge-laughs": (
        laughs(5).replace("\n---\n", "\nz:\n  <<: [*a, *b, *c, *d, *e]\n---\n", 1),
        "aliases are expanded",
    ),
    "cycle": ("---\nx: &a [1, *a]\n---\nbody\n", "refers to the value that contains it"),
    "many-aliases": ("---\na: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n---\nbody\n", "aliases"),
    "huge-3.8MB": (
        "---\n" + "".join(f"k{i}: [" + ",".join(["v"] * 20) + "]\n" for i in range(90_000)) + "---\nbody\n",
        "over 32 KB",
    ),
}


def _parse_in_child(text: str, tmp_path: Path, timeout: float = 20) -> dict:
    note = tmp_path / "hostile.md"
    note.write_text(text, encoding="utf-8")
    code = textwrap.dedent(
        """
        import json, sys, time
        from spellbook.vault.note import parse_note
        text = open(sys.argv[1], encoding="utf-8").read()
        started = time.monotonic()
        p = parse_note(text)
        print(json.dumps({"seconds": time.monotonic() - started, "problem": p.problem,
                          "meta": p.meta, "body_is_text": p.body == text}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(note)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_hostile_note_is_plain_text_with_a_problem_and_fast(name: str, tmp_path: Path) -> None:
    text, reason = ATTACKS[name]
    out = _parse_in_child(text, tmp_path)
    assert out["problem"] is not None and reason in out["problem"], out["problem"]
    assert "parsing budget" in out["problem"]
    assert out["meta"] == {} and out["body_is_text"]
    assert out["seconds"] < 2, out


def test_frontmatter_within_the_budgets_still_parses() -> None:
    deep = "x: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "\n"
    aliases = "a: &a [1, 2]\nb: [" + ", ".join(["*a"] * MAX_ALIASES) + "]\n"
    big = "title: big\nnotes: " + "w" * (MAX_FRONTMATTER_BYTES - 100) + "\n"
    for raw in (deep, aliases, big):
        parsed = parse_note(f"---\n{raw}---\nbody\n")
        assert parsed.problem is None and parsed.meta and parsed.body == "body\n"
    assert parse_note(f"---\n{aliases}---\n").meta["b"][MAX_ALIASES - 1] == [1, 2]


def test_yaml_that_trips_pyyaml_itself_is_a_problem_not_a_crash() -> None:
    """``!!timestamp x`` raised AttributeError inside PyYAML (found by the fuzz test below)."""
    parsed = parse_note("---\nwhen: !!timestamp not-a-date\n---\nbody\n")
    assert parsed.meta == {} and parsed.problem.startswith("malformed YAML frontmatter")


def test_odd_yaml_types_become_plain_values() -> None:
    parsed = parse_note("---\nb: !!binary aGVsbG8=\ns: !!set {x, y}\np: !!omap [{a: 1}]\n---\n")
    assert parsed.meta == {"b": "hello", "s": ["x", "y"], "p": [["a", 1]]}
    json.dumps(parsed.meta)  # what the catalog and the tools do with it


ENGINE_SCRIPT = """
import json, sys, time
from pathlib import Path
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine

vault = Path(sys.argv[1])
times, out = {}, {}
def timed(name, call):
    started = time.monotonic()
    result = call()
    times[name] = round(time.monotonic() - started, 3)
    return result

engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
timed("start", engine.start)
try:
    timed("rebuild_index", engine.rebuild_index)
    stats = timed("stats", engine.stats)
    out["problems"] = {p["path"]: p["problem"] for p in stats["problems"]}
    hits = timed("search", lambda: engine.memorize("laughs body", mode="keyword", limit=10))
    out["hit_paths"] = sorted(h["path"] for h in hits["results"])
    ids = [h["id"] for h in hits["results"] if h["path"] in ("good.md", "laughs.md", "nested-600.md")]
    got = timed("get_memories", lambda: engine.get_memories(ids))
    out["got"] = len(got["memories"])
    timed("scribe", lambda: engine.scribe("a new note written next to hostile ones", title="Fresh"))
finally:
    engine.close()
print(json.dumps({"times": times, **out}))
"""


def test_hostile_notes_never_stop_the_index(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in ("nested-600", "laughs", "cycle", "huge-3.8MB"):
        (vault / f"{name}.md").write_text(ATTACKS[name][0], encoding="utf-8")
    (vault / "good.md").write_text("---\ntitle: Good\ntags: [ok]\n---\nthe laughs body of a good note\n")
    done = subprocess.run(
        [sys.executable, "-c", ENGINE_SCRIPT, str(vault)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(out["problems"]) == {"nested-600.md", "laughs.md", "cycle.md", "huge-3.8MB.md"}
    assert all("parsing budget" in p for p in out["problems"].values())
    assert {"good.md", "laughs.md"} <= set(out["hit_paths"])  # the hostile note is indexed as plain text
    assert out["got"] == len(set(out["hit_paths"]) - {"huge-3.8MB.md", "cycle.md"})
    slow = {k: v for k, v in out["times"].items() if k not in ("start", "rebuild_index") and v > 5}
    assert not slow, out["times"]


# --- imports -------------------------------------------------------------------------------------

IMPORT_SCRIPT = """
import json, resource, sys, tempfile
from pathlib import Path
from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine
from spellbook.errors import InvalidInputError

vault = Path(tempfile.mkdtemp()) / "vault"
vault.mkdir()
engine = Engine(Settings(vault=vault, embedder="hashing", watch=False), embedder=HashingEmbedder())
engine.start()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    engine.import_memories(sys.argv[1])
    error = None
except InvalidInputError as exc:
    error = str(exc)
finally:
    engine.close()
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
print(json.dumps({"error": error, "grown_mb": grown}))
"""


def _import_in_child(file: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_SCRIPT, str(file)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_import_of_millions_of_empty_entries_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """7.5 MB of 2.5 M ``{}`` entries: the old reader built them all (peak +470 MB, 19 s)."""
    from spellbook.engine.formats.spellbook_export import MAX_IMPORT_ENTRIES

    file = tmp_path / "empty.json"
    file.write_text('{"spellbook_export": 1, "memories": [' + ",".join(["{}"] * 2_500_000) + "]}")
    out = _import_in_child(file)
    assert f"more than {MAX_IMPORT_ENTRIES:,} memories" in out["error"]
    assert out["grown_mb"] < 120, out


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"spellbook_export": 1, "memories": [' + "[" * 200_000 + "]" * 200_000 + "]}", "nested deeper than 32"),
        ("[" * 200_000 + "]" * 200_000, "nested deeper than 32"),
        (
            '{"type": "entity", "name": "a", "entityType": "x", "observations": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "line 1: nested deeper",
        ),
        (
            '{"spellbook_export": 1, "memories": [{"id": "a", "path": "a.md", "body": "", "metadata": {"x": '
            + "[" * 40
            + "]" * 40
            + "}}]}",
            "metadata is nested deeper than 32",
        ),
        ('{"type": "relation", "from": "a", "to": "b", "relationType": "r"}\n' * 100_001, "more than 100,000 lines"),
    ],
    ids=["deep-export", "deep-top", "deep-jsonl", "deep-metadata", "many-lines"],
)
def test_hostile_imports_are_refused_with_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "hostile.json"
    file.write_text(content)
    out = _import_in_child(file)
    assert out["error"] and message in out["error"], out


def test_an_import_keeps_secrets_out_of_ids_paths_and_titles(engine, vault: Path, tmp_path: Path) -> None:
    ghp = "ghp_" + "Ab1Cd2" * 6
    entry = {"id": f"id-{ghp}", "path": f"ops/token {ghp}.md", "title": f"token {ghp}", "metadata": {}, "body": "b\n"}
    file = tmp_path / "secret.json"
    file.write_text(json.dumps({"spellbook_export": 1, "memories": [entry]}))
    out = engine.import_memories(str(file))
    assert ghp not in json.dumps(out)
    files = [p.relative_to(vault).as_posix() for p in vault.rglob("*.md")]
    assert files == ["ops/token REDACTED-github-token.md"]
    text = (vault / files[0]).read_text()
    assert ghp not in text and "id: id-[REDACTED:github-token]" in text
    assert "github-token" in out["redacted"]


# --- fuzzing: arbitrary input never raises and never takes long ----------------------------------

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spellbook.vault.privacy import redact, redact_data

# Inputs reach about 200 KB (a huge scalar) and 60 KB (YAML). Each call is timed by the test itself
# (generously, for a shared 2-core machine); Hypothesis' own deadline is off because its first-call
# timing includes imports and warm-up.
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
CALL_SECONDS = 1.0

YAML_BITS = [
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "- ",
    "\n",
    "  ",
    "\t",
    "&a ",
    "&b ",
    "*a",
    "*b",
    "<<: ",
    "? ",
    "|\n",
    ">-\n",
    "'",
    '"',
    "#",
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!python/object ",
    "!!timestamp ",
    "!!int ",
    "!!float ",
    "2026-02-30",
    "2026-01-02T03:04:05+09:00",
    "1e999",
    "0x1F",
    "0o17",
    "~",
    "null",
    "yes",
    "1_000",
    ".inf",
    ".nan",
    "9" * 5000,
    "key",
    "title",
    "tags",
    "id",
    "한국어",
    "日本語",
    "\\u0000",
    "\r\n",
    "---",
    "...",
    "%YAML 1.1\n",
]
yamlish = st.lists(st.sampled_from(YAML_BITS) | st.text(max_size=20), max_size=300).map("".join)


def _bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


frontmatters = st.one_of(
    yamlish,
    st.integers(0, 3000).map(lambda n: "x: " + "[" * n + "]" * n + "\n"),
    st.integers(0, 3000).map(lambda n: "x: " + "{a: " * n + "1" + "}" * n + "\n"),
    st.integers(0, 300).map(lambda n: "".join(" " * i + f"k{i}:\n" for i in range(n)) + " " * n + "v\n"),
    st.tuples(st.integers(1, 12), st.integers(1, 12)).map(lambda lw: _bomb(*lw)),
    st.integers(0, 200_000).map(lambda n: "x: " + "a" * n + "\n"),
    st.integers(0, 20_000).map(lambda n: "x: [" + ", ".join(["v"] * n) + "]\n"),
)


def _timed(call, *args):
    import time

    for attempt in range(2):  # once more if over: a busy machine can stall one call, a slow input stalls both
        started = time.perf_counter()
        result = call(*args)
        elapsed = time.perf_counter() - started
        if elapsed < CALL_SECONDS:
            return result
    raise AssertionError(f"{elapsed:.2f} s, twice over {CALL_SECONDS} s")


def _check_parsed(text: str) -> None:
    parsed = _timed(parse_note, text)
    json.dumps(parsed.meta)  # plain values only: what the catalog stores and the tools return
    redact_data(parsed.meta)  # never deeper than the privacy filter walks
    if parsed.problem is not None:
        assert parsed.meta == {} and parsed.body == text.removeprefix("\ufeff")


@FUZZ
@given(text=st.text(max_size=4000))
def test_fuzz_parse_note_on_arbitrary_text(text: str) -> None:
    _check_parsed(text)
    _check_parsed("---\n" + text + "\n---\nbody")


@FUZZ
@given(front=frontmatters, newline=st.sampled_from(["\n", "\r\n"]))
def test_fuzz_parse_note_on_yamlish_frontmatter(front: str, newline: str) -> None:
    _check_parsed(f"---{newline}{front}{newline}---{newline}the body{newline}")


PRIVACY_BITS = [
    "<private>",
    "</private>",
    "< private >",
    "</ private>",
    "<PRIVATE",
    "<private a='1'>",
    "<",
    ">",
    "/",
    "private",
    "\n\n",
    "\n",
    " ",
    "password=",
    "password: ",
    "--token ",
    "<password>",
    "</password>",
    "비밀번호: ",
    "비밀번호는 ",
    "パスワードは「",
    "」",
    "暗証番号: ",
    "API 키: ",
    "ghp_",
    "sk-",
    "AKIA",
    "eyJ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "Bearer ",
    "Authorization: ",
    "://",
    "a:b@",
    "[REDACTED:jwt]",
    "${",
    "}",
    "'",
    '"',
    "Xk9mPq2wZ7",
    "a" * 300,
    "1" * 300,
    "-" * 300,
    "\\n",
]


@FUZZ
@given(
    parts=st.lists(st.sampled_from(PRIVACY_BITS) | st.text(max_size=30), max_size=200),
    repeat=st.integers(1, 200),
)
def test_fuzz_redact_on_arbitrary_text_with_partial_tags(parts: list[str], repeat: int) -> None:
    text = ("".join(parts) * repeat)[:50_000]
    out, found = _timed(redact, text)
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert redact(out)[0] == out  # idempotent: nothing left to find, markers are never matched again


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(parts=st.lists(st.sampled_from(PRIVACY_BITS) | st.text(max_size=30), max_size=40), repeat=st.integers(1, 4))
def test_redact_leaves_nothing_for_a_second_pass(parts: list[str], repeat: int) -> None:
    """Many short mixtures (~4 s): where the test above, at its size, found a secret left for a
    second pass once in a few runs (a key cut by a <private> span, a key in one with its value
    after it, a value passed over holding the next key), this one finds such a case in about half
    of its runs against the code before those fixes."""
    out, found = redact("".join(parts) * repeat)
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert redact(out) == (out, [])


def test_budgets_hold_without_libyaml(tmp_path: Path) -> None:
    """PyYAML built without libyaml: the pure-Python parser under the same counting composer."""
    code = textwrap.dedent(
        """
        import json, sys
        sys.modules["yaml._yaml"] = None  # as if PyYAML had no C extension
        import yaml
        assert not yaml.__with_libyaml__
        from spellbook.vault.note import parse_note
        cases = json.loads(sys.stdin.read())
        print(json.dumps([parse_note(text).problem for text in cases]))
        """
    )
    cases = [ATTACKS[name][0] for name in ("nested-600", "laughs", "cycle")] + [
        "---\ntitle: ok\ntags: [a]\n---\nbody\n"
    ]
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    problems = json.loads(done.stdout)
    assert all("parsing budget" in p for p in problems[:3]) and problems[3] is None


def test_frontmatter_that_could_not_be_read_back_is_never_written() -> None:
    """Imported metadata (32 levels, the metadata object being 1) and every other write go through here."""
    from spellbook.errors import InvalidInputError
    from spellbook.vault.note import render_note

    deep: list = ["x"]
    for _ in range(MAX_DEPTH - 2):
        deep = [deep]
    text = render_note({"title": "ok", "extra": deep}, "body\n")
    assert parse_note(text).meta["extra"] == deep  # the deepest a note can hold, read back
    with pytest.raises(InvalidInputError, match="nested deeper than 31 levels"):
        render_note({"title": "too deep", "extra": [deep]}, "body\n")
