"""Start-up and memory tricks, in one place, and the switch that turns them off (switch.py).

Each trick buys start-up time or memory by knowing how a pinned package is built inside
(docs/performance.md, "Start-up tricks", says what each costs and buys):

    front          the stdio wire taken first; the handshake and tool list answered from a cache
                   while the MCP SDK is still importing (front.py)
    deferred       the SDK's HTTP and crypto packages left unloaded by a stdio server (deferred.py)
    chroma_local   the embedded Chroma through its Rust bindings, without chromadb's Python layer
                   (chroma_local.py)
    ahead          the default model loaded beside an import's or an index's imports (ahead.py)
    heap           one glibc heap pool, and freed memory given back (heap.py)
    blas           OpenBLAS started with one thread (blas.py)
    collector      no garbage collection while a bulk command imports (collector.py)

``SPELLBOOK_PLAIN_START=1`` turns every one off: mcp and chromadb are imported as they come, the
SDK does its own handshake over its own stdio transport, the model loads when the engine opens,
and the process keeps Python's and glibc's defaults. It is taken by itself when an installed
version of a package the tricks were written against is not that version (switch.py).

Standard library only: ``begin`` runs before anything else of Spellbook is imported.
"""

from __future__ import annotations

import sys

from spellbook.startup.switch import on, plain, reason

__all__ = ["begin", "on", "plain", "reason", "settle"]


def begin(argv: list[str]) -> None:
    """The tricks that must run before the command's imports, for ``spellbook <argv>``."""
    if plain():
        return
    from spellbook.startup import ahead, blas, collector, front, heap

    if on("blas"):
        blas.one_thread()  # before numpy loads: no BLAS worker spinning beside the start
    if front.serves_stdio(argv):
        heap.limit_arenas()  # before the front's thread, the first of the process: one C heap pool
        if on("deferred"):
            from spellbook.startup.deferred import defer

            defer()  # the SDK's HTTP and request-state dependencies, never run over stdio
        if on("front"):
            front.start()
    elif ahead.embeds_in_bulk(argv):
        heap.limit_arenas()  # before the first thread, as above
        if on("ahead"):
            ahead.load_ahead()  # the model loads beside the command's imports
        if on("collector"):
            collector.pause()  # until the index opens: the start's objects live to the end


def settle() -> None:
    """Before the process leaves: wait for the model's thread, if one started (ahead.py)."""
    ahead = sys.modules.get("spellbook.startup.ahead")
    if ahead is not None:
        ahead.settle()
