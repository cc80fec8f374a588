"""The Care page: ``analyze_knowledge``'s score and issues, each with its action, and the merge
of near-duplicates (the ``merge`` engine call: the memory kept keeps its id and file, the others
go to ``.trash/`` with ``merged_into``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from spellbook.errors import NoteNotFoundError
from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.html import as_of, esc, form, hidden, message, note_link, url

KINDS = {
    "near_duplicate": "Near-duplicates",
    "contradiction": "Contradictions",
    "broken_link": "Broken links",
    "stale": "Stale",
    "untagged": "Untagged",
    "isolated": "Not linked",
    "similar_tags": "Similar tags",
}
ORDER = list(KINDS)
SHOWN_NOTES = 25
IDS_PER_CALL = 20  # get_memories takes at most this many ids (engine/memories.py)
MERGEABLE = ("near_duplicate", "contradiction")  # a sync's conflict copy contradicts its note: merge resolves it


async def care(ask: Ask) -> Answer:
    data = await ask.call("analyze_knowledge", stale_ok=True)
    issues = sorted(data.get("issues", []), key=lambda i: ORDER.index(i["kind"]) if i["kind"] in ORDER else 99)
    pairs = [i for i in issues if i["kind"] in MERGEABLE]
    versions = await _versions(ask, [n["id"] for i in pairs for n in i.get("notes", []) if n.get("id")])
    counts = data.get("counts", {})
    checked = data.get("near_duplicates_checked") or {}
    summary = (
        f"<div class=cards><div class=card><span>Knowledge score</span><b>{esc(data.get('score'))}</b>"
        f"<small>of 100, over {data.get('notes', 0):,} memories</small></div>"
        + "".join(
            f"<div class=card><span>{esc(k.replace('_', ' ').capitalize())}</span><b>{esc(v)}</b></div>"
            for k, v in counts.items()
            if k not in ("links", "tags")
        )
        + "</div>"
    )
    if checked:
        summary += (
            f"<p class=muted>Near-duplicates: the {checked.get('notes', 0):,} newest of "
            f"{checked.get('of', 0):,} memories were compared (similarity at least {checked.get('threshold')}).</p>"
        )
    summary += as_of(data)
    sections: dict[str, list[str]] = {}
    for issue in issues:
        sections.setdefault(issue["kind"], []).append(_issue(ask, issue, versions))
    body = ["<h1>Care</h1>", summary]
    for kind, parts in sections.items():
        more = (data.get("more_issues") or {}).get(kind)
        tail = f"<p class=muted>and {more:,} more of this kind</p>" if more else ""
        body.append(
            f'<section class="issue-kind {esc(kind)}"><h2>{esc(KINDS.get(kind, kind))}</h2>{"".join(parts)}{tail}'
            "</section>"
        )
    if not issues:
        body.append(message("No issues: every memory is tagged, linked, fresh and distinct.", "ok"))
    return ask.html("Care", "/care", "".join(body))


async def _versions(ask: Ask, ids: list[str]) -> dict[str, str]:
    """The version of each memory a merge form names, asked for ``IDS_PER_CALL`` at a time; a memory
    gone since the analysis has none (its merge then says so)."""
    wanted = sorted(set(ids))
    pages = [wanted[i : i + IDS_PER_CALL] for i in range(0, len(wanted), IDS_PER_CALL)]
    found = await ask.gather(*(lambda page=page: _page(ask, page) for page in pages))
    return {m["id"]: m["version"] for answer in found for m in answer}


async def _page(ask: Ask, ids: list[str]) -> list[dict[str, Any]]:
    try:
        return (await ask.call("get_memories", ids=ids)).get("memories", [])
    except NoteNotFoundError:  # every one of them is gone
        return []


def _issue(ask: Ask, issue: dict[str, Any], versions: dict[str, str]) -> str:
    kind = issue["kind"]
    notes = issue.get("notes", [])
    action = f"<p class=action>{esc(issue.get('action'))}</p>"
    if kind in MERGEABLE and len(notes) == 2 and all(n.get("id") for n in notes):
        return f'<div class="issue pair">{_merge_form(ask, notes, issue.get("similarity"), versions)}{action}</div>'
    if kind == "broken_link":
        return (
            f"<div class=issue>{note_link(notes[0])} links to <span class=broken>{esc(issue.get('target'))}</span> "
            f"<span class=rel>{esc(issue.get('relation'))}</span>{action}</div>"
        )
    if kind == "similar_tags":
        names = issue.get("tags") or {}
        shown = " ".join(
            f'<a class=tag href="{url("/search", tag=t, q="*")}">#{esc(t)}</a> <span class=count>{esc(n)}</span>'
            for t, n in (names.items() if isinstance(names, dict) else [])
        )
        listed = ", ".join(note_link(n) for n in notes[:SHOWN_NOTES])
        return f"<div class=issue>{shown}<p>{listed}</p>{action}</div>"
    listed = "".join(
        f"<li>{note_link(n)}"
        + (f" <span class=muted>{esc(n['updated'][:10])}</span>" if n.get("updated") else "")
        + "</li>"
        for n in notes[:SHOWN_NOTES]
    )
    rest = issue.get("count", len(notes)) - min(len(notes), SHOWN_NOTES)
    more = f"<li class=muted>and {rest:,} more</li>" if rest > 0 else ""
    return f"<div class=issue><ul class=notes>{listed}{more}</ul>{action}</div>"


def _merge_form(ask: Ask, notes: list[dict[str, Any]], similarity: Any, versions: dict[str, str]) -> str:
    choices = "".join(
        f'<label><input type=radio name=into value="{esc(n["id"])}"{" checked" if i == 0 else ""} required> keep '
        f"{note_link(n)}</label>"
        for i, n in enumerate(notes)
    )
    fields = hidden("ids", "\n".join(n["id"] for n in notes)) + "".join(
        hidden(f"version:{n['id']}", versions.get(n["id"], "")) for n in notes
    )
    score = f"<span class=similarity>{float(similarity):.2f} similar</span>" if similarity is not None else ""
    return form(
        "/care/merge",
        ask.csrf,
        f"{score}<div class=choices>{choices}</div>{fields}",
        "Merge into the one kept",
        "merge",
    )


async def merge(ask: Ask) -> Answer:
    ids = [i.strip() for i in ask.form.get("ids", "").splitlines() if i.strip()]
    into = ask.form.get("into") or None
    version = ask.form.get(f"version:{into}") or None if into else None
    done = await ask.call("merge", ids=ids, into=into, version=version)
    survivor = done.get("id") or into or ids[0]
    return ask.redirect(f"/memory/{quote(survivor, safe='')}?done=merged")
