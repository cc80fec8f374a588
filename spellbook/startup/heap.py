"""The process's C heap (glibc malloc): what the server gives back to the system, and how many pools
it keeps. A no-op off glibc.

glibc gives each thread that allocates while another holds the lock a pool (arena) of its own, up
to 8 per core; memory freed in one pool serves only that pool's threads again. The owner's threads
take turns (the MCP SDK's workers, the watcher, the vector writer, SQLite, the model), so freed
memory piles up in many half-empty pools. One pool for the process: measured through the MCP stdio
client on a 2-core machine, the owner after start 208 -> 178 MB, after 3,000 scribes 261 -> 222 MB,
once at rest 252 -> 199 MB (two pools: 186 / 230 / 209). Python's own small objects never reach it
(pymalloc), and numpy's large arrays are mapped on their own, so the lock is rarely contended.
"""

from __future__ import annotations

import ctypes

from spellbook.startup import switch

M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 1


def limit_arenas(count: int = ARENAS) -> bool:
    """Keep the C heap in ``count`` pools; call before threads start (pools made already stay)."""
    if not switch.on("heap"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, count))
    except (OSError, AttributeError):
        return False


def trim_heap() -> None:
    """Give the memory freed after a large read back to the system (glibc keeps it otherwise:
    ~35 MB after loading 10k vectors and a start-up reconcile)."""
    if not switch.on("heap"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
