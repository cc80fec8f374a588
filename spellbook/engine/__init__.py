"""The memory engine: one service per concern (see ``engine/engine.py``), built by ``Engine``."""

from spellbook.engine.engine import Engine, wipe_index

__all__ = ["Engine", "wipe_index"]
