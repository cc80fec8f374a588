"""Overview, Activity and Search: pages that only read."""

from __future__ import annotations

from typing import Any

from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.html import card, esc, memory_url, message, note_link, pager, table, tags, url, when
from spellbook.server.web.memory import diff_url

ACTIVITY_PAGE = 50
TOOLS = ("scribe", "revise", "erase", "link", "unlink", "restore", "merge", "import", "describe", "overview")
MODES = ("hybrid", "semantic", "keyword")


async def overview(ask: Ask) -> Answer:
    stats, index, health = await ask.gather(
        lambda: ask.call("stats"), lambda: ask.call("get_index"), lambda: ask.call("analyze_knowledge", stale_ok=True)
    )
    embedder = stats.get("embedder_status") or {}
    reachable = embedder.get("reachable", True)
    progress = stats.get("progress") or {}
    state = stats.get("state", "?")
    state_note = f"{progress.get('done', 0):,} of {progress.get('total', 0):,} files" if state != "ready" else ""
    missing = stats.get("vectors_missing", 0)
    spend = stats.get("summariser") or {}
    cards = "".join(
        [
            card("Memories", f"{index.get('total_notes', 0):,}", f"{index.get('archived_notes', 0):,} archived"),
            card("Index", state, state_note),
            card(
                "Embedder",
                stats.get("embedder", "?"),
                "answering" if reachable else esc(embedder.get("error") or "not answering"),
            ),
            card("Vectors", f"{stats.get('vectors', 0):,}", f"{missing:,} waiting" if missing else "none waiting"),
            card("Skipped files", f"{stats.get('problems_total', 0):,}"),
            card(
                "Summariser",
                f"{spend.get('tokens', 0):,} tokens" if spend.get("model") else "off",
                esc(f"of {spend.get('daily_tokens', 0):,} today · {spend.get('model')}")
                if spend.get("model")
                else "extractive session digests",
            ),
            (
                f'<a class="card link" href="/care"><span>Knowledge score</span><b>{esc(health.get("score"))}</b>'
                f"<small>of 100 · {len({i['kind'] for i in health.get('issues', [])})} kinds of issue</small></a>"
            ),
        ]
    )
    warnings = "".join(message(w, "warn") for w in stats.get("setup_warnings", []))
    if not reachable:
        warnings += message("The embedder is not answering: searches rank by keywords until it is back.", "warn")
    body = [
        f"<h1>Overview</h1>{warnings}<div class=cards>{cards}</div>",
        "<h2>Categories and topics</h2>",
        _categories(index.get("categories", {})),
    ]
    problems = [] if ask.scope else stats.get("problems", [])  # a skipped file's scope is unknown: no paths
    if problems:
        rows = [(f"<code>{esc(p.get('path'))}</code>", esc(p.get("problem"))) for p in problems]
        more = stats.get("problems_total", 0) - len(problems)
        body.append(
            f"<h2>Skipped files</h2>{table(['File', 'Why it was skipped'], rows)}"
            + (f"<p class=muted>and {more:,} more</p>" if more > 0 else "")
        )
    git = stats.get("git") or {}
    body.append(
        "<h2>Vault</h2>"
        + table(
            ["", ""],
            [
                ("Folder", f"<code>{esc(stats.get('vault'))}</code>"),
                ("Index folder", f"<code>{esc(stats.get('index'))}</code>"),
                (
                    "git",
                    esc("committing each write" if git.get("committing") else "not committing (no repository, or off)"),
                ),
                ("Commits", f"{git.get('commits', 0):,} since the server started"),
                ("Sync", esc(_sync_line(stats.get("sync") or {}))),
                ("Spellbook", esc(stats.get("version"))),
            ],
            "plain",
        )
    )
    return ask.html("Overview", "/", "".join(body))


def _sync_line(record: dict[str, Any]) -> str:
    """The last sync with the git remote (docs/sync.md), in a line."""
    last = record.get("last")
    every = f"every {record['every_seconds']:g} s; " if record.get("every_seconds") else ""
    if last is None:
        return every + ("no round yet" if every else "off (spellbook sync, or SPELLBOOK_SYNC_SECONDS)")
    if last.get("error"):
        return f"{every}last round failed ({last.get('at')}): {last['error']}"
    copies = len(last.get("conflict_copies") or [])
    return f"{every}in sync with {record.get('remote')} at {last.get('head')} ({last.get('at')})" + (
        f", {copies} conflict copies (Care page)" if copies else ""
    )


def _categories(categories: dict[str, Any]) -> str:
    rows = []
    for name, cat in sorted(categories.items(), key=lambda kv: (-kv[1].get("notes", 0), kv[0])):
        topics = []
        for topic, info in sorted(cat.get("topics", {}).items(), key=lambda kv: (-kv[1].get("notes", 0), kv[0])):
            about = info.get("description") or info.get("summary") or ", ".join(info.get("keywords", [])[:6])
            topics.append(
                f'<li><a href="{url("/search", category=name, topic=topic, q="*")}">{esc(topic)}</a> '
                f"<span class=count>{info.get('notes', 0):,}</span>"
                + (f" <span class=muted>{esc(about)}</span>" if about else "")
                + "</li>"
            )
        described = f"<p class=muted>{esc(cat['description'])}</p>" if cat.get("description") else ""
        rows.append(
            (
                f'<a href="{url("/graph", category=name)}"><b>{esc(name)}</b></a>{described}',
                f"{cat.get('notes', 0):,}",
                f"<ul class=topics>{''.join(topics)}</ul>",
            )
        )
    return table(["Category", "Memories", "Topics"], rows, "categories") if rows else message("The vault is empty.")


async def activity(ask: Ask) -> Answer:
    offset = _int(ask.query.get("offset"), 0)
    tool = ask.query.get("tool") or None
    data = await ask.call("activity", limit=ACTIVITY_PAGE, offset=offset, tool=tool)
    rows = []
    for e in data["entries"]:
        linkable = bool(e.get("id")) and "/" not in e["id"]  # folder notes (_about.md, _overview.md) have no page
        memory = f'<a href="{memory_url(e["id"])}">{esc(e.get("title"))}</a>' if linkable else esc(e.get("title"))
        if e.get("commit"):
            diff = (
                f'<a href="{esc(diff_url(e["id"], e["commit"]))}">{esc(e["commit"][:10])}</a>'
                if linkable
                else f"<code>{esc(e['commit'][:10])}</code>"
            )
        else:
            diff = "<span class=muted>no commit</span>"
        rows.append(
            (
                when(e.get("time")),
                f'<span class="tool {esc(e.get("tool"))}">{esc(e.get("tool"))}</span>',
                f"{memory}<br><small class=muted>{esc(e.get('path'))}</small>"
                + (f" <small>{esc(e['detail'])}</small>" if e.get("detail") else ""),
                esc(e.get("client") or "?"),
                _session(e.get("session")),
                diff,
            )
        )
    options = "".join(f"<option{' selected' if t == tool else ''}>{t}</option>" for t in TOOLS)
    body = (
        "<h1>Activity</h1><p class=muted>What was written, newest first: by which tool, client and session. "
        "From the index folder's activity log (<code>activity.jsonl</code>); the commit links to the git diff.</p>"
        f'<form class=filters method=get action="/activity"><select name=tool><option value="">every tool</option>'
        f"{options}</select><button>Show</button></form>"
        + (
            table(["When (UTC)", "Tool", "Memory", "Client", "Session", "Change"], rows, "activity")
            if rows
            else message("Nothing written yet." if not offset else "No older entries.")
        )
        + pager("/activity", offset, ACTIVITY_PAGE, data.get("more", False), tool=tool)
    )
    return ask.html("Activity", "/activity", body)


def _session(session: str | None) -> str:
    if not session:
        return "<span class=muted>-</span>"
    return f'<code title="{esc(session)}">{esc(session[:12])}</code>'


async def search(ask: Ask) -> Answer:
    q = (ask.query.get("q") or "").strip()
    mode = ask.query.get("mode") if ask.query.get("mode") in MODES else "hybrid"
    category, topic, tag = (ask.query.get(k) or None for k in ("category", "topic", "tag"))
    limit = min(50, max(1, _int(ask.query.get("limit"), 10)))
    filters = {k: v for k, v in (("category", category), ("topic", topic), ("tags", [tag] if tag else None)) if v}
    modes = "".join(f"<option{' selected' if m == mode else ''}>{m}</option>" for m in MODES)
    form = (
        f'<form class="search filters" method=get action="/search"><input name=q value="{esc(q)}" autofocus '
        'placeholder="What do you want to remember?" aria-label=Query>'
        f"<select name=mode aria-label=Mode>{modes}</select>"
        f'<input name=category value="{esc(category or "")}" placeholder=category aria-label=Category>'
        f'<input name=topic value="{esc(topic or "")}" placeholder=topic aria-label=Topic>'
        f'<input name=tag value="{esc(tag or "")}" placeholder=tag aria-label=Tag>'
        + (
            ""
            if ask.scope
            else "".join(
                f'<input name={k} value="{esc(ask.scope_filter().get(k, ""))}" placeholder={k} '
                f'title="scope: the memories of this {k} and the shared ones" aria-label={k}>'
                for k in ("context", "user")
            )
        )
        + f'<input name=limit type=number min=1 max=50 value="{limit}" aria-label=Limit><button>Search</button></form>'
    )
    if not q:
        return ask.html(
            "Search",
            "/search",
            f"<h1>Search</h1>{form}<p class=muted>The same <code>memorize</code> "
            "the agents call: hybrid ranks by keywords and meaning together.</p>",
        )
    if q == "*" or not q.strip("*"):
        data = await ask.call("list_memories", filter=filters or None, limit=limit, **ask.scope_filter())
        items = data.get("memories", [])
        rows = [
            (str(i), note_link(m), esc(m.get("category")), esc(m.get("topic")), tags(m.get("tags")))
            for i, m in enumerate(items, 1)
        ]
        result = table(["#", "Memory", "Category", "Topic", "Tags"], rows, "hits") if rows else message("Nothing here.")
        return ask.html("Search", "/search", f"<h1>Search</h1>{form}{result}")
    data = await ask.call("memorize", query=q, mode=mode, filter=filters or None, limit=limit, **ask.scope_filter())
    rows = []
    for rank, hit in enumerate(data.get("results", []), 1):
        found = "".join(f"<span class='side {side}'>{side}</span>" for side in hit.get("found_by", []))
        where = " / ".join(esc(x) for x in (hit.get("category"), hit.get("topic")) if x)
        heading = f"<small class=muted>{esc(hit['heading'])}</small><br>" if hit.get("heading") else ""
        rows.append(
            (
                str(rank),
                f"{note_link(hit)}<br>{heading}<span class=snippet>{esc(hit.get('snippet'))}</span>",
                f"{hit.get('score', 0):.3f}",
                _meter(hit.get("relevance", 0)),
                found,
                f"{where}<br>{tags(hit.get('tags'))}",
            )
        )
    said = data.get("notes") or data.get("note") or []
    notes = "".join(message(n, "warn") for n in ([said] if isinstance(said, str) else said) if isinstance(n, str))
    result = (
        table(["#", "Memory", "Score", "Relevance", "Found by", "Where"], rows, "hits")
        if rows
        else message("No memory matches.")
    ) + notes
    return ask.html(f"{q} - Search", "/search", f"<h1>Search</h1>{form}{result}")


def _meter(value: float) -> str:
    value = max(0.0, min(1.0, float(value or 0)))
    return f'<meter min=0 max=1 value="{value}"></meter> {value:.2f}'


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default
