"""The search and list filter: a pydantic model, which is the ``filter`` input schema of the tools
that take one. In a module of its own so that a command which filters nothing (an import, an index)
does not import pydantic at its start; filters.py turns it into SQL."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spellbook.vault.fields import normalize_importance, normalize_tags


class Filter(BaseModel):
    """Every field narrows the result; all given fields must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str | None = None
    topic: str | None = None
    tags: list[str] | None = Field(default=None, description="Notes having ALL of these tags.")
    tags_any: list[str] | None = Field(default=None, description="Notes having ANY of these tags.")
    type: str | None = None
    context: str | None = None
    user: str | None = None
    importance: int | None = Field(default=None, description="Minimum importance, 1-5.")
    folder: str | None = Field(
        default=None,
        description="Vault folder, e.g. 'projects/spellbook'; includes subfolders. '_archive': expired memories.",
    )
    session: str | None = Field(default=None, description="A Claude Code session id: its captured events and memories.")
    event_type: Literal["prompt", "response", "tool", "insight"] | None = Field(
        default=None, description="Only this kind of event of captured sessions (search hits are that event)."
    )
    updated_after: str | None = Field(default=None, description="ISO date or datetime.")
    updated_before: str | None = Field(default=None, description="ISO date or datetime.")

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: Any) -> int | None:
        return normalize_importance(value, strict=True)

    @field_validator("tags", "tags_any", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> list[str] | None:
        return None if value is None else normalize_tags(value)

    @field_validator("folder", mode="before")
    @classmethod
    def _folder(cls, value: Any) -> str | None:
        return None if value is None else str(value).strip().strip("/")
