"""Spellbook: a local-first memory server for AI agents, over a markdown vault you own.

The public face, for a program that uses Spellbook as a library::

    from spellbook import Engine, Settings, SpellbookError

    engine = Engine(Settings(vault=Path("~/notes")))
    found = engine.memorize("what did we decide about the cache?")

Each name is imported when first used, so ``import spellbook`` (every ``spellbook`` command and
agent hook starts with it) loads nothing: the engine alone takes ~150 ms to import. Everything
else is reached by its module (``spellbook.engine``, ``spellbook.errors``...).
"""

from spellbook.version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2-8 ms of every command's start)
if TYPE_CHECKING:
    from spellbook.config import Settings
    from spellbook.engine.engine import Engine
    from spellbook.errors import SpellbookError

__all__ = ["Engine", "Settings", "SpellbookError", "__version__"]


def __getattr__(name: str) -> object:
    if name == "Engine":
        from spellbook.engine.engine import Engine

        return Engine
    if name == "Settings":
        from spellbook.config import Settings

        return Settings
    if name == "SpellbookError":
        from spellbook.errors import SpellbookError

        return SpellbookError
    raise AttributeError(f"module 'spellbook' has no attribute {name!r}")
