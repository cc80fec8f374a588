"""The formats memories are exported to and imported from, each turned into the same entries
(``Entry``): pure functions, no I/O; engine/exchange.py reads and writes the files.

  spellbook_export  Spellbook's own export (JSON, version 1) and its markdown rendering (docs/export.md)
  mcp_memory        the official MCP memory server's knowledge graph (``memory.jsonl``), import only
"""
