"""The command line: ``spellbook init | serve | index | search | ... | install | doctor`` (main.py),
MCP client configuration (clients.py) and the doctor's checks (doctor.py).

``run`` (the console script) imports nothing heavy before the start-up tricks have run
(spellbook/startup/: a stdio server has taken the wire and can answer the client's opening
requests); ``main`` is imported when first asked for."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["main", "run"]


def run() -> None:
    from spellbook.startup import begin

    begin(sys.argv[1:])  # SPELLBOOK_PLAIN_START=1: nothing
    from spellbook.cli.main import run as run_command

    run_command()


def __getattr__(name: str) -> Any:
    if name == "main":
        from spellbook.cli.main import main

        return main
    raise AttributeError(f"module 'spellbook.cli' has no attribute {name!r}")
