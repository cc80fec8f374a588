"""What every service asks before it answers: may this call see that note, what must be scrubbed
from a text, which note an id names, and has the first index finished.

Two small collaborators, built once by ``Engine`` and passed to the services that need them (so
the scope rule, the privacy filter and the id lookup exist once):

* ``Access``: scope visibility (spellbook/scope.py), the privacy filter (spellbook/vault/privacy.py),
  and the note an id names, as the running call's scope sees it. It is the one reader of the
  running call's scope (the context variable the hub sets): the services ask it (``scope``,
  ``where``, ``visible``), and the conflict a caller gets is built here (``conflict``).
* ``Readiness``: the progress of the index build, and the short wait early reads make for it.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from spellbook.config import Settings
from spellbook.errors import ConflictError, FileChangedError, InvalidInputError, NoteNotFoundError, SpellbookError
from spellbook.index.catalog import Catalog, NoteRow
from spellbook.index.filters import to_chunk_sql, to_sql
from spellbook.index.indexer import SyncReport
from spellbook.scope import Scope, scoped
from spellbook.scope import current as current_scope
from spellbook.vault.privacy import KINDS, Redaction, may_hold_secrets, redact, redact_data

if TYPE_CHECKING:
    from spellbook.index.filter_model import Filter

SCRUB_CACHE = 4096  # sections; a few MB at most


class Access:
    """Scope, privacy and id lookup for the running call."""

    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.catalog = catalog
        self.enabled = settings.redact
        self.privacy = {"extra_patterns": tuple(settings.redact_patterns), "disabled": tuple(settings.redact_disabled)}
        try:
            redact("", **self.privacy)  # a typo in a disabled kind or a bad regex fails now
        except ValueError as exc:
            raise InvalidInputError(f"Privacy settings: {exc}. Known kinds: {', '.join(KINDS)}.") from None
        self._scrubbed: OrderedDict[str, str] = OrderedDict()  # section text -> the same text scrubbed
        self._scrubbed_lock = threading.Lock()

    def scrub(self, text: str) -> tuple[str, list[Redaction]]:
        """Secrets out of text going into the vault or out in an answer (unless disabled)."""
        return redact(text, **self.privacy) if self.enabled else (text, [])

    def scrubbed(self, text: str) -> str:
        """``scrub(text)``'s text, remembered for the last SCRUB_CACHE texts: search scrubs the
        same sections again and again (a quarter of a query's time before)."""
        if not self.enabled:
            return text
        with self._scrubbed_lock:
            clean = self._scrubbed.get(text)
            if clean is not None:
                self._scrubbed.move_to_end(text)
                return clean
        clean = redact(text, **self.privacy)[0]
        with self._scrubbed_lock:
            self._scrubbed[text] = clean
            if len(self._scrubbed) > SCRUB_CACHE:
                self._scrubbed.popitem(last=False)
        return clean

    def may_hold_secrets(self, text: str) -> bool:
        """False when ``scrub(text)`` would change nothing for sure (spellbook/vault/privacy.py)."""
        return self.enabled and may_hold_secrets(text, self.privacy["extra_patterns"])

    def conflict(self, changed: FileChangedError) -> ConflictError:
        """The ``ConflictError`` a caller gets for ``changed``: the file's text scrubbed. The one
        place a conflict error is built, where every call leaves the owner (server/hub.py), so no
        service scrubs, or builds, its own."""
        return ConflictError(
            changed.path,
            changed.expected_version,
            changed.current_version,
            self.scrub(changed.content)[0],
            note_id=changed.note_id,
            retry=changed.retry,
        )

    def scrub_data(self, value: Any) -> tuple[Any, list[str]]:
        return redact_data(value, **self.privacy) if self.enabled else (value, [])

    @staticmethod
    def scope() -> Scope:
        """The running call's scope (spellbook/scope.py; the hub sets it around each call)."""
        return current_scope()

    @staticmethod
    def within(scope: Scope) -> contextlib.AbstractContextManager[None]:
        """Run a block in ``scope`` (the memo recomputes a kept answer in the scope that asked)."""
        return scoped(scope)

    def where(self, spec: Filter | None, include_hidden: bool = False) -> tuple[str, list[Any]]:
        """(condition, parameters) over ``notes`` for ``spec``, in the running call's scope (index/filters.py)."""
        return to_sql(spec, include_hidden, self.scope())

    def chunk_where(self, spec: Filter | None) -> tuple[str, list[Any]]:
        """``where`` for queries that join ``chunks c`` (search)."""
        return to_chunk_sql(spec, scope=self.scope())

    @staticmethod
    def visible(note: NoteRow) -> bool:
        """Does the running call's scope see this note (spellbook/scope.py)?"""
        return current_scope().sees(note.context, note.user)

    def note(self, note_id: str) -> NoteRow:
        """The catalog row of the memory with this id, if the call's scope sees it."""
        if not isinstance(note_id, str) or not note_id.strip():
            raise InvalidInputError("id is empty; pass the id of a memory (from memorize or list_memories).")
        rows = [r for r in self.catalog.notes_by_id(note_id.strip()) if self.visible(r)]
        if not rows:  # another scope's memory is not found either: its existence is not leaked
            raise NoteNotFoundError(note_id)
        if len(rows) > 1:
            raise SpellbookError(
                f"Id {note_id!r} is used by {len(rows)} files ({', '.join(r.path for r in rows)}); "
                "give one of them a new id by hand, then retry."
            )
        return rows[0]

    def note_as(self, note_id: str, role: str) -> NoteRow:
        """``note``, with the role the id plays in the call named in the error (source, link target)."""
        try:
            return self.note(note_id)
        except NoteNotFoundError:
            raise NoteNotFoundError(note_id, role) from None

    def link(self, target: str) -> dict[str, Any]:
        """A link's target as the call sees it: the note it resolves to, or unresolved."""
        found = self.catalog.links.resolve_link(target)
        visible = found is not None and self.visible(found)
        return {"target": target, **(found.ref() if visible else {"resolved": False})}


class Readiness:
    """How far the index build is (``stats`` shows it), and whether the first one finished."""

    def __init__(self) -> None:
        self.progress: dict[str, Any] = {"state": "opening", "done": 0, "total": 0}
        self.last_report: SyncReport | None = None
        self._reconciled = threading.Event()

    def indexing(self, done: int, total: int) -> None:
        self.progress.update(state="indexing", done=done, total=total)

    def ready(self, report: SyncReport) -> None:
        self.progress.update(state="ready")
        self.last_report = report
        self._reconciled.set()

    def await_first_index(self, timeout: float = 10.0) -> str | None:
        """Give the first reconcile after start a moment to finish, so early reads see the vault.
        Returns a note for the caller when it is still running."""
        if self._reconciled.wait(timeout):
            return None
        done, total = self.progress["done"], self.progress["total"]
        return f"The index is still being built ({done}/{total} files); results may be incomplete. Retry shortly."
