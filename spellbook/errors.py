"""Every exception Spellbook raises on purpose.

Messages are written for the model that called a tool: they say what was wrong
and what to do next. The MCP layer turns any ``SpellbookError`` into an
``is_error`` tool result carrying exactly this text.

    SpellbookError
    ├── InvalidInputError (ValueError)      bad arguments: empty query, bad type, oversized text
    ├── NoteNotFoundError (LookupError)     no memory with that id
    ├── FileChangedError                    the file changed on disk since the caller read it (inside the owner)
    ├── ConflictError                       the same, as it leaves the owner: with the file's text, scrubbed
    ├── VaultPathError (ValueError)         a path would leave the vault or is not a note
    ├── UnknownOperationError (ValueError)  no operation of that name (here, or in an older owner process)
    ├── IndexUnavailableError               the index is still opening or another process failed
    ├── RemoteError                         an error of the owning process whose class is unknown here
    ├── VersionControlError                 no git history here (not a repository, git missing, busy)
    └── EmbedderError                       the embedding model could not be loaded, or refused
        │                                   (wrong key, no such model)
        ├── EmbedderUnavailableError        a network embedder did not answer (down, timing out, 5xx): retried later
        └── EmbedderInputError              the endpoint refused these texts (400, 413, 422: too long...)

Errors cross the owner/follower channel (spellbook/server/channel.py) as data, never pickled:
``to_wire()`` gives the class name, the message and the instance's public fields (JSON values);
``SpellbookError.from_wire()`` rebuilds the same class, by name, from the classes registered here
(every subclass, wherever it is defined), with the same message and fields. A name this process
does not know becomes a ``RemoteError`` with the message.
"""

from __future__ import annotations

import json
from typing import Any

_CLASSES: dict[str, type[SpellbookError]] = {}


class SpellbookError(Exception):
    """Base class: anything Spellbook raises deliberately."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _CLASSES.setdefault(cls.__name__, cls)  # the first class of a name keeps it

    def to_wire(self) -> dict[str, Any]:
        """``{"type", "message", "fields"}``: this error as JSON data."""
        fields = {}
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                continue
            fields[name] = value
        return {"type": type(self).__name__, "message": str(self), "fields": fields}

    @staticmethod
    def from_wire(data: Any) -> SpellbookError:
        """The error ``to_wire()`` described, as its own class when this process knows it."""
        if not isinstance(data, dict):
            return RemoteError(str(data))
        cls = _CLASSES.get(str(data.get("type")), RemoteError)
        error = cls.__new__(cls)
        Exception.__init__(error, str(data.get("message", "")))
        fields = data.get("fields")
        for name, value in fields.items() if isinstance(fields, dict) else ():
            if isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
                setattr(error, name, value)
        return error


_CLASSES["SpellbookError"] = SpellbookError


class InvalidInputError(SpellbookError, ValueError):
    pass


class NoteNotFoundError(SpellbookError, LookupError):
    def __init__(self, note_id: str, role: str = "") -> None:
        self.note_id = note_id
        what = f" (the {role})" if role else ""
        super().__init__(f"No memory with id {note_id!r}{what}. Call memorize or list_memories to find the right id.")


class FileChangedError(SpellbookError):
    """The note changed on disk after the caller read it; nothing was written. What the store and
    the services raise: ``content`` is the file as it is now, raw, and never in the message. It
    does not leave the owner as itself: the hub turns it into a ``ConflictError`` with the text
    scrubbed (``Access.conflict``), so a service never builds a ``ConflictError`` itself
    (tests/unit/test_privacy_door.py)."""

    def __init__(
        self, path: str, expected: str, current: str, content: str, note_id: str = "", retry: str = "revise"
    ) -> None:
        said = _changed(self, path, expected, current, content, note_id, retry)
        super().__init__(f"{said} Read it again, then call {retry} with its version.")

    def naming(self, note_id: str, retry: str) -> FileChangedError:
        """The same change, said of memory ``note_id`` and the call to retry (the store knows neither)."""
        return FileChangedError(self.path, self.expected_version, self.current_version, self.content, note_id, retry)


class ConflictError(SpellbookError):
    """A ``FileChangedError`` as it leaves the owner: the message carries the file's current text,
    scrubbed by the privacy filter. Built in one place, ``Access.conflict``, which the hub calls
    for every call that ends in a ``FileChangedError``."""

    def __init__(
        self, path: str, expected: str, current: str, content: str, note_id: str = "", retry: str = "revise"
    ) -> None:
        said = _changed(self, path, expected, current, content, note_id, retry)
        super().__init__(
            f"{said} Merge your change into the current content below and call {retry} again with "
            f"version={current!r}.\n--- current content ---\n{content}"
        )


def _changed(
    error: SpellbookError, path: str, expected: str, current: str, content: str, note_id: str, retry: str
) -> str:
    """Set a changed file's fields on ``error``; the sentence that says what happened."""
    error.note_id, error.path, error.content, error.retry = note_id, path, content, retry  # type: ignore[attr-defined]
    error.expected_version, error.current_version = expected, current  # type: ignore[attr-defined]
    what = f"Memory {note_id!r} ({path})" if note_id else path
    return (
        f"{what} changed on disk since you read it (you passed version {expected!r}, the file is now at "
        f"{current!r}). Nothing was written."
    )


class VaultPathError(SpellbookError, ValueError):
    pass


class IndexUnavailableError(SpellbookError):
    pass


class UnknownOperationError(SpellbookError, ValueError):
    """No operation has this name (spellbook/engine/operations.py): here, or in the process that
    owns the index when it runs an older version (``by_owner``)."""

    def __init__(self, name: str, by_owner: bool = False) -> None:
        self.name = name[:80]
        self.by_owner = by_owner
        if by_owner:
            super().__init__(
                f"The process that owns the index does not offer {self.name!r} yet; restart it with "
                "this version of Spellbook."
            )
        else:
            super().__init__(f"There is no operation {self.name!r}.")


class RemoteError(SpellbookError):
    """An error of the process that owns the index, of a class this process does not know: its
    message, unchanged."""


class EmbedderError(SpellbookError):
    pass


class EmbedderUnavailableError(EmbedderError):
    """The embedding endpoint did not answer after retries; it may come back by itself."""


class EmbedderInputError(EmbedderError):
    """The endpoint refused the texts themselves (HTTP 400/413/422); other texts may pass."""


class VersionControlError(SpellbookError):
    """The vault's git history cannot answer: git is missing, the vault is not a repository, or
    a restore would lose changes that are not committed."""
