"""Recall at a prompt: a hit's passage (the sentences that match, in any script), session events cut
into turn-sized chunks, what the UserPromptSubmit hook injects (the answering passage, nothing for an
unrelated prompt, within its budget, once each), its off switches, and install turning it on."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.engine.passages import passage, sentences
from spellbook.index.chunker import EVENT_CHARS, chunk_body
from spellbook.server.hub import Hub
from spellbook.sessions.capture import capture
from spellbook.sessions.quoting import TAG, estimate_tokens
from spellbook.sessions.recall import answers, prompt_context
from spellbook.sessions.transcript import read_transcript
from tests.helpers.processes import SPELLBOOK, child_env
from tests.helpers.sessions import make_transcript

FILLER = (
    "I read through the module and its tests first. The code is older than most of the project. "
    "Several helpers do the same thing in slightly different ways. "
) * 3
FACT = "The billing service listens on port 8443 on staging, behind the internal load balancer."
TASKS = [
    (
        "Set up the staging deploy for the billing service",
        "deploy/billing/values.yaml",
        FILLER + "\n\n" + FACT + " " + FILLER,
        "which port does billing listen on in staging",
    ),
    (
        "Find out why the nightly backup fails",
        "ops/backup.sh",
        FILLER + "\n\nThe backup failed because the bucket lifecycle rule deleted the lock object. " + FILLER,
        "what broke the nightly backup",
    ),
]


def test_the_passage_is_the_window_of_sentences_that_match_the_query() -> None:
    text = "## response · 10:00:00 · deploy\n\n" + FILLER + FACT + " Then I went home. " + FILLER
    got = passage(text, "which port does billing listen on in staging")
    assert FACT in got and len(got) <= 400 and got.startswith("… ") and got.endswith(" …")
    assert "response ·" not in got  # the heading is the hit's, not the passage's
    assert passage("## prompt · 1 · x\n\nshort turn", "x") == "short turn"  # short: the whole chunk
    turn = (
        "Joanna: "
        + "We walked along the river all afternoon. " * 6
        + "My brother adopted a puppy named Rex. "
        + "The weather was fine and we had pizza later. " * 4
    )
    assert passage(turn, "what is the name of the puppy").startswith("Joanna: … My brother adopted a puppy named Rex.")


def test_passages_in_japanese_and_korean_cut_at_their_sentence_ends() -> None:
    assert sentences("東京に行きました。桜が綺麗でした！また行きたい。") == [
        "東京に行きました。",
        "桜が綺麗でした！",
        "また行きたい。",
    ]
    assert sentences("서울에 갔어요. 날씨가 좋았어요!\n다음에 또 가요") == [
        "서울에 갔어요.",
        "날씨가 좋았어요!",
        "다음에 또 가요",
    ]
    ja = (
        "会議の議事録を整理しました。" * 12
        + "本番環境のデータベースは毎晩三時にバックアップされます。"
        + "昼食の話をしました。" * 12
    )
    got = passage(ja, "データベースのバックアップ")
    assert "本番環境のデータベースは毎晩三時にバックアップされます。" in got and len(got) < 200
    ko = (
        "회의록을 정리했습니다. " * 15
        + "운영 데이터베이스는 매일 밤 세 시에 백업됩니다. "
        + "점심 메뉴를 정했습니다. " * 15
    )
    assert "운영 데이터베이스는 매일 밤 세 시에 백업됩니다." in passage(ko, "데이터베이스 백업")


def test_a_long_session_event_is_cut_into_turn_sized_chunks_other_sections_are_not() -> None:
    answer = "\n\n".join(f"Paragraph {n}. " + "words of the answer go on. " * 12 for n in range(5))
    body = f"Session head.\n\n## response · 10:00:00 · deploy\n\n{answer}\n\n## Notes\n\n{answer}\n"
    chunks = chunk_body(body)
    events = [c for c in chunks if c.heading.startswith("response")]
    assert len(events) >= 3 and all(len(c.text) <= EVENT_CHARS for c in events)
    assert len([c for c in chunks if c.heading == "Notes"]) == 1  # a plain note keeps the usual size


@pytest.fixture(scope="module")
def recall_hub(tmp_path_factory: pytest.TempPathFactory):
    """Two captured sessions of project shop, embedded with the real multilingual model."""
    tmp = tmp_path_factory.mktemp("recall")
    vault = tmp / "vault"
    vault.mkdir()
    hub = Hub(Settings(vault=vault, embedder="use-m3", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    for seed, start in ((1, datetime(2026, 10, 1, 9, tzinfo=UTC)), (2, datetime(2026, 11, 2, 9, tzinfo=UTC))):
        file, _, kinds = make_transcript(tmp, str(tmp / "shop"), 8, seed=seed, start=start, tasks=TASKS)
        assert 0 in kinds
        capture(hub, read_transcript(file), tmp / "locks")
    yield hub
    hub.close()


def test_recall_hits_carry_passages_date_event_and_memorize_snippets_the_matching_sentences(recall_hub: Hub) -> None:
    found = recall_hub.call(
        "recall", {"query": "which port does billing listen on in staging", "limit": 8, "context": "shop"}
    )["results"]
    best = next(h for h in found if FACT in h["passage"])
    assert best["event"] == "response" and best["date"].startswith("2026-1") and best["session"]
    snippet = recall_hub.call("memorize", {"query": "which port does billing listen on in staging", "context": "shop"})[
        "results"
    ][0]["snippet"]
    assert "8443" in snippet  # an agent has the answer without get_memories


def test_a_prompt_gets_the_answering_passage_within_budget_once_each(recall_hub: Hub) -> None:
    text = prompt_context(recall_hub, "shop", "which port does billing listen on in staging", 0.3, 600)
    assert FACT in text and text.startswith(f"<{TAG}>") and text.endswith(" tokens)")
    assert estimate_tokens(text) <= 600
    lines = text.splitlines()
    said = [line for line in lines if line.startswith("  - ")]
    assert said and len(said) == len(set(said))  # the same passage once
    # Both sessions hold the same answer: it is given once, from the newer session, under its header.
    assert sum(FACT in line for line in said) == 1
    at = next(n for n, line in enumerate(lines) if FACT in line)
    header = next(line for line in reversed(lines[:at]) if line.startswith("- ["))
    assert "November 2026" in header and "; id " in header
    small = prompt_context(recall_hub, "shop", "which port does billing listen on in staging", 0.3, 150)
    assert small and estimate_tokens(small) <= 150


def test_an_unrelated_prompt_gets_nothing(recall_hub: Hub) -> None:
    for prompt in (
        "What's a good recipe for banana bread?",
        "Translate 'good morning' into French",
        "Explain what this regex does: ^\\d{3}-\\d{4}$",
    ):
        assert prompt_context(recall_hub, "shop", prompt, 0.3, 600) == "", prompt


def test_the_running_sessions_own_note_is_not_given_back(recall_hub: Hub) -> None:
    found = recall_hub.call("recall", {"query": "which port does billing listen on", "context": "shop"})["results"]
    sessions = {h["session"] for h in found if h.get("session")}
    text = prompt_context(
        recall_hub, "shop", "which port does billing listen on in staging", 0.3, 600, session_id=min(sessions)
    )
    assert FACT in text  # the other session still answers


def hook(vault: Path, payload: dict, flag: bool = True, **env: str) -> str:
    result = subprocess.run(
        [SPELLBOOK, "hook", "UserPromptSubmit", "--vault", str(vault)] + ["--prompt-recall"] * flag,
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
        check=False,
        env=child_env(SPELLBOOK_EMBEDDER="hashing", **env),
    )
    assert result.returncode == 0
    return result.stdout.decode()


def test_recall_is_switched_off_by_the_environment_or_for_one_session_by_a_prompt(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    subprocess.run(
        [SPELLBOOK, "init", str(vault)], env=child_env(SPELLBOOK_EMBEDDER="hashing"), check=True, capture_output=True
    )
    file, session_id, kinds = make_transcript(tmp_path, str(tmp_path / "shop"), 8, seed=1, tasks=TASKS)
    assert 0 in kinds  # the billing task is in it
    subprocess.run(
        [SPELLBOOK, "hook", "capture", "--vault", str(vault)],
        env=child_env(SPELLBOOK_EMBEDDER="hashing"),
        input=json.dumps({"session_id": session_id, "transcript_path": str(file)}).encode(),
        check=True,
        capture_output=True,
        timeout=120,
    )
    ask = {"session_id": "s1", "cwd": str(tmp_path / "shop"), "prompt": "billing service port 8443 staging"}
    assert "8443" in hook(vault, ask)
    assert hook(vault, ask, SPELLBOOK_RECALL="off") == ""
    assert hook(vault, ask, flag=False) == ""  # the flag is what turns it on ...
    assert "8443" in hook(vault, ask, flag=False, SPELLBOOK_RECALL="on")  # ... unless the environment says
    assert "8443" in hook(vault, ask, flag=False, SPELLBOOK_SESSION_PROMPT_RECALL="true")  # its longer name
    assert hook(vault, ask, SPELLBOOK_SESSION_PROMPT_RECALL="true", SPELLBOOK_RECALL="off") == ""
    assert "off for this session" in hook(vault, {**ask, "prompt": "#recall off"})
    assert hook(vault, ask) == ""  # remembered for s1 ...
    assert "8443" in hook(vault, {**ask, "session_id": "s2"})  # ... and only for s1
    assert "on for this session" in hook(vault, {**ask, "prompt": "#recall on"})
    assert "8443" in hook(vault, ask)


def test_install_hooks_turns_prompt_recall_on_unless_told_not_to(tmp_path: Path) -> None:
    """On by default: on a vault of coding sessions, 0 of 45 + 2 of 60 unrelated coding prompts get
    passages (bench/bench_hooks.py), under the 1 in 20 at which install may turn it on;
    --no-prompt-recall leaves it off, and installing again with it takes the hook away."""
    env = child_env(HOME=str(tmp_path), CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))
    for extra, expected in (([], True), (["--no-prompt-recall"], False), (["--prompt-recall"], True)):
        subprocess.run(
            [SPELLBOOK, "install", "claude-code", "--hooks", "--vault", str(tmp_path / "v"), *extra],
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        hooks = json.loads((tmp_path / "claude" / "settings.json").read_text())["hooks"]
        assert ("UserPromptSubmit" in hooks) is expected, extra
        if expected:
            assert hooks["UserPromptSubmit"][0]["hooks"][0]["command"].endswith("--prompt-recall")
        assert "SessionStart" in hooks and "SessionEnd" in hooks


def test_a_korean_prompt_gets_the_korean_passage_that_answers_it(tmp_path: Path) -> None:
    filler = "먼저 모듈과 테스트를 읽었습니다. 코드가 오래되어 비슷한 함수가 여러 개 있습니다. " * 4
    fact = "결제 서비스는 스테이징에서 8443 포트를 사용합니다."
    tasks = [
        (
            "결제 서비스의 스테이징 배포를 설정해 주세요",
            "deploy/billing/values.yaml",
            filler + "\n\n" + fact + " " + filler,
            "결제 서비스 스테이징 포트",
        )
    ]
    vault = tmp_path / "vault"
    vault.mkdir()
    hub = Hub(Settings(vault=vault, embedder="use-m3", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    try:
        file, _, kinds = make_transcript(tmp_path, str(tmp_path / "shop"), 6, seed=3, tasks=tasks)
        assert 0 in kinds
        capture(hub, read_transcript(file), tmp_path / "locks")
        text = prompt_context(hub, "shop", "결제 서비스는 스테이징에서 어떤 포트를 쓰나요?", 0.1, 600)
        assert fact in text and estimate_tokens(text) <= 600
        assert prompt_context(hub, "shop", "바나나 빵 만드는 법을 알려줘", 0.1, 600) == ""
    finally:
        hub.close()


def test_a_chunk_holding_none_of_the_query_words_gives_its_opening() -> None:
    text = "Short first. " + "The rest of a long note goes on here. " * 20
    got = passage(text, "zebra quantum")
    assert got.startswith("Short first. The rest") and got.endswith(" …") and 300 <= len(got) <= 362


class _Found:
    """A hub whose ``recall`` answers the hits given (what the index would rank), for the hook's choice."""

    def __init__(self, hits: list[dict]) -> None:
        self.hits = hits

    def call(self, method: str, params: dict) -> dict:
        assert method == "recall"
        return {"results": self.hits}


def _hit(n: int, event: str | None, text: str) -> dict:
    return {
        "id": f"s{n}",
        "path": f"sessions/shop/s{n}.md",
        "type": "session",
        "event": event,
        "score": 0.9,
        "meaning": 0.4,
        "passage": text,
        "date": "2026-11-02",
        "title": f"session {n}",
        "session": f"x{n}",
    }


def test_of_a_captured_session_only_what_was_said_is_given_not_its_digest_nor_its_file_lists() -> None:
    """A session's head (its digest, a summary of every exchange) and its tool sections (lists of files)
    were close in meaning to any coding prompt: on a vault of coding sessions they made 7 of 12 of the
    false injections bench_hooks counted."""
    digest = "- Outcome: Keys rotate every 90 days; the old key stays valid for 7 days so clients can switch over."
    tools = "- Read: shop/api/search/limits.py - Grep: limits.py - Edit: shop/api/search/limits.py"
    noise = _Found([_hit(1, None, digest), _hit(2, "tool", tools)])
    assert prompt_context(noise, "shop", "Add retries with exponential backoff to the HTTP client", 0.1) == ""
    said = _Found([_hit(1, None, digest), _hit(3, "response", FACT)])
    given = prompt_context(said, "shop", "which port does billing listen on in staging", 0.1)
    assert FACT in given and "Keys rotate" not in given


def test_the_bar_wants_a_passage_clearly_about_the_prompt_or_standing_out_from_the_rest() -> None:
    """ "Cache the results of the pricing lookup in Redis" on a vault of coding sessions: the best
    passage shares one word ("Redis") and is barely closer than average (meaning 0.003), and every
    passage is about as close as it: nothing (it used to pass on meaning > 0 alone)."""
    said = (
        "Search is limited to 30 requests per minute per token with a token bucket in Redis; 429 carries Retry-After."
    )
    other = "Local runs use docker compose up with the dev profile; the seed script loads 50 demo customers."

    def hit(text: str, meaning: float, relevance: float, similarity: float) -> dict:
        return {"passage": text, "meaning": meaning, "relevance": relevance, "similarity": similarity}

    flat = [hit(said, 0.003, 0.2, 0.46), *(hit(other, 0.0, 0.0, 0.45 - i / 1000) for i in range(8))]
    assert not answers(flat, "Cache the results of the pricing lookup in Redis")
    standing = [hit(said, 0.1, 0.2, 0.52), *(hit(other, 0.0, 0.0, 0.45 - i / 1000) for i in range(8))]
    assert answers(standing, "How is the search API rate limited?")  # 0.3, and 0.07 above the median
    clear = [hit(said, 0.2, 0.4, 0.47), *flat[1:]]
    assert answers(clear, "How is the search API rate limited?")  # 0.6: clearly about it
    assert not answers([hit("Run the unit tests", 0.4, 0.5, 0.6), *flat[1:]], "Add a unit test")  # too short


def _session_with_a_question(folder: Path) -> Path:
    """A coding session where the assistant asks which version to pin and the next prompt answers."""
    import random

    from tests.helpers.sessions import Entries

    entries = Entries(random.Random(7), "pin-session", str(folder / "shop"), datetime(2026, 11, 2, 9, tzinfo=UTC))
    said = [
        (
            "The CI build uses whatever Node the runner happens to have. Make it reproducible.",
            (
                "I added an .nvmrc file and the setup-node step of the workflow now reads it. "
                "Which Node version should the CI build pin?"
            ),
        ),
        ("Pin 20.11.1, the same as production runs.", "Done: .nvmrc holds 20.11.1 and the CI run passed."),
        ("Show me the current git status", "Two files changed: .nvmrc and .github/workflows/ci.yml."),
    ]
    for prompt, answer in said:
        entries.add({"type": "user", "message": {"role": "user", "content": prompt}})
        entries.add(
            {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]}}
        )
    return entries.write(folder / "pin-session.jsonl")


def test_a_passage_that_asks_a_question_carries_the_opening_of_the_reply(tmp_path: Path) -> None:
    """The prompt's words find the question ("Which Node version should the CI build pin?"); the
    answer is what was said next, in words the prompt does not use."""
    vault = tmp_path / "vault"
    vault.mkdir()
    hub = Hub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    try:
        capture(hub, read_transcript(_session_with_a_question(tmp_path)), tmp_path / "locks")
        found = hub.call(
            "recall", {"query": "which Node version does the CI build pin", "limit": 8, "context": "shop"}
        )["results"]
        asked = next(h for h in found if "Which Node version should the CI build pin?" in h["passage"])
        assert asked["event"] == "response"
        assert asked["reply"] == "Pin 20.11.1, the same as production runs."
        done = next(h for h in found if h["passage"].startswith("Done: .nvmrc"))
        assert "reply" not in done  # not a question: no reply
        text = prompt_context(hub, "shop", "which Node version does the CI build pin", 0.0, 600)
        assert "pin? → Pin 20.11.1" in text
    finally:
        hub.close()


def test_a_sessions_relative_dates_are_given_with_the_day_they_mean_a_memorys_are_not() -> None:
    said = "I raised the worker timeout from 30 s to 45 s yesterday, after the deploy of last Friday."
    memory = {**_hit(2, None, "Yesterday we agreed on the timeout."), "type": "note", "title": "timeouts"}
    said_hit = {**_hit(1, "response", said), "relevance": 0.3}  # clearly about the prompt (answers())
    given = prompt_context(_Found([said_hit, memory]), "shop", "when did the worker timeout change", 0.1)
    assert "45 s yesterday (1 November 2026), after the deploy of last Friday (30 October 2026)." in given
    assert "- [2 November 2026; id s1]\n  - response: I raised the worker timeout" in given
    assert "Yesterday we agreed on the timeout." in given  # a memory's date is its last change, not when it was said


def test_a_passage_already_given_within_another_is_not_given_again() -> None:
    """A question's line carries its reply: the reply's own hit, further down, adds nothing."""
    asked = {
        **_hit(1, "response", "Which Node version should the CI build pin?"),
        "reply": "Pin 20.11.1, the same as production runs.",
    }
    reply = {**_hit(1, "prompt", "Pin 20.11.1, the same as production runs."), "score": 0.8}
    given = prompt_context(_Found([asked, reply]), "shop", "which Node version does the CI build pin", 0.1)
    assert given.count("Pin 20.11.1") == 1 and "pin? → Pin 20.11.1" in given


def test_a_prompt_naming_a_day_gets_that_days_passages_first_and_the_day_counts_as_its_words() -> None:
    older = {**_hit(1, "response", "The worker timeout is 30 s, set in deploy/worker.yaml."), "date": "2026-10-01"}
    newer = {
        **_hit(2, "response", "I raised the worker timeout to 45 s after the load test."),
        "score": 0.5,
        "date": "2026-11-03",
    }
    prompt = "What did we do about the worker timeout on 3 November 2026?"
    given = prompt_context(_Found([older, newer]), "shop", prompt, 0.1, budget=132)
    assert "45 s" in given and "30 s" not in given  # room for one line: the named day's
    both = prompt_context(_Found([older, newer]), "shop", prompt, 0.1)
    assert both.index("45 s") < both.index("30 s")
    # "... yesterday" said on 4 November is about the 3rd: it counts as that day's too
    said = {
        **_hit(3, "response", "The worker timeout went up to 45 s yesterday, after the load test failed."),
        "score": 0.5,
        "date": "2026-11-04",
    }
    assert "45 s yesterday (3 November 2026)" in prompt_context(_Found([older, said]), "shop", prompt, 0.1, budget=132)
    # Found by words alone (meaning 0): the line's day holds "November 2026", so 4 of the 4 terms are there
    plain = {**newer, "meaning": 0.0, "passage": "I raised the worker timeout to 45 s."}
    assert "45 s" in prompt_context(_Found([plain]), "shop", "worker timeout November 2026", 0.1)


def test_the_bar_weighs_the_passage_found_not_the_reply_it_carries() -> None:
    """A short question ("Can you explain that diff?") is close to any coding prompt; its reply is long
    but was not what matched: with the reply counted, 2 more of 45 unrelated coding prompts got passages
    on bench_hooks' vault of coding sessions."""
    short = {
        **_hit(1, "prompt", "Can you explain that diff?"),
        "meaning": 0.2,
        "reply": "It renames the retry helper, moves the backoff constants into config.py and adds two tests.",
    }
    assert prompt_context(_Found([short]), "shop", "Fix the failing CI build on the main branch", 0.1) == ""


def test_a_reply_in_japanese_or_korean_is_cut_at_a_sentence_end_and_questions_end_in_either_mark() -> None:
    from spellbook.engine.passages import asks, opening

    ja = "デプロイは毎週木曜日です。ステージングで一日確認してから本番に出します。" * 6
    got = opening("## prompt · 10:00:00 · x\n\n" + ja)
    assert got.startswith("デプロイは毎週木曜日です。 ステージングで") and got.endswith("。 …") and len(got) < 120
    ko = "배포는 매주 목요일입니다. 스테이징에서 하루 확인한 뒤 운영에 냅니다. " * 6
    assert opening(ko).startswith("배포는 매주 목요일입니다. 스테이징에서 하루 확인한 뒤 운영에 냅니다.")
    assert asks("どのポートを使いますか？") and asks("어느 포트를 쓰나요?") and not asks("ポートは8443です。")


def test_passages_of_one_note_share_its_header_and_a_conversation_is_given_as_one_thread() -> None:
    """A reply given with its question is not given again; the reply's own hit adds only what was said
    after it, on the same line; a question found after its reply goes before it."""
    asked = {**_hit(1, "response", "Which Node version should the CI build pin?"), "reply": "Pin 20.11.1, like prod."}
    reply = {
        **_hit(1, "prompt", "Pin 20.11.1, like prod."),
        "score": 0.8,
        "reply": "Done: .nvmrc holds 20.11.1 and the CI run passed.",
    }
    other = {**_hit(1, "response", "The workflow caches node_modules by the lock file's hash."), "score": 0.7}
    memory = {**_hit(2, None, "CI runs on every push to main."), "type": "note", "title": "CI", "score": 0.6}
    given = prompt_context(_Found([asked, reply, other, memory]), "shop", "which Node version does the CI pin", 0.1)
    lines = given.splitlines()
    at = lines.index("- [2 November 2026; id s1]")
    assert lines[at + 1] == (
        "  - response: Which Node version should the CI build pin? → Pin 20.11.1, like prod. → "
        "Done: .nvmrc holds 20.11.1 and the CI run passed."
    )
    assert lines[at + 2] == "  - response: The workflow caches node_modules by the lock file's hash."
    assert lines[at + 3 : at + 5] == ["- [2 November 2026, CI; id s2]", "  - CI runs on every push to main."]
    assert given.count("Pin 20.11.1, like prod.") == 1
    # found the other way round: the reply first, then its question
    turned = prompt_context(_Found([reply, {**asked, "score": 0.5}]), "shop", "which Node version does the CI pin", 0.1)
    assert (
        "  - response: Which Node version should the CI build pin? → Pin 20.11.1, like prod. → Done: .nvmrc" in turned
    )
    # a short turn that opens another ("Thanks!") is not that turn: no thread across them
    asks = "Shall I also pin the npm version in the CI build, next to the Node one?"
    thanks = {**_hit(1, "response", asks), "reply": "Thanks!", "relevance": 0.3}
    other = {**_hit(1, "prompt", "Thanks! That settles the CI pin for now."), "score": 0.8, "reply": "Great."}
    threads = prompt_context(_Found([thanks, other]), "shop", "which Node version does the CI pin", 0.1)
    assert (
        "Node one? → Thanks!\n" in threads
        and "  - prompt: Thanks! That settles the CI pin for now. → Great." in threads
    )


def test_the_block_fills_its_budget_and_never_passes_it() -> None:
    hits = [
        {
            **_hit(n % 4, "response", f"Passage {n} says the worker timeout is {n} s in {'staging ' * (n % 7)}today."),
            "score": 1 - n / 100,
        }
        for n in range(40)
    ]
    for budget in (120, 200, 333, 600, 1000):
        given = prompt_context(_Found(hits), "shop", "what is the worker timeout", 0.1, budget)
        assert given and 0.85 * budget <= estimate_tokens(given) <= budget, budget  # filled, not passed
        given_lines = given.splitlines()
        headers = [line for line in given_lines if line.startswith("- [")]
        assert len(headers) == len(set(headers))  # a note's passages under its one header
        assert all(given_lines[n + 1].startswith("  - ") for n, line in enumerate(given_lines) if line in headers)


def test_a_passage_whose_session_matches_elsewhere_too_goes_first_among_equals() -> None:
    lone = {
        **_hit(1, "response", "The deploy of shop runs through ArgoCD since the spring, with one sync a day."),
        "score": 0.6,
        "relevance": 0.3,
    }
    backed = [
        {
            **_hit(2, "response", "The deploy of shop runs through a GitHub workflow now, on every merge to main."),
            "score": 0.6,
        },
        {**_hit(2, "prompt", "Move the shop deploy off ArgoCD."), "score": 0.4},
    ]
    given = prompt_context(_Found([lone, *backed]), "shop", "how does the shop deploy run", 0.1)
    assert given.index("GitHub workflow") < given.index("ArgoCD since")


def test_a_question_naming_someone_the_passages_quote_passes_the_bar() -> None:
    """On LoCoMo's conversations, questions such as "Which football club does John support?" found
    the answering turn but no passage clearly closer than the vault's turns are to each other: 51 of
    the 198 questions given nothing had their answer in the evidence turn. A question that names a
    speaker of the passages ("John: ..."), with the best of them standing out a little, passes; a
    name only mentioned does not (a coding vault names its tools everywhere), nor a task."""

    def hit(text: str, similarity: float, reply: str = "") -> dict:
        return {"passage": text, "meaning": 0.0, "relevance": 0.1, "similarity": similarity, "reply": reply}

    turns = [
        hit("Tim: Do you follow football?", 0.45, reply="John: Manchester City all the way, I never miss a match."),
        *(hit("Tim: We went hiking on the weekend and it rained.", 0.42 - i / 1000) for i in range(8)),
    ]
    assert answers(turns, "Which football club does John support?")  # the speaker of the reply
    assert answers(turns, "did Tim go hiking")  # a question without its mark
    assert not answers(turns, "Which football club does Sarah support?")  # nobody the passages quote
    assert not answers(turns, "Tell John's team about the match")  # not a question
    assert not answers(turns, "Does Manchester City play today?")  # named in a passage, not its speaker
    flat = [hit("Tim: Do you follow football?", 0.421, reply="John: Manchester City."), *turns[1:]]
    assert not answers(flat, "Which football club does John support?")  # nothing stands out
    code = [
        hit("We moved the React table to the shared grid component and it sorts on the server.", 0.46),
        *(hit("The build runs in CI on every push to main.", 0.42 - i / 1000) for i in range(8)),
    ]
    assert not answers(code, "How do I write a custom hook in React?")
    done = [hit("Done: the build is green again after the React upgrade.", 0.46), *code[1:]]
    assert not answers(done, "Done with the upgrade yet?")  # a prompt's first word is no name


def test_the_bar_weighs_a_passages_own_words_not_its_notes_title() -> None:
    """A hit's relevance counts its note's title and metadata, which every passage of a session
    shares; the bar counts the passage's own words and its heading (the prompt a response answers)."""
    text = "The migration adds the column with a default and backfills it in batches of 5000 rows."
    titled = {"passage": text, "meaning": 0.05, "relevance": 0.6, "similarity": 0.4, "heading": "response · 10:00"}
    others = [{"passage": "x " * 40, "meaning": 0.0, "relevance": 0.0, "similarity": 0.4 - i / 1000} for i in range(8)]
    assert not answers([titled, *others], "Make the React grid sortable by name")  # 0.6 came from the title
    headed = {**titled, "heading": "response · 10:00 · Make the React grid sortable by name"}
    assert answers([headed, *others], "Make the React grid sortable by name")  # the prompt it answers


def test_words_said_in_many_sessions_are_one_passage_so_the_answer_is_found(tmp_path: Path) -> None:
    """Twelve sessions open with the same prompt; one of them answers it. Recall gives the prompt
    once (its best copy), so the answer is among the passages rather than crowded out by copies."""
    import random

    from tests.helpers.sessions import Entries

    ask = "The checkout page times out under load; find out why"
    answer = "Under load the checkout timed out: the payment client opened a new TLS connection per request."
    vault = tmp_path / "vault"
    vault.mkdir()
    hub = Hub(Settings(vault=vault, embedder="hashing", watch=False), watch=False, warm_up=False)
    hub.start(background=False)
    try:
        for n in range(12):
            entries = Entries(
                random.Random(n), f"s{n}", str(tmp_path / "shop"), datetime(2026, 11, 2 + n, 9, tzinfo=UTC)
            )
            said = answer if n == 5 else "Done: the tests pass (42 passed)."
            for text, role in ((ask, "user"), (said, "assistant")):
                content = text if role == "user" else [{"type": "text", "text": text}]
                entries.add({"type": role, "message": {"role": role, "content": content}})
            capture(hub, read_transcript(entries.write(tmp_path / f"s{n}.jsonl")), tmp_path / "locks")
        query = "why does the checkout page time out under load"
        found = hub.call("recall", {"query": query, "limit": 4, "context": "shop"})["results"]
        passages = [h["passage"] for h in found]
        assert passages.count(ask) == 1 and len(passages) == len(set(passages))
        assert any(answer in p for p in passages)
    finally:
        hub.close()


def test_a_value_changed_later_is_marked_and_the_newer_note_goes_first() -> None:
    """Two sessions give the port: the older (found first) says 8000, the newer 8080. The newer goes
    first, and the older says that it changed, when and to what, even when the newer does not fit."""
    old = {
        **_hit(1, "response", "The shop API runs with docker compose up and listens on port 8000 locally."),
        "date": "2026-11-02",
    }
    new = {
        **_hit(2, "response", "The shop API now listens on port 8080 locally, because 8000 clashes with mkdocs."),
        "date": "2026-11-11",
        "score": 0.8,
    }
    dated = {
        **_hit(3, "response", "Deployed the shop API on 2 November 2026 at 10:00 after the tests passed."),
        "score": 0.7,
    }
    given = prompt_context(_Found([old, new, dated]), "shop", "which port does the shop API listen on", 0.1)
    assert given.index("port 8080") < given.index("port 8000 locally")
    assert "listens on port 8000 locally. (changed 2026-11-11: 8000 -> 8080, id s2)" in given
    assert "after the tests passed.\n" in given  # a date is not a value that changed
    # room for one line, the older (found first): it still says what the value became
    tight = prompt_context(_Found([old, new]), "shop", "which port does the shop API listen on", 0.1, 150)
    assert "port 8080 locally" not in tight and "8000 locally. (changed 2026-11-11: 8000 -> 8080, id s2)" in tight
