"""Where a person sees the last sync (docs/sync.md): doctor's check, the web overview's line, and
the Care page's merge form for a conflict copy."""

from __future__ import annotations

from types import SimpleNamespace

from spellbook.cli.doctor import sync_check
from spellbook.server.web.care import _issue
from spellbook.server.web.pages import _sync_line

OK = {
    "in_sync": True,
    "head": "abc123def456",
    "at": "2026-11-28T05:00:00+00:00",
    "conflict_copies": ["a (conflict copy).md"],
}
FAILED = {
    "in_sync": False,
    "error": "fetch: the remote is unreachable (fatal: x); the vault keeps working offline",
    "at": "2026-11-28T05:00:00+00:00",
}


def _record(last: dict | None, every: float | None = None) -> dict:
    return {
        "remote": "origin",
        "every_seconds": every,
        "running": False,
        "rounds": 1,
        "failures": 0,
        "last": last,
        "last_success_at": None,
    }


def test_doctor_says_how_the_last_sync_went() -> None:
    assert sync_check(_record(None)) == []  # never synced, no timer: nothing to say
    assert sync_check(_record(None, 30))[0]["status"] == "ok"
    ok = sync_check(_record(OK))[0]
    assert ok["status"] == "ok" and "abc123def456" in ok["detail"] and "1 conflict copies" in ok["detail"]
    failed = sync_check(_record(FAILED))[0]
    assert failed["status"] == "warn" and "unreachable" in failed["detail"] and "spellbook sync" in failed["fix"]


def test_the_overview_line() -> None:
    assert "off" in _sync_line({}) and "SPELLBOOK_SYNC_SECONDS" in _sync_line({})
    assert _sync_line(_record(OK, 5)).startswith("every 5 s; in sync with origin at abc123def456")
    assert "last round failed" in _sync_line(_record(FAILED))


def test_a_conflict_copy_can_be_merged_from_the_care_page() -> None:
    notes = [
        {"id": "a" * 16, "title": "Deploy day", "path": "inbox/Deploy day.md"},
        {"id": "b" * 16, "title": "Deploy day (conflict copy)", "path": "inbox/Deploy day (conflict copy).md"},
    ]
    issue = {
        "kind": "contradiction",
        "notes": notes,
        "action": "Decide which is right",
        "evidence": "linked 'contradicts'",
    }
    html = _issue(SimpleNamespace(csrf="t0k", scope=None), issue, {})
    assert 'action="/care/merge"' in html and "a" * 16 in html and "b" * 16 in html
