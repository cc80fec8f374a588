"""Session memory for Claude Code: its sessions captured as notes, and recalled at the next start.

``transcript`` (the JSONL -> exchanges), ``digest`` (a session's digest, extractive), ``notes``
(exchanges -> markdown notes), ``capture`` (notes -> vault, through the index owner, idempotent),
``briefing`` (the SessionStart context), ``recall`` (the UserPromptSubmit context), ``hook`` (the
``spellbook hook <event>`` command). docs/sessions.md.
"""
