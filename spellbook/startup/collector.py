"""The garbage collector while a bulk command (an import, an index) starts.

The objects that start makes (modules, classes, functions) live until the process ends, yet the
collector walked them again and again as they were made: 30 ms of a 1,000-note import's first
0.35 s (one full collection 16 ms of it), the model's thread waiting for the interpreter lock
meanwhile. ``pause`` (cli/__init__.py, from the command's first line) turns collection off;
``resume`` (``open_hub``, once the imports are done) sets what exists aside for good
(``gc.freeze``: no later collection looks at it) and collects again for the work itself.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Undo ``pause``; nothing if it did not pause."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
