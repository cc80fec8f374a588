"""Every exception Spellbook raises on purpose.

Messages are written for the model that called a tool: they say what was wrong
and what to do next. The MCP layer turns any ``SpellbookError`` into an
``is_error`` tool result carrying exactly this text.

    SpellbookError
    ├── InvalidInputError (ValueError)      bad arguments: empty query, bad type, oversized text
    ├── NoteNotFoundError (LookupError)     no memory with that id
    ├── ConflictError                       the file changed on disk since the caller read it
    ├── VaultPathError (ValueError)         a path would leave the vault or is not a note
    ├── IndexUnavailableError               the index is still opening or another process failed
    ├── VersionControlError                 no git history here (not a repository, git missing, busy)
    └── EmbedderError                       the embedding model could not be loaded, or refused (wrong key, no such model)
        ├── EmbedderUnavailableError        a network embedder did not answer (down, timing out, 5xx): retried later
        └── EmbedderInputError              the endpoint refused these texts (400, 413, 422: too long...)
"""

from __future__ import annotations


class SpellbookError(Exception):
    """Base class: anything Spellbook raises deliberately."""


class InvalidInputError(SpellbookError, ValueError):
    pass


class NoteNotFoundError(SpellbookError, LookupError):
    def __init__(self, note_id: str, role: str = "") -> None:
        self.note_id = note_id
        what = f" (the {role})" if role else ""
        super().__init__(
            f"No memory with id {note_id!r}{what}. Call memorize or list_memories to find the right id."
        )


class ConflictError(SpellbookError):
    """The note changed on disk after the caller read it; nothing was written."""

    def __init__(self, path: str, expected: str, current: str, content: str, note_id: str = "") -> None:
        self.note_id = note_id
        self.path = path
        self.current_version = current
        self.content = content
        what = f"Memory {note_id!r} ({path})" if note_id else path
        super().__init__(
            f"{what} changed on disk since you read it "
            f"(you passed version {expected!r}, the file is now at {current!r}). Nothing was written. "
            f"Merge your change into the current content below and call revise again with "
            f"version={current!r}.\n--- current content ---\n{content}"
        )


class VaultPathError(SpellbookError, ValueError):
    pass


class IndexUnavailableError(SpellbookError):
    pass


class EmbedderError(SpellbookError):
    pass


class EmbedderUnavailableError(EmbedderError):
    """The embedding endpoint did not answer after retries; it may come back by itself."""


class EmbedderInputError(EmbedderError):
    """The endpoint refused the texts themselves (HTTP 400/413/422); other texts may pass."""


class VersionControlError(SpellbookError):
    """The vault's git history cannot answer: git is missing, the vault is not a repository, or
    a restore would lose changes that are not committed."""
