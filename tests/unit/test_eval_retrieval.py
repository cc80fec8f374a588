"""The retrieval benchmark's own logic: how a conversational note is stored, and how the
per-conversation results add up. (The data sets are read at run time; none of their text is here.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "eval_retrieval", Path(__file__).resolve().parents[2] / "bench" / "eval_retrieval.py"
)
er = importlib.util.module_from_spec(_SPEC)
sys.modules["eval_retrieval"] = er  # dataclasses look their module up while the file runs
_SPEC.loader.exec_module(er)


def _turn(text: str, session: int, when: str = "9:00 am on 14 March, 2026") -> dict:
    return {"text": text, "meta": {"session": session, "dia_id": f"D{session}:x", "session_date_time": when}}


def test_stored_text_quotes_the_previous_turn_of_the_same_session_only():
    previous: dict = {}
    first = er.stored_text(_turn("Mina: Two hives now.", 1), previous, context=True, dates=False)
    second = er.stored_text(_turn("Tomas: Lovely.", 1), previous, context=True, dates=False)
    other = er.stored_text(_turn("Tomas: Hello again.", 2), previous, context=True, dates=False)
    assert first == "Mina: Two hives now."
    assert second == "Tomas: Lovely.\n\n> Mina: Two hives now."
    assert other == "Tomas: Hello again."  # a new session starts without a quote


def test_stored_text_adds_the_day_in_words_and_leaves_other_notes_alone():
    previous: dict = {}
    assert er.stored_text(_turn("Mina: Hi.", 1), previous, context=False, dates=True) == "Mina: Hi.\n\n(14 March, 2026)"
    plain = {"text": "A paragraph.", "meta": {"title": "T"}}
    assert er.stored_text(plain, previous, context=True, dates=True) == "A paragraph."


def _result(ranks: list, latencies: list, scribe: list) -> dict:
    mr = er.ModeResult("hybrid")
    for (cat, rank), latency in zip(ranks, latencies):
        ranked = [f"n{i}" for i in range(1, 11)]
        mr.add({"id": "q", "q": "q", "category": cat, "relevant": [f"n{rank}" if rank else "none"]}, ranked, latency)
    return {
        "source": "/x/dev_conv.jsonl.gz",
        "notes": 3,
        "queries": len(ranks),
        "load": {"scribe_ms": scribe},
        "modes": {"hybrid": mr.summary()},
    }


def test_combine_counts_every_query_once_across_stores():
    a = _result([(1, 1), (2, None)], [10.0, 30.0], [5.0])
    b = _result([(1, 7), (1, 3)], [20.0, 40.0], [15.0])
    c = er.combine([a, b])
    h = c["modes"]["hybrid"]
    assert c["queries"] == 4 and c["stores"] == 2
    assert h["hit@1"] == 0.25 and h["hit@5"] == 0.5 and h["hit@10"] == 0.75
    assert abs(h["mrr@10"] - (1 + 1 / 7 + 1 / 3) / 4) < 1e-9
    assert h["by_category"]["1"]["queries"] == 3 and h["by_category"]["1"]["hit@5"] == 2 / 3
    assert h["by_category"]["2"]["hit@10"] == 0.0
    assert h["latency_ms_p50"] == 25.0 and c["scribe_ms_p50"] == 10.0
