"""Import of the official MCP memory server's knowledge graph (``memory.jsonl`` of
``@modelcontextprotocol/server-memory``) as Spellbook export entries. Pure functions, no I/O."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from spellbook.engine.formats.spellbook_export import MAX_IMPORT_DEPTH, MAX_IMPORT_ENTRIES, Entry, lines_of, refuse_if
from spellbook.errors import InvalidInputError
from spellbook.vault.fields import normalize_tag
from spellbook.vault.paths import note_path

GRAPH_CATEGORY = "knowledge-graph"

_GRAPH_START = re.compile(r'\s*\{\s*"type"\s*:\s*"(?:entity|relation)"')


def looks_like_memory_graph(text: str) -> bool:
    first = next((line for line in lines_of(text) if line.strip()), "")
    if _GRAPH_START.match(first):
        return True  # how the MCP memory server writes its lines
    if len(first) > 2**20:
        return False  # not decoded whole: a one-line export would be built twice
    try:
        item = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and item.get("type") in ("entity", "relation")


def memory_graph_entries(text: str, source: str, now: str) -> tuple[list[Entry], list[str]]:
    """Entities -> memories (``knowledge-graph/<entityType>/<name>.md``), observations -> body
    bullets, relations -> ``links`` (``[[Target]]``) plus ``relations`` (``works_at [[Target]]``)
    on the entity they start from. Ids are derived from the entity name, so importing the same
    graph again meets the same ids (and the conflict policy) instead of duplicating it.
    Returns the entries and warnings (relations from an entity the file does not define)."""
    entities: dict[str, dict[str, Any]] = {}
    relations: list[tuple[str, str, str, str]] = []
    problems: list[str] = []
    total = 0
    for n, line in enumerate(lines_of(text), 1):
        if not line.strip():
            continue
        total += 1
        if total > MAX_IMPORT_ENTRIES:
            raise InvalidInputError(
                f"The file has more than {MAX_IMPORT_ENTRIES:,} lines, the most one import takes; split it."
            )
        where = f"line {n}"
        try:
            item = json.loads(line)
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({exc}).")
            continue
        except RecursionError:
            problems.append(f"{where}: nested deeper than {MAX_IMPORT_DEPTH} levels.")
            continue
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "entity":
            name, etype, observations = item.get("name"), item.get("entityType"), item.get("observations", [])
            if not isinstance(name, str) or not name.strip():
                problems.append(f"{where}: entity without a name.")
            elif not isinstance(etype, str):
                problems.append(f"{where}: entity {name!r} has no entityType string.")
            elif not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                problems.append(f"{where}: entity {name!r}: observations must be a list of strings.")
            else:
                entity = entities.setdefault(name.strip(), {"where": where, "type": etype.strip(), "observations": []})
                entity["observations"].extend(o for o in observations if o not in entity["observations"])
        elif kind == "relation":
            ends = [item.get(k) for k in ("from", "to", "relationType")]
            if not all(isinstance(v, str) and v.strip() for v in ends):
                problems.append(f"{where}: relation needs from, to and relationType strings.")
            else:
                relations.append((where, *(v.strip() for v in ends)))
        else:
            problems.append(f'{where}: expected an object with "type": "entity" or "relation".')
    refuse_if(problems, total)
    links: dict[str, list[str]] = {}
    typed: dict[str, list[str]] = {}
    warnings: list[str] = []
    for where, source_name, target, rtype in relations:
        if source_name not in entities:
            warnings.append(f"{where}: relation from {source_name!r}, which the file does not define; not imported.")
            continue
        links.setdefault(source_name, []).append(f"[[{target}]]")
        typed.setdefault(source_name, []).append(f"{rtype} [[{target}]]")
    entries = []
    for name, entity in entities.items():
        etype = entity["type"]
        meta: dict[str, Any] = {
            "id": graph_id(name),
            "title": name,
            "category": GRAPH_CATEGORY,
            **({"topic": etype} if etype else {}),
            **({"tags": [normalize_tag(etype)]} if normalize_tag(etype) else {}),
            "entities": [name],
            "type": "note",
            "source": source,
            **({"links": list(dict.fromkeys(links[name]))} if name in links else {}),
            "created": now,
            "updated": now,
            **({"relations": list(dict.fromkeys(typed[name]))} if name in typed else {}),
        }
        body = "".join("- " + obs.strip().replace("\n", "\n  ") + "\n" for obs in entity["observations"])
        path = note_path(GRAPH_CATEGORY, etype or None, name)
        entries.append(Entry(entity["where"], meta["id"], path, name, meta, body, stamped=True))
    return entries, warnings


def graph_id(name: str) -> str:
    """The id of a knowledge-graph entity: 16 hex characters derived from its name."""
    return hashlib.sha1(f"mcp-memory:{name}".encode()).hexdigest()[:16]
