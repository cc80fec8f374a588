"""HTML building blocks for the pages: escaping, the page frame, small components.

Everything a page shows from the vault goes through ``esc`` (or ``markdown``, which renders with
raw HTML turned off), so a note whose title or body holds ``<script>`` shows that text and runs
nothing. Values in attributes are escaped with quotes; URLs are built with ``url``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, urlencode

from markdown_it import MarkdownIt
from markdown_it.token import Token

from spellbook.server.web.guard import CSRF_FIELD, TOKEN_FIELD
from spellbook.version import __version__

PAGES = [("/", "Overview"), ("/activity", "Activity"), ("/search", "Search"), ("/graph", "Graph"), ("/care", "Care")]

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
WIKILINK = re.compile(r"\[\[([^\]|#]+)(#[^\]|]*)?(?:\|([^\]]+))?\]\]")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(path: str, **query: Any) -> str:
    """A same-site URL with its query (None values left out), escaped for an attribute."""
    params = [(k, v) for k, v in query.items() if v not in (None, "")]
    return esc(path + (f"?{urlencode(params)}" if params else ""))


def memory_url(note_id: str) -> str:
    return esc(f"/memory/{quote(note_id, safe='')}")


def markdown(text: str, wikilink: Callable[[str], str | None] | None = None) -> str:
    """A note's body as HTML; raw HTML in it is shown as text, ``javascript:`` links are dropped, and
    links carry ``rel="noreferrer noopener"``. ``wikilink`` maps a ``[[target]]`` to a URL (None: it
    stays text); only text is searched, never code, an attribute or a link's own text."""
    tokens = _MARKDOWN.parse(text or "")
    for block in tokens:
        if block.type == "inline" and block.children:
            block.children = _inline(block.children, wikilink)
    return _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})


def _inline(children: list[Token], wikilink: Callable[[str], str | None] | None) -> list[Token]:
    out: list[Token] = []
    depth = 0  # inside a link: its text is not searched for wikilinks (an <a> holds no <a>)
    for token in children:
        if token.type == "link_open":
            token.attrSet("rel", "noreferrer noopener")
            depth += 1
        elif token.type == "link_close":
            depth -= 1
        elif token.type == "text" and wikilink and not depth:
            out += _wikilinks(token.content, wikilink)
            continue
        out.append(token)
    return out


def _wikilinks(text: str, wikilink: Callable[[str], str | None]) -> list[Token]:
    """``text`` as text tokens, with each ``[[target|shown]]`` that ``wikilink`` knows made a link."""
    out, start = [], 0
    for found in WIKILINK.finditer(text):
        href = wikilink(found.group(1).strip())
        if href is None:
            continue
        out.append(_text(text[start : found.start()]))
        out += [
            Token("link_open", "a", 1, attrs={"class": "wikilink", "href": href}),
            _text(found.group(3) or found.group(1)),
            Token("link_close", "a", -1),
        ]
        start = found.end()
    out.append(_text(text[start:]))
    return [t for t in out if t.type != "text" or t.content]


def _text(content: str) -> Token:
    return Token("text", "", 0, content=content)


def page(title: str, active: str, body: str, scope: str | None = None, script: str | None = None) -> str:
    nav = "".join(f'<a href="{href}"{" class=on" if href == active else ""}>{name}</a>' for href, name in PAGES)
    scoped = f'<span class="scope" title="This server is scoped">{esc(scope)}</span>' if scope else ""
    tail = f'<script src="/static/{script}" defer></script>' if script else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · Spellbook</title>"
        '<link rel=icon href="data:,"><link rel=stylesheet href="/static/style.css"></head><body>'
        f'<header><a class=brand href="/">Spellbook</a><nav>{nav}</nav>{scoped}'
        f'<form class=quick action="/search" method=get><input name=q placeholder="Search memories" '
        f'aria-label="Search memories"></form></header>'
        f"<main>{body}</main>"
        f"<footer>Spellbook {esc(__version__)} · everything here is read from this machine's vault</footer>"
        f"{tail}</body></html>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table; cells are HTML already (escape what comes from the vault)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def card(label: str, value: Any, note: str = "") -> str:
    """A figure with its label; ``note`` is HTML (escape what comes from the vault)."""
    extra = f"<small>{note}</small>" if note else ""
    wide = " class=text" if len(str(value)) > 9 else ""
    return f"<div class=card><span>{esc(label)}</span><b{wide}>{esc(value)}</b>{extra}</div>"


def tags(values: Iterable[str] | None) -> str:
    return " ".join(f'<a class=tag href="{url("/search", tag=t)}">#{esc(t)}</a>' for t in values or [])


def note_link(ref: dict[str, Any]) -> str:
    title = ref.get("title") or ref.get("path") or ref.get("id")
    if not ref.get("id"):
        return esc(title)
    return f'<a href="{memory_url(ref["id"])}">{esc(title)}</a>'


def form(action: str, csrf: str, fields: str, button: str, cls: str = "", confirm: str = "") -> str:
    """A POST form carrying the CSRF token; ``confirm``: text of a confirmation checkbox it requires."""
    check = (
        f"<label class=confirm><input type=checkbox name=confirm value=yes required> {esc(confirm)}</label>"
        if confirm
        else ""
    )
    return (
        f'<form method=post action="{esc(action)}" class="{cls}"><input type=hidden name={CSRF_FIELD} '
        f'value="{esc(csrf)}">{fields}{check}<button type=submit>{esc(button)}</button></form>'
    )


def sign_in_form(note: str = "") -> str:
    """The sign-in page's text: ``spellbook ui``, or the token pasted into a POST form (never a URL)."""
    return (
        f"<h1>Sign in</h1>{message(note, 'error') if note else ''}<p>This Spellbook server needs a sign-in. "
        "<code>spellbook ui --vault PATH</code> opens your browser signed in. Or paste the server's token "
        "(<code>SPELLBOOK_TOKEN</code>, or the one in <code>&lt;vault&gt;/.spellbook/http.token</code>):</p>"
        f'<form method=post action="/signin" class=signin><input type=password name={TOKEN_FIELD} '
        'autocomplete=off aria-label="Token" required> <button type=submit>Sign in</button></form>'
    )


def hidden(name: str, value: Any) -> str:
    return f'<input type=hidden name="{esc(name)}" value="{esc(value)}">'


def message(text: str, kind: str = "info") -> str:
    return f'<p class="msg {kind}">{esc(text)}</p>'


def when(value: str | None) -> str:
    """An ISO time as 'YYYY-MM-DD HH:MM' (UTC as written), the full value in the tooltip."""
    if not value:
        return ""
    short = value.replace("T", " ")[:16]
    return f'<time datetime="{esc(value)}" title="{esc(value)}">{esc(short)}</time>'


def pager(path: str, offset: int, limit: int, more: bool, **query: Any) -> str:
    parts = []
    if offset > 0:
        parts.append(f'<a href="{url(path, offset=max(0, offset - limit) or None, **query)}">&larr; newer</a>')
    if more:
        parts.append(f'<a href="{url(path, offset=offset + limit, **query)}">older &rarr;</a>')
    return f"<p class=pager>{' '.join(parts)}</p>" if parts else ""


def as_of(data: dict) -> str:
    """A line saying an answer is a few seconds old (the memo's ``stale_seconds``), or nothing."""
    age = data.get("stale_seconds")
    if age is None:
        return ""
    return (
        f'<p class="muted stale">As of {esc(age)} s ago: the vault changed since, and a fresh answer is '
        "being made (reload in a few seconds).</p>"
    )
