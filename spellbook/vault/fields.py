"""Frontmatter fields as values: normalising what an agent passes and what a person wrote by hand."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
from typing import Any

from spellbook.errors import InvalidInputError
from spellbook.vault.paths import ARCHIVE_DIR

IMPORTANCE_WORDS = {"low": 1, "medium": 3, "high": 5}
# Typed links between notes: one frontmatter list of "[[wikilinks]]" per relation (docs/note-format.md).
RELATIONS: tuple[str, ...] = ("related", "supersedes", "contradicts", "extends", "depends_on")
LINK_REASONS = "link_reasons"  # frontmatter mapping: relation -> link text -> why
MAX_LIST_ITEMS = 100  # Chroma bricks a collection on lists over 5,461 items; keep far below
MAX_FIELD_CHARS = 2_000

_INLINE_TAG = re.compile(r"(?<![\w/#&\]`])#([^\W\d][\w/-]*|\d+[^\W\d][\w/-]*)", re.UNICODE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def new_id() -> str:
    """A new memory id: 16 hex characters, random (ids are never reused or derived from content)."""
    return secrets.token_hex(8)


def derived_id(path: str) -> str:
    """The id of a note that has none in its frontmatter (a hand-written note): from its path."""
    return "h-" + hashlib.sha1(path.encode("utf-8")).hexdigest()[:14]


def note_id_of(meta: dict[str, Any], path: str) -> str:
    """The id of the note at ``path`` with this frontmatter: its ``id``, else the one its path gives it."""
    value = meta.get("id")
    return str(value).strip() if isinstance(value, str | int) and str(value).strip() else derived_id(path)


def field_text(value: Any) -> str | None:
    """A frontmatter value as one line of text (a list, a mapping or an empty value: None)."""
    if value is None or isinstance(value, list | dict):
        return None
    return str(value).strip() or None


def scope_of(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """(context, user) of a note with this frontmatter, as the index and the scope test read them."""
    return field_text(meta.get("context")), field_text(meta.get("user"))


def normalize_tag(tag: str) -> str:
    tag = str(tag).strip().lstrip("#").strip()
    return re.sub(r"\s+", "-", tag)


def normalize_tags(value: Any) -> list[str]:
    """Tags as Obsidian stores them: a list of strings without '#'. Accepts a list or a string."""
    if value is None:
        return []
    if isinstance(value, str):
        items = re.split(r"[,\s]+", value)
    elif isinstance(value, list | tuple):
        items = [str(v) for v in value if v is not None]
    else:
        items = [str(value)]
    return list(dict.fromkeys(t for t in (normalize_tag(i) for i in items) if t))[:MAX_LIST_ITEMS]


def normalize_importance(value: Any, strict: bool = False) -> int | None:
    """Importance 1-5; 'low' / 'medium' / 'high' become 1 / 3 / 5."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in IMPORTANCE_WORDS:
            return IMPORTANCE_WORDS[word]
        if word.isdigit():
            value = int(word)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 5:
        if strict:
            raise InvalidInputError(
                f"importance must be an integer from 1 to 5 or one of low/medium/high; got {value!r}."
            )
        return None
    return int(value)


def parse_expires(value: Any) -> dt.datetime | None:
    """An ``expires`` value as an aware datetime, or None when absent or unreadable. An ISO
    date-time without an offset, and a date (the start of that day), are in local time."""
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime.combine(value, dt.time())
    elif isinstance(value, str) and value.strip():
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    return when if when.tzinfo is not None else when.astimezone()


def expires_key(value: Any) -> str | None:
    """``expires`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ``: what the catalog compares with SQLite's clock."""
    when = parse_expires(value)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


def normalize_expires(value: Any) -> str:
    """``expires`` as an agent passes it -> as it is written: a date stays a date, a date-time
    gets an offset (local time when it had none), to the second."""
    when = parse_expires(value)
    if when is None:
        raise InvalidInputError(
            f"expires must be an ISO date or date-time, e.g. '2026-12-01' or '2026-12-01T18:00:00+09:00'; "
            f"got {value!r}. Or pass ttl_days instead."
        )
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        return value.strip()
    return when.replace(microsecond=0).isoformat()


def expires_in(days: Any) -> str:
    """``ttl_days`` -> an ``expires`` that many days from now (local time, to the second)."""
    if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days <= 36_500:
        raise InvalidInputError(f"ttl_days must be a number of days above 0 (e.g. 3 or 0.5); got {days!r}.")
    now = dt.datetime.now(dt.UTC).astimezone()
    return (now + dt.timedelta(days=days)).replace(microsecond=0).isoformat()


def string_list(name: str, value: Any) -> list[str]:
    """A list field (keywords, questions, entities, links): strings, trimmed, de-duplicated."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"{name} must be a list of strings; got {type(value).__name__}.")
    out = [str(v).strip() for v in value if v is not None and str(v).strip()]
    if len(out) > MAX_LIST_ITEMS:
        raise InvalidInputError(f"{name} has {len(out)} items; at most {MAX_LIST_ITEMS} are allowed.")
    too_long = [v for v in out if len(v) > MAX_FIELD_CHARS]
    if too_long:
        raise InvalidInputError(f"An item of {name} is over {MAX_FIELD_CHARS} characters; shorten it.")
    return list(dict.fromkeys(out))


def inline_tags(body: str) -> list[str]:
    """``#tags`` written in the body (outside code), as Obsidian reads them."""
    text = _INLINE_CODE.sub(" ", _FENCE.sub(" ", body))
    return [normalize_tag(t) for t in _INLINE_TAG.findall(text)]


# The target stops before a backslash that escapes the alias bar: ``[[Note\|shown]]``, as written in tables.
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#^\n]+?)\\?(?:[#^][^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# Files Obsidian opens besides notes (its "Accepted file formats"): a link to one is not a link to a memory.
_ATTACHMENT = re.compile(
    r"\.(?:avif|bmp|gif|jpe?g|png|svg|webp|flac|m4a|mp3|ogg|wav|webm|3gp|mkv|mov|mp4|ogv|pdf|base|canvas)$",
    re.IGNORECASE,
)


def wikilinks(body: str, meta_links: Any = None) -> list[str]:
    """``[[Target]]`` / ``[[Target|alias]]`` / ``[[Target#heading]]`` targets in the body (outside
    code) and in a frontmatter ``links`` list, in order, without duplicates."""
    text = _INLINE_CODE.sub(" ", _FENCE.sub(" ", body))
    found = [m.strip() for m in _WIKILINK.findall(text)]
    if isinstance(meta_links, list):
        for item in meta_links:
            item = str(item)
            inner = _WIKILINK.findall(item)
            found.extend(m.strip() for m in inner) if inner else found.append(item.strip())
    return list(dict.fromkeys(t for t in found if t and not _ATTACHMENT.search(t)))[:MAX_LIST_ITEMS]


def relation_links(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(relation, target) for every ``[[wikilink]]`` in the relation keys of the frontmatter
    (``related: ["[[Other]]"]``...), in order, without duplicates. As in Obsidian, an item that is
    not a wikilink is not a link."""
    found: list[tuple[str, str]] = []
    for relation in RELATIONS:
        value = meta.get(relation)
        items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in items[:MAX_LIST_ITEMS]:
            found.extend((relation, target) for target in link_targets(item) if not _ATTACHMENT.search(target))
    return list(dict.fromkeys(found))


def link_targets(item: Any) -> list[str]:
    """The targets of the ``[[wikilinks]]`` in one frontmatter list item."""
    return [t.strip() for t in _WIKILINK.findall(str(item)) if t.strip()]


def title_of(meta: dict[str, Any], path: str) -> str:
    """A note's title: frontmatter ``title``, else its file name without ``.md``, as Obsidian names it
    (a first heading is often an example or a section, not the note's name)."""
    title = meta.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    name = path.rsplit("/", 1)[-1]
    return name.removesuffix(".md")


def place_of(meta: dict[str, Any], path: str) -> tuple[str | None, str | None]:
    """A note's category and topic: frontmatter ``category``/``topic``, else its folders, read the
    way Spellbook files a memory (``<category>/<topic>/<note>.md``; deeper folders stay in the path,
    ``_archive/`` in front is skipped). A folder topic goes with the folder category only: a note
    whose frontmatter names another category is not given a topic by where it sits."""
    folders = path.split("/")[:-1]
    if folders[:1] == [ARCHIVE_DIR]:
        folders = folders[1:]
    category = field_text(meta.get("category"))
    topic = field_text(meta.get("topic"))
    if folders and (category is None or category.casefold() == folders[0].casefold()):
        category = category or folders[0]
        topic = topic or (folders[1] if len(folders) > 1 else None)
    return category, topic


def title_from_text(text: str) -> str:
    """A title for a memory scribed without one: its first heading or first line, shortened."""
    match = _H1.search(text)
    line = match.group(1) if match else next((ln for ln in text.splitlines() if ln.strip()), "Untitled")
    line = re.sub(r"^[#>\-*\s]+", "", line).strip() or "Untitled"
    return line if len(line) <= 60 else line[:57].rstrip() + "..."
