"""The Memory page (rendered text, frontmatter, sections, links, related memories, history) and
its actions: restore a version, erase. Actions are POST forms with the CSRF token (guard.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from spellbook.errors import VersionControlError
from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.html import (
    esc,
    form,
    hidden,
    markdown,
    memory_url,
    message,
    note_link,
    table,
    tags,
    url,
    when,
)

DONE = {
    "restored": "Restored: the memory now holds that version (the old text is in its history).",
    "unchanged": "That version is the current text already; nothing changed.",
    "merged": "Merged: this memory now holds the others' text; they are in .trash/ with merged_into.",
}


async def memory(ask: Ask) -> Answer:
    note_id = ask.params["id"]
    found = await ask.call("get_memories", ids=[note_id])
    if not found.get("memories"):
        return ask.html(
            "Not found",
            "",
            message(f"No memory with id {note_id!r} (it may have been erased or merged; see Activity).", "error"),
            404,
        )
    m = found["memories"][0]
    links, related, history = await ask.gather(
        lambda: ask.call("get_links", id=note_id),
        lambda: ask.call("related", id=note_id, limit=8),
        lambda: _versions(ask, note_id),
    )
    done = DONE.get(ask.query.get("done", ""))
    meta = m.get("metadata") or {}
    body = [
        message(done, "ok") if done else "",
        (
            f"<h1>{esc(m.get('title'))}</h1><p class=muted><code>{esc(m.get('path'))}</code> · id <code>{esc(m['id'])}"
            f"</code> · version <code>{esc(m.get('version'))}</code></p><p>{tags(meta.get('tags'))}</p>"
        ),
        "<div class=columns><article class=note>",
        _render(m.get("text", ""), m.get("links", [])),
        "</article><aside>",
        _frontmatter(meta),
        _sections(m.get("chunks", [])),
        _links(links),
        _related(related.get("related", [])),
        "</aside></div>",
        _history(ask, note_id, history),
        _erase_form(ask, m),
    ]
    return ask.html(m.get("title") or note_id, "", "".join(body))


def _render(text: str, links: list[dict[str, Any]]) -> str:
    """Markdown to HTML, with each ``[[wikilink]]`` that resolves to a memory made a link to it."""
    ids = {str(link.get("target", "")).strip().casefold(): link.get("id") for link in links if link.get("id")}

    def href(target: str) -> str | None:
        note_id = ids.get(target.casefold())
        return f"/memory/{quote(note_id, safe='')}" if note_id else None

    return markdown(text, href)


def _frontmatter(meta: dict[str, Any]) -> str:
    rows = [
        (f"<code>{esc(k)}</code>", esc(", ".join(map(str, v)) if isinstance(v, list) else v)) for k, v in meta.items()
    ]
    return "<h3>Frontmatter</h3>" + (table(["Key", "Value"], rows, "plain meta") if rows else "<p class=muted>none</p>")


def _sections(chunks: list[dict[str, Any]]) -> str:
    headings = [c.get("heading") for c in chunks if c.get("heading")]
    if not headings:
        return ""
    return "<h3>Sections</h3><ol class=sections>" + "".join(f"<li>{esc(h)}</li>" for h in headings) + "</ol>"


def _links(data: dict[str, Any]) -> str:
    def item(link: dict[str, Any]) -> str:
        relation = f"<span class=rel>{esc(link.get('relation') or 'wikilink')}</span> "
        if link.get("resolved", link.get("id")) and link.get("id"):
            return f"<li>{relation}{note_link(link)}</li>"
        return f'<li>{relation}<span class=broken title="no note has this name">{esc(link.get("target"))}</span></li>'

    out = "<h3>Links</h3>" + (
        f"<ul class=links>{''.join(item(x) for x in data.get('links', []))}</ul>"
        if data.get("links")
        else "<p class=muted>none</p>"
    )
    back = data.get("backlinks", [])
    out += "<h3>Backlinks</h3>" + (
        f"<ul class=links>{''.join(item(x) for x in back)}</ul>" if back else "<p class=muted>none</p>"
    )
    return out


def _related(items: list[dict[str, Any]]) -> str:
    if not items:
        return ""
    rows = "".join(f"<li>{note_link(r)} <span class=muted>{r.get('similarity', 0):.2f}</span></li>" for r in items)
    return f"<h3>Related</h3><ul class=links>{rows}</ul>"


async def _versions(ask: Ask, note_id: str) -> dict[str, Any] | str:
    """The memory's history, or why there is none (no git)."""
    try:
        return await ask.call("history", id=note_id, limit=30)
    except VersionControlError as exc:
        return str(exc)


def _history(ask: Ask, note_id: str, hist: dict[str, Any] | str) -> str:
    if isinstance(hist, str):
        return f"<h2>History</h2>{message(hist)}"
    rows = []
    for v in hist.get("versions", []):
        diff = f'<a href="{esc(diff_url(note_id, v["commit"]))}">diff</a>'
        if v.get("current"):
            action = "<span class=badge>current</span>"
        elif v.get("path") is None:
            action = "<span class=muted>erased here</span>"
        else:
            action = form(
                f"/memory/{quote(note_id, safe='')}/restore",
                ask.csrf,
                hidden("version", v["commit"]) + hidden("current_version", hist.get("current_version") or ""),
                "Restore",
                "inline restore",
            )
        rows.append(
            (
                f"<code>{esc(v.get('version'))}</code>",
                when(v.get("date")),
                esc(v.get("message")),
                esc(v.get("change")),
                diff,
                action,
            )
        )
    extra = (
        message("The file has changes git does not have yet; a restore commits them first.")
        if hist.get("uncommitted")
        else ""
    )
    more = "<p class=muted>Older versions: see git log.</p>" if hist.get("more") else ""
    return (
        "<h2>History</h2>"
        + extra
        + (
            table(["Version", "Date", "Commit", "Change", "", ""], rows, "history")
            if rows
            else message("No commits yet.")
        )
        + more
    )


def _erase_form(ask: Ask, m: dict[str, Any]) -> str:
    fields = hidden("version", m.get("version"))
    return (
        "<details class=danger><summary>Erase this memory</summary><p>The file moves to <code>.trash/</code> "
        "and can be restored from its history.</p>"
        + form(f"/memory/{quote(m['id'], safe='')}/erase", ask.csrf, fields, "Erase", "erase", confirm="Yes, erase it")
        + "</details>"
    )


def diff_url(note_id: str, commit: str) -> str:
    return f"/memory/{quote(note_id, safe='')}/diff/{quote(commit, safe='')}"


async def restore(ask: Ask) -> Answer:
    note_id = ask.params["id"]
    done = await ask.call(
        "restore",
        id=note_id,
        version=ask.form.get("version", ""),
        current_version=ask.form.get("current_version") or None,
    )
    state = "unchanged" if done.get("unchanged") else "restored"
    return ask.redirect(url(f"/memory/{quote(note_id, safe='')}", done=state).replace("&amp;", "&"))


async def erase(ask: Ask) -> Answer:
    note_id = ask.params["id"]
    if ask.form.get("confirm") != "yes":
        return ask.html("Erase", "", message("Tick the confirmation box to erase.", "error"), 400)
    done = await ask.call("erase", id=note_id, version=ask.form.get("version") or None)
    body = message(f"Erased {done.get('path', note_id)}: it is in .trash/ and can be restored from Activity.", "ok")
    return ask.html("Erased", "", body + '<p><a href="/activity">Activity</a></p>')


async def diff(ask: Ask) -> Answer:
    note_id, commit = ask.params["id"], ask.params["commit"]
    data = await ask.call("diff", id=note_id, version=commit)
    lines = []
    for line in data.get("diff", "").splitlines():
        kind = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else ""
        )
        lines.append(f'<span class="{kind}">{esc(line)}</span>')
    body = (
        f"<h1>{esc(data.get('message'))}</h1><p class=muted>{when(data.get('date'))} · "
        f"<code>{esc(data.get('commit', '')[:12])}</code> · {esc(data.get('author'))} · "
        f'<a href="{memory_url(note_id)}">{esc(data.get("title"))}</a></p>'
        f"<pre class=diff>{chr(10).join(lines) or '(no change to this file)'}</pre>"
        + (message("The diff is cut at 200 KB.") if data.get("truncated") else "")
    )
    return ask.html(f"Diff {commit[:10]}", "", body)
