"""Three-way merge of one note, pure: base, ours and theirs in, one text out, and never a conflict
marker (docs/sync.md).

* Frontmatter merges field by field: a field only one side changed takes that side's value; lists
  (tags, links, relations...) merge as sets, keeping what either side added and dropping what
  either side removed; ``updated`` is the newer of the two, ``created`` the older; any other field
  both sides changed takes the value of the side updated last.
* The body: when only one side changed it, that side's body; when both changed it differently,
  ours stays in the note and theirs comes back as a ``Copy``, which the caller writes as a new
  note (a new id, ``contradicts`` the note) so that neither text is lost.
* Two different notes at one path (both sides created a note of that title) are not merged at
  all: ``collision`` tells the caller to give one of them a path of its own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from spellbook.vault.fields import new_id
from spellbook.vault.note import ParsedNote, parse_note, render_note

_MISSING = object()
CONFLICT_SUFFIX = " (conflict copy)"


@dataclass(frozen=True)
class Copy:
    """Their version of a note whose body both sides changed: written as a note of its own."""

    text: str
    note_id: str


@dataclass(frozen=True)
class Merged:
    text: str
    copy: Copy | None = None
    collision: bool = False  # two different notes at one path: keep ours here, theirs elsewhere


def merge_note(base: str | None, ours: str, theirs: str, path: str) -> Merged:
    """Merge ``theirs`` into ``ours`` over their common ``base`` (None: both created the file)."""
    if ours == theirs or base == theirs:
        return Merged(ours)
    if base == ours:
        return Merged(theirs)
    po, pt = parse_note(ours), parse_note(theirs)
    pb = parse_note(base) if base is not None else None
    oid, tid = po.meta.get("id"), pt.meta.get("id")
    if oid is not None and tid is not None and oid != tid:
        return Merged(ours, collision=True)
    if po.problem or pt.problem or (pb is not None and pb.problem):
        # Frontmatter that cannot be read cannot be merged by field: keep ours whole, theirs as a copy.
        return Merged(ours, _copy(pt, theirs, path))
    if base is None and po.body != pt.body:
        pb = ParsedNote(meta={}, body="")  # both created it: nothing in common
    bmeta, bbody = (pb.meta, pb.body) if pb is not None else ({}, po.body)
    meta = merge_fields(bmeta, po.meta, pt.meta)
    copy = None
    if po.body == pt.body or pt.body == bbody:
        body = po.body
    elif po.body == bbody:
        body = pt.body
    else:
        body = po.body
        copy = _copy(pt, theirs, path)
    if not meta and po.frontmatter is None:
        text = body
    else:
        removed = tuple(k for k in po.meta if k not in meta)
        text = render_note(meta, body, original=po, remove=removed)
    return Merged(text, copy)


def merge_fields(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Each field three ways (see the module's docstring); a field a side removed stays removed
    unless the other side changed it."""
    theirs_newer = _when(theirs.get("updated")) > _when(ours.get("updated"))
    out: dict[str, Any] = {}
    for key in list(dict.fromkeys([*ours, *theirs])):
        b, o, t = base.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING)
        value = _merge_value(key, b, o, t, theirs_newer)
        if value is not _MISSING:
            out[key] = value
    return out


def _merge_value(key: str, b: Any, o: Any, t: Any, theirs_newer: bool) -> Any:
    if o == t or t == b:
        return o
    if o == b:
        return t
    if o is _MISSING or t is _MISSING:  # removed on one side, changed on the other: the change stays
        return t if o is _MISSING else o
    if key == "updated":
        return max(o, t, key=_when)
    if key == "created":
        return min(o, t, key=_when)
    if isinstance(o, list) and isinstance(t, list):
        gone = [x for x in b if x not in o or x not in t] if isinstance(b, list) else []
        return [x for x in [*o, *(x for x in t if x not in o)] if x not in gone]
    if isinstance(o, dict) and isinstance(t, dict):
        return merge_fields(b if isinstance(b, dict) else {}, o, t)
    return t if theirs_newer else o


def _when(value: Any) -> dt.datetime:
    """A frontmatter time to compare (the oldest possible when it is not one)."""
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def conflict_path(path: str, taken: set[str]) -> str:
    """``a/Title.md`` -> ``a/Title (conflict copy).md``, numbered when that is taken too."""
    stem = path.removesuffix(".md")
    n = 1
    while True:
        candidate = f"{stem}{CONFLICT_SUFFIX}{'' if n == 1 else f' {n}'}.md"
        if candidate not in taken:
            return candidate
        n += 1


def _copy(theirs: ParsedNote, text: str, path: str) -> Copy:
    """Their note as a note of its own: a new id, a title that says what it is, and a
    ``contradicts`` link to the note at ``path`` (the vault path, which no other note answers to)."""
    copy_id = new_id()
    if theirs.problem or theirs.frontmatter is None:
        meta: dict[str, Any] = {"id": copy_id, "title": f"{path.rsplit('/', 1)[-1][:-3]}{CONFLICT_SUFFIX}"}
        meta["contradicts"] = [f"[[{path.removesuffix('.md')}]]"]
        return Copy(render_note(meta, text), copy_id)
    meta = dict(theirs.meta)
    meta["id"] = copy_id
    meta["title"] = f"{meta.get('title') or path.rsplit('/', 1)[-1][:-3]}{CONFLICT_SUFFIX}"
    link = f"[[{path.removesuffix('.md')}]]"
    earlier = meta.get("contradicts")
    meta["contradicts"] = [*(x for x in earlier if x != link), link] if isinstance(earlier, list) else [link]
    return Copy(render_note(meta, theirs.body, original=theirs), copy_id)
