"""The web view: pages at ``/`` of ``spellbook serve --http`` and ``spellbook ui``.

Overview, Activity, Search, Memory, Graph and Care, rendered on the server (no build step, nothing
fetched from the internet: the one script and the style sheet ship in ``static/``). Who may see
and change what is decided in ``guard.py``; every page asks the hub (``app.Ask.call``).
"""

from __future__ import annotations

import logging

from starlette.convertors import StringConvertor, register_url_convertor

from spellbook.scope import acting
from spellbook.server.hub import Hub
from spellbook.server.web import care, graph_page, memory, pages, signin
from spellbook.server.web.app import WEB_CLIENT, WebApp
from spellbook.server.web.guard import Guard

log = logging.getLogger(__name__)


class CommitConvertor(StringConvertor):
    """A path part that is a commit: 4 to 40 hex digits."""

    regex = "[0-9a-fA-F]{4,40}"


register_url_convertor("commit", CommitConvertor())
ROUTES = [  # (method, path, page); a {name} is anything but a slash
    ("GET", "/signin", signin.redeem),
    ("POST", "/signin", signin.with_token),
    ("GET", "/", pages.overview),
    ("GET", "/activity", pages.activity),
    ("GET", "/search", pages.search),
    ("GET", "/graph", graph_page.graph),
    ("GET", "/care", care.care),
    ("POST", "/care/merge", care.merge),
    ("GET", "/memory/{id}", memory.memory),
    ("POST", "/memory/{id}/restore", memory.restore),
    ("POST", "/memory/{id}/erase", memory.erase),
    ("GET", "/memory/{id}/diff/{commit:commit}", memory.diff),
]


def web_app(hub: Hub, guard: Guard) -> WebApp:
    return WebApp(hub, guard, ROUTES)


def warm(hub: Hub) -> None:
    """Compute the whole-vault answers the first pages need (Care's analysis, the unfiltered
    graph) before anyone asks, so ``spellbook ui``'s first views are quick; the engine keeps them
    until the index changes (engine/memo.py). Runs in a thread; failures only cost speed."""
    try:
        with acting(WEB_CLIENT):
            hub.call("analyze_knowledge", {})
            hub.call("graph", {"limit": graph_page.LIMIT})
    except Exception:
        log.debug("could not warm the web view's answers", exc_info=True)


__all__ = ["Guard", "WebApp", "warm", "web_app"]
