"""Start-up and memory tricks, in one place, and the switch that turns them off (switch.py).

Each trick buys start-up time or memory, most by knowing how a pinned package is built inside
(docs/performance.md, "Start-up tricks", says what each costs and buys):

    front          the stdio wire taken first; the handshake and tool list answered from a cache
                   while the MCP SDK is still importing (front.py)
    deferred       the SDK's HTTP and crypto packages left unloaded by a stdio server (deferred.py)
    chroma_local   the embedded Chroma through its Rust bindings, without chromadb's Python layer
                   (chroma_local.py)
    heap           one glibc heap pool, and freed memory given back (heap.py)
    blas           OpenBLAS started with one thread (blas.py)

``SPELLBOOK_PLAIN_START=1`` turns every one off: mcp and chromadb are imported as they come, the
SDK does its own handshake over its own stdio transport, and the process keeps glibc's and
OpenBLAS's defaults. It is taken by itself when an installed version of a package the tricks were
written against is not that version (switch.py).

Standard library only: ``begin`` runs before anything else of Spellbook is imported.
"""

from __future__ import annotations

from spellbook.startup.switch import on, plain, reason

__all__ = ["begin", "on", "plain", "reason"]


def begin(argv: list[str]) -> None:
    """The tricks that must run before the command's imports, for ``spellbook <argv>``."""
    if plain():
        return
    from spellbook.startup import blas, front, heap

    if on("blas"):
        blas.one_thread()  # before numpy loads: no BLAS worker spinning beside the start
    if front.serves_stdio(argv):
        heap.limit_arenas()  # before the front's thread, the first of the process: one C heap pool
        if on("deferred"):
            from spellbook.startup.deferred import defer

            defer()  # the SDK's HTTP and request-state dependencies, never run over stdio
        if on("front"):
            front.start()
