"""The command line: ``spellbook init | serve | index | search | ... | install | doctor`` (main.py),
MCP client configuration (clients.py) and the doctor's checks (doctor.py)."""

from spellbook.cli.main import main, run

__all__ = ["main", "run"]
