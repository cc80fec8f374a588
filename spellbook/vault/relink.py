"""Rewriting links: every ``[[link]]`` whose target is one of a set of names is made to point at
another note instead (``merge`` sends the links of the merged notes to the survivor).

Pure functions over a note's text, no I/O. Only the target changes: ``[[Old|shown]]`` becomes
``[[New|shown]]``, ``[[Old#Heading]]`` ``[[New#Heading]]``, ``![[Old]]`` ``![[New]]``. Links in
code (fenced blocks, inline code) stay as they are, since the index does not read them either.
In the frontmatter only the keys that hold links are touched (``links`` and the relation keys,
docs/note-format.md), in place, so the rest of a hand-written frontmatter keeps its bytes; a key
whose result cannot be written that way (a bare name in ``links``, a renamed ``link_reasons``
entry) is written again by ``render_note``, as ``revise`` writes a key it changes.
``link_reasons`` follows its links. Names are compared as the catalog resolves them
(``link_key``): trimmed, without ``.md``, case-insensitive.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from spellbook.vault.fields import LINK_REASONS, RELATIONS, link_targets
from spellbook.vault.note import parse_note, render_note

LINK_KEYS: tuple[str, ...] = ("links", *RELATIONS)  # frontmatter keys whose items are links

# fields._WIKILINK, with the target (group 2) captured apart from what surrounds it
_LINK = re.compile(r"(!?\[\[)([^\[\]|#^\n]+?)(\\?(?:[#^][^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\])")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_OPEN_FENCE = re.compile(r"---[ \t]*\r?\n")


def link_key(target: str) -> str:
    """A link target as the catalog looks it up (``LinkQueries.link_matches``)."""
    return target.strip().removesuffix(".md").lower()


def relink_text(text: str, names: set[str], new: str) -> tuple[str, int]:
    """``text`` with every wikilink to one of ``names`` (``link_key`` form) pointing at ``new``
    instead, outside code; and how many links changed."""
    masked = _mask_code(text)
    out: list[str] = []
    last = changed = 0
    for match in _LINK.finditer(masked):
        if link_key(match.group(2)) not in names:
            continue
        out += [text[last : match.start(2)], new]
        last = match.end(2)
        changed += 1
    out.append(text[last:])
    return "".join(out), changed


def relink_meta(meta: dict[str, Any], names: set[str], new: str) -> tuple[dict[str, Any], int]:
    """A copy of ``meta`` whose link keys point at ``new`` instead of ``names``, with
    ``link_reasons`` renamed to match; and how many links changed."""
    meta = copy.deepcopy(meta)
    changed = 0
    for key in LINK_KEYS:
        value = meta.get(key)
        if not isinstance(value, str | list):
            continue
        items = [value] if isinstance(value, str) else value
        rewritten: list[Any] = []
        count = 0
        for item in items:
            if isinstance(item, str):
                item, n = relink_text(item, names, new)
                if not n and key == "links" and link_key(item) in names:  # `links` may hold bare names
                    item, n = new, 1
                count += n
            rewritten.append(item)  # a list that now names the new note twice is left so: the index reads it once
        if count:
            changed += count
            meta[key] = rewritten[0] if isinstance(value, str) and len(rewritten) == 1 else rewritten
    reasons = meta.get(LINK_REASONS)
    if isinstance(reasons, dict):
        for relation, per in reasons.items():
            if isinstance(per, dict) and any(link_key(str(k)) in names for k in per):
                kept = {k: v for k, v in per.items() if link_key(str(k)) not in names}
                moved = [v for k, v in per.items() if link_key(str(k)) in names]
                reasons[relation] = {**kept, new: kept.get(new, moved[0])}
    return meta, changed


def relink_note(text: str, names: set[str], new: str) -> tuple[str, int]:
    """A whole note file with its links to ``names`` pointing at ``new`` (body and frontmatter);
    and how many links changed. The text is returned unchanged when none did."""
    parsed = parse_note(text)
    head = text[: len(text) - len(parsed.body)]  # the BOM, the fences and the frontmatter
    body, changed = relink_text(parsed.body, names, new)
    if parsed.problem or parsed.frontmatter is None:
        return head + body, changed  # no usable frontmatter: its links are in the body the index reads
    meta, in_meta = relink_meta(parsed.meta, names, new)
    if not in_meta and meta == parsed.meta:
        return head + body, changed
    opening = _OPEN_FENCE.match(text, 1 if parsed.bom else 0)
    assert opening is not None  # parse_note found the frontmatter there
    start = opening.end()
    front = "".join(relink_text(block, names, new)[0] if key in LINK_KEYS else block for key, block in parsed.blocks)
    candidate = text[:start] + front + head[start + len(parsed.frontmatter) :] + body
    again = parse_note(candidate)
    if again.meta != meta or again.body != body:  # bare names, reasons: write those keys
        candidate = render_note(meta, body, original=parsed)
    return candidate, changed + in_meta


def targets_of(item: Any) -> list[str]:
    """The link targets of one frontmatter item: its wikilinks, or a bare name."""
    if not isinstance(item, str):
        return []
    return link_targets(item) or ([item.strip()] if item.strip() else [])


def _mask_code(text: str) -> str:
    """``text`` with code (fenced blocks, then inline code) blanked out, same length and lines."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return _INLINE_CODE.sub(blank, _FENCE.sub(blank, text))
