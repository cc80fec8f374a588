"""The Graph page: memories and their links, filterable by category, topic, tag and scope (a
context or user: its memories and the shared ones; a scoped server always shows its own). The
server sends the graph once, as a JSON data block the page's own script (static/graph.js) lays
out and draws on a canvas; above ``graph``'s limit it is sampled to the most-linked memories
(engine/graph.py), and the page says so."""

from __future__ import annotations

import json

from spellbook.server.web.app import Answer, Ask
from spellbook.server.web.html import as_of, esc, message

LIMIT = 1500


async def graph(ask: Ask) -> Answer:
    category, topic, tag = (ask.query.get(k) or None for k in ("category", "topic", "tag"))
    scope = ask.scope_filter()
    data = await ask.call("graph", category=category, topic=topic, tag=tag, limit=LIMIT, **scope)

    def select(name: str, values: list[str], chosen: str | None) -> str:
        options = "".join(f"<option{' selected' if v == chosen else ''}>{esc(v)}</option>" for v in values)
        if chosen and chosen not in values:
            options += f"<option selected>{esc(chosen)}</option>"
        return f'<select name={name} aria-label={name}><option value="">every {name}</option>{options}</select>'

    scopes = (
        ""
        if ask.scope
        else (
            select("context", data.get("contexts", []), scope.get("context"))
            + select("user", data.get("users", []), scope.get("user"))
        )
    )
    filters = (
        f'<form class=filters method=get action="/graph">{select("category", data["categories"], category)}'
        f"{select('topic', data['topics'], topic)}{select('tag', data['tags'], tag)}{scopes}<button>Show</button>"
        f'<input id=find type=search placeholder="Find a memory in the graph" aria-label="Find"></form>'
    )
    sampled = (
        f" The {data['shown']:,} most-linked of {data['total']:,} are shown; filter by category, topic or "
        "tag to see the rest."
        if data["sampled"]
        else ""
    )
    summary = (
        f"<p class=muted id=graph-summary>{data['shown']:,} memories, {len(data['edges']):,} links.{sampled} "
        "Drag to move, scroll to zoom, click a memory to open it.</p>" + as_of(data)
    )
    payload = {"nodes": data["nodes"], "edges": data["edges"]}
    block = (
        json.dumps(payload, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
    )
    canvas = (
        '<div class=graph-wrap><canvas id=graph aria-label="Graph of memories"></canvas>'
        "<div id=graph-tip hidden></div><div id=graph-legend></div></div>"
        f'<script type="application/json" id=graph-data>{block}</script>'
    )
    empty = message("No memories match this filter.") if not data["nodes"] else ""
    return ask.html("Graph", "/graph", f"<h1>Graph</h1>{filters}{summary}{empty}{canvas}", script="graph.js")
