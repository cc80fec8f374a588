"""The command line: ``spellbook init | serve | index | search | ... | install | doctor`` (main.py),
MCP client configuration (clients.py) and the doctor's checks (doctor.py).

``run`` (the console script) imports nothing heavy before a stdio server has taken the wire and
can answer the client's opening requests (spellbook/server/front.py), or before an import or an
index has started loading the default model (spellbook/embedders/ahead.py); ``main`` is imported
when first asked for."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["main", "run"]


def run() -> None:
    from spellbook.cli import collector
    from spellbook.embedders import ahead, blas
    from spellbook.server import front

    blas.one_thread()  # before numpy loads: no BLAS worker spinning beside the start (embedders/blas.py)

    if front.serves_stdio(sys.argv[1:]):
        from spellbook.index.heap import limit_arenas
        from spellbook.server.deferred import defer

        limit_arenas()  # before the front's thread, the first of the process: one C heap pool (index/heap.py)
        defer()  # the SDK's HTTP and request-state dependencies, never run over stdio (server/deferred.py)
        front.start()
    elif ahead.embeds_in_bulk(sys.argv[1:]):
        from spellbook.index.heap import limit_arenas

        limit_arenas()  # before the first thread, as above
        ahead.load_ahead()  # the model loads beside the imports below (embedders/ahead.py)
        collector.pause()  # until the index opens: the start's objects live to the end (cli/collector.py)
    try:
        from spellbook.cli.main import run as run_command

        run_command()  # an import or an index that succeeds leaves by os._exit, never through here
    finally:
        ahead.settle()  # an error, Ctrl-C: not out while the model's thread is in C++


def __getattr__(name: str) -> Any:
    if name == "main":
        from spellbook.cli.main import main

        return main
    raise AttributeError(f"module 'spellbook.cli' has no attribute {name!r}")
