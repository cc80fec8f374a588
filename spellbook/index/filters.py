"""Search and list filters -> a SQL condition over the catalog's ``notes`` table. Pure. The filter
itself, a pydantic model (a tool's input schema), is in filter_model.py, imported by the first filter.

Every condition also hides archived notes (under ``_archive/``) and notes whose ``expires`` has
passed, by SQLite's own clock, unless the filter's ``folder`` is inside ``_archive/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spellbook.errors import InvalidInputError
from spellbook.vault.paths import is_archived

if TYPE_CHECKING:
    from spellbook.index.filter_model import Filter
    from spellbook.scope import Scope

NOW_SQL = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"  # the format of notes.expires (UTC)
LIVE_SQL = f"(notes.archived = 0 AND (notes.expires IS NULL OR notes.expires > {NOW_SQL}))"
HIDDEN_SQL = f"(notes.archived = 1 OR notes.expires <= {NOW_SQL})"  # NOT LIVE_SQL, in a form indexes serve
# A captured session's note has one section per event, headed "<event type> · <time> · <gist>"
# (spellbook/sessions/notes.py): the event type of a chunk is the first word of its heading.
EVENT_TYPES: tuple[str, ...] = ("prompt", "response", "tool", "insight")
EVENT_SEPARATOR = " · "


def event_type_of(heading: str | None) -> str | None:
    """The event type a session note's section heading names, or None for any other heading."""
    first = (heading or "").split(EVENT_SEPARATOR, 1)[0].strip()
    return first if first in EVENT_TYPES else None


def to_sql(spec: Filter | None, include_hidden: bool = False, scope: Scope | None = None) -> tuple[str, list[Any]]:
    """(condition, parameters) over ``notes``: live notes only, unless ``folder`` is the archive
    or ``include_hidden`` (export: every indexed note); only what ``scope`` sees (spellbook/scope.py:
    the engine passes the running call's, ``Access.where``)."""
    hidden = include_hidden or bool(spec and spec.folder and is_archived(spec.folder))
    clauses: list[str] = [] if hidden else [LIVE_SQL]
    params: list[Any] = []
    if scope:
        condition, values = scope.sql()
        clauses.append(condition)
        params.extend(values)
    if spec is None:
        return (" AND ".join(clauses) or "1"), params
    for column in ("category", "topic", "type", "context", "user"):
        value = getattr(spec, column)
        if value is not None:
            clauses.append(f"notes.{column} = ? COLLATE NOCASE")
            params.append(value)
    # EXISTS, not "path IN (SELECT ...)": SQLite probes the list subquery badly when the outer
    # query starts from chunks (1.9 s vs 19 ms for 200 chunks at 100k notes).
    for tag in spec.tags or []:
        clauses.append("EXISTS (SELECT 1 FROM tags t WHERE t.path = notes.path AND t.tag = ?)")
        params.append(tag)
    if spec.tags_any:
        marks = ",".join("?" * len(spec.tags_any))
        clauses.append(f"EXISTS (SELECT 1 FROM tags t WHERE t.path = notes.path AND t.tag IN ({marks}))")
        params.extend(spec.tags_any)
    if spec.session is not None:
        clauses.append("notes.session = ?")
        params.append(spec.session.strip())
    if spec.event_type is not None:  # notes with such an event; search keeps only those sections (searcher)
        clauses.append("EXISTS (SELECT 1 FROM chunks ec WHERE ec.path = notes.path AND ec.heading LIKE ?)")
        params.append(spec.event_type + EVENT_SEPARATOR + "%")
    if spec.importance is not None:
        clauses.append("coalesce(notes.importance, 0) >= ?")
        params.append(spec.importance)
    if spec.folder:
        clauses.append("(notes.folder = ? OR notes.folder LIKE ? ESCAPE '\\')")
        escaped = spec.folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params.extend([spec.folder, escaped + "/%"])
    if spec.updated_after:
        clauses.append("coalesce(notes.updated, notes.created, '') >= ?")
        params.append(spec.updated_after)
    if spec.updated_before:
        clauses.append("coalesce(notes.updated, notes.created, '') < ?")
        params.append(spec.updated_before)
    return (" AND ".join(clauses) or "1"), params


def to_chunk_sql(
    spec: Filter | None, include_hidden: bool = False, scope: Scope | None = None
) -> tuple[str, list[Any]]:
    """``to_sql`` for queries that join ``chunks c`` (search): ``event_type`` then selects the
    sections themselves, not only the notes that have one."""
    where, params = to_sql(spec, include_hidden, scope)
    if spec is None or spec.event_type is None:
        return where, params
    return f"({where}) AND c.heading LIKE ?", [*params, spec.event_type + EVENT_SEPARATOR + "%"]


def parse_filter(value: Filter | dict | None) -> Filter | None:
    """A tool's filter argument (an object or None) as a Filter, with a clear error when wrong."""
    from spellbook.index.filter_model import Filter  # pydantic: imported by the first filter, not at start

    if value is None or isinstance(value, Filter):
        return value
    if not isinstance(value, dict):
        raise InvalidInputError("filter must be an object like {'category': 'system'}.")
    try:
        return Filter.model_validate(value) if value else None
    except Exception as exc:  # noqa: BLE001 -- pydantic ValidationError: say which key was wrong
        raise InvalidInputError(f"Invalid filter: {exc}. Allowed keys: {', '.join(Filter.model_fields)}.") from None
