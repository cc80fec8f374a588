"""analyze_knowledge's contradictions: notes linked `contradicts` that no `supersedes` settles, and
near-duplicates that state different numbers or where only one says "not" (engine/health.py)."""

from __future__ import annotations

from spellbook.engine.differences import differences as _differences


def _kinds(engine) -> list[dict]:
    return [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "contradiction"]


def test_notes_linked_contradicts_are_a_contradiction_until_one_supersedes_the_other(engine) -> None:
    old = engine.scribe("The office opens at nine.", title="Office hours", category="ops", tags=["office"])
    new = engine.scribe("Visitors sign in at the front desk.", title="Front desk", category="ops", tags=["office"])
    assert not _kinds(engine)
    engine.link(new["id"], old["id"], "contradicts")
    found = _kinds(engine)
    assert len(found) == 1 and {n["id"] for n in found[0]["notes"]} == {old["id"], new["id"]}
    assert found[0]["evidence"] == "linked 'contradicts'" and "supersedes" in found[0]["action"]
    result = engine.analyze_knowledge()
    assert result["counts"]["contradictions"] == 1 and result["shares"]["contradiction"] > 0
    engine.link(new["id"], old["id"], "supersedes")  # settled: the newer one holds
    assert not _kinds(engine)


def test_near_duplicates_that_differ_in_a_number_are_flagged(engine) -> None:
    text = (
        "The nightly backup of the billing database runs from the cron host, writes to the "
        "cold storage bucket and keeps {} daily copies before pruning the oldest ones."
    )
    a = engine.scribe(text.format("14"), title="Billing backups", category="ops", tags=["backup"])
    b = engine.scribe(text.format("30"), title="Billing backup policy", category="ops", tags=["backup"])
    pairs = [i for i in engine.analyze_knowledge()["issues"] if i["kind"] == "near_duplicate"]
    assert pairs, "the two notes should be near-duplicates for this test to mean anything"
    found = _kinds(engine)
    assert len(found) == 1 and {n["id"] for n in found[0]["notes"]} == {a["id"], b["id"]}
    assert found[0]["evidence"] in ("14 vs 30", "30 vs 14")


def test_differences_are_numbers_both_sides_have_and_negations_one_side_has() -> None:
    assert _differences("Deploys run at 15:00 on Fridays.", "Deploys run at 17:30 on Fridays.") == ["15:00 vs 17:30"]
    assert _differences("The API is rate limited.", "The API is not rate limited.") == ["only one of them says not"]
    assert _differences("캐시는 만료된다.", "캐시는 만료되지 않는다.") == ["only one of them says not"]
    assert _differences("キャッシュは期限切れになる。", "キャッシュは期限切れにならない。") == [
        "only one of them says not"
    ]
    assert _differences("Version 2.1 added retries.", "Version 2.1 added retries and backoff.") == []
    assert _differences("It took 3 days.", "It took a while.") == []  # a number on one side only says nothing
