"""The memory engine: one service per concern (see ``engine/engine.py``), built by ``Engine``.

``Engine`` and ``wipe_index`` are loaded on first use, so a module that needs one service's types
(the MCP tools import ``engine.exchange``'s) does not pay for importing every service at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spellbook.engine.engine import Engine, wipe_index

__all__ = ["Engine", "wipe_index"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from spellbook.engine import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'spellbook.engine' has no attribute {name!r}")
