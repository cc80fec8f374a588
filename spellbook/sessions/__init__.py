"""Session memory for Claude Code: its sessions captured as notes, and recalled at the next start.

``transcript`` (the JSONL -> exchanges), ``notes`` (exchanges -> markdown notes), ``capture``
(notes -> vault, through the index owner, idempotent), ``recall`` (the SessionStart and
UserPromptSubmit context), ``hook`` (the ``spellbook hook <event>`` command). docs/sessions.md.
"""
