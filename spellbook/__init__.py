"""Spellbook: a local-first memory server for AI agents, over a markdown vault you own."""

__version__ = "0.1.0"
