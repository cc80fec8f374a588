"""Scopes: one vault serving several projects (``context``) and people (``user``).

A call runs in a scope (the tool's ``context``/``user`` arguments, else the server's
``SPELLBOOK_CONTEXT``/``SPELLBOOK_USER``). In a scope, a call sees the memories of that scope and
the shared ones (no ``context``/``user`` at all, such as the vault's guide notes), and never
another scope's; what it writes is stamped with the scope. The engine reads the scope of the
running call from a context variable, set by the hub around each call (``scoped``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from spellbook.errors import InvalidInputError

MAX_SCOPE_CHARS = 200


@dataclass(frozen=True)
class Scope:
    context: str | None = None
    user: str | None = None

    def __bool__(self) -> bool:
        return bool(self.context or self.user)

    def sql(self) -> tuple[str, list[Any]]:
        """(condition over ``notes``, parameters): visible in this scope; ``1`` when unscoped."""
        clauses: list[str] = []
        params: list[Any] = []
        for column in ("context", "user"):
            value = getattr(self, column)
            if value:
                clauses.append(f"(notes.{column} IS NULL OR notes.{column} = ? COLLATE NOCASE)")
                params.append(value)
        return (" AND ".join(clauses) or "1"), params

    def sees(self, context: str | None, user: str | None) -> bool:
        """Is a note with this context and user visible in this scope?"""
        return all(
            not mine or not theirs or mine.casefold() == theirs.casefold()
            for mine, theirs in ((self.context, context), (self.user, user))
        )

    def describe(self) -> str:
        parts = [f"{name} {value!r}" for name, value in (("context", self.context), ("user", self.user)) if value]
        return " and ".join(parts) or "no scope"


_CURRENT: ContextVar[Scope] = ContextVar("spellbook_scope", default=Scope())  # noqa: B039 - frozen


def current() -> Scope:
    return _CURRENT.get()


def scoped(scope: Scope) -> contextlib.AbstractContextManager[None]:
    return _bound(_CURRENT, scope)


@contextlib.contextmanager
def _bound(var: ContextVar[Any], value: Any) -> Iterator[None]:
    """``var`` is ``value`` for the block (and in threads started from it with the context copied)."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def resolve(asked_context: Any, asked_user: Any, default_context: str | None, default_user: str | None) -> Scope:
    """The scope of a call: what it asked for, else the server's. A server started in a scope
    (a project's own config) refuses calls into another one."""
    values: dict[str, str | None] = {}
    for name, asked, default in (("context", asked_context, default_context), ("user", asked_user, default_user)):
        if asked is not None and not isinstance(asked, str):
            raise InvalidInputError(f"{name} must be a string (a project or person name).")
        asked = " ".join(asked.split()) if asked else None
        if asked and len(asked) > MAX_SCOPE_CHARS:
            raise InvalidInputError(f"{name} is {len(asked)} characters; keep it under {MAX_SCOPE_CHARS}.")
        if asked and default and asked.casefold() != default.casefold():
            raise InvalidInputError(
                f"This server is scoped to {name} {default!r} (SPELLBOOK_{name.upper()}); it cannot read or write "
                f"{name} {asked!r}. Leave {name} out, or start a server without SPELLBOOK_{name.upper()}."
            )
        values[name] = asked or default or None
    return Scope(values["context"], values["user"])


# --- who is calling: recorded with each write in the activity log (engine/activity.py) -------------
@dataclass(frozen=True)
class Actor:
    """The client (its MCP ``clientInfo`` name, or ``cli``/``web``) and session behind a call."""

    client: str | None = None
    session: str | None = None


_ACTOR: ContextVar[Actor] = ContextVar("spellbook_actor", default=Actor())  # noqa: B039 - frozen


def actor() -> Actor:
    return _ACTOR.get()


def acting(who: Actor) -> contextlib.AbstractContextManager[None]:
    return _bound(_ACTOR, who)
