"""Check Spellbook on a real, hand-kept Obsidian vault: names, topics, folder filters, web pages.

Copies the chosen top folders of ``VAULT`` (``--folders``; default ``en ko ja de fr``, the shape of
the Obsidian help vault: one folder per language, then one per subject) to a temporary vault,
starts a real ``spellbook ui --no-browser`` on it on 127.0.0.1 (hashing embedder: this checks
names, structure and pages, not retrieval quality), waits for the first index build and checks,
over MCP and HTTP:

* names: every note without a frontmatter ``title`` is named by its file name (without ``.md``),
  as Obsidian names it; the count of notes whose first ``# `` line differs shows what a heading
  name would have shown;
* topics: ``get_index`` lists each ``<category>/<topic>/`` folder holding notes as that topic;
* folder filter: ``list_memories(folder=...)`` returns the files under that folder;
* pages: Overview, Activity, Search (a query, a listing by topic), Care, Graph (whole, one
  category) and the Memory page of a few notes answer 200.

Nothing of the vault is written to the repository; the output names only counts and folder names.

    .venv/bin/python bench/check_real_vault.py /path/to/obsidian-help [--folders en ko ja]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spellbook.vault.fields import field_text
from spellbook.vault.note import parse_note
from tests.helpers.web import base_of, start_ui, stop_ui, token_of

HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)  # a first '# ' line, as names were once taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--folders", nargs="+", default=["en", "ko", "ja", "de", "fr"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="real-vault-") as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        for folder in args.folders:
            if (args.vault / folder).is_dir():
                shutil.copytree(args.vault / folder, vault / folder)
        files = {
            p.relative_to(vault).as_posix(): parse_note(p.read_text(encoding="utf-8"))
            for p in sorted(vault.rglob("*.md"))
            if not p.name.startswith("_")
        }
        print(
            f"vault: {len(files)} notes under {', '.join(f for f in args.folders if (vault / f).is_dir())} "
            f"(embedder: hashing)"
        )
        started = time.monotonic()
        proc, address = start_ui(vault)
        failures: list[str] = []
        try:
            base, token = base_of(address), token_of(vault)
            with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
                while ">ready<" not in http.get("/").text:
                    time.sleep(0.2)
                print(f"first index build and ready: {time.monotonic() - started:.1f} s")
                index, notes, folder_hits = anyio.run(_mcp, f"{base}/mcp", token, _busiest_folder(files))
                failures += _check_names(files, notes)
                failures += _check_topics(files, index, notes)
                failures += _check_folder(files, *folder_hits)
                failures += _check_pages(http, notes)
        finally:
            log = stop_ui(proc)
            if "Traceback" in log:
                failures.append("the server logged a traceback:\n" + log[-2000:])
    print("\n".join(f"FAIL {f}" for f in failures) if failures else "all checks passed")
    return 1 if failures else 0


async def _mcp(url: str, token: str, folder: str) -> tuple[dict, dict[str, dict], tuple[str, list[str]]]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        index = (await client.call_tool("get_index", {})).structured_content
        notes: dict[str, dict] = {}
        while True:
            page = (await client.call_tool("list_memories", {"limit": 200, "offset": len(notes)})).structured_content
            notes.update({m["path"]: m for m in page["memories"]})
            if not page["memories"] or len(notes) >= page["total"]:
                break
        found: list[str] = []
        while True:
            page = (
                await client.call_tool(
                    "list_memories", {"filter": {"folder": folder}, "limit": 200, "offset": len(found)}
                )
            ).structured_content
            found += [m["path"] for m in page["memories"]]
            if not page["memories"] or len(found) >= page["total"]:
                break
        return index, notes, (folder, found)


def _check_names(files: dict[str, Any], notes: dict[str, dict]) -> list[str]:
    untitled = [p for p, parsed in files.items() if not field_text(parsed.meta.get("title"))]
    wrong = [p for p in untitled if p not in notes or notes[p]["title"] != Path(p).stem]
    heading = sum(1 for p in untitled if (m := HEADING.search(files[p].body)) and m.group(1).strip() != Path(p).stem)
    titled = [p for p in files if p not in untitled]
    kept = [p for p in titled if notes.get(p, {}).get("title") == field_text(files[p].meta.get("title"))]
    print(
        f"names: {len(untitled) - len(wrong)}/{len(untitled)} notes without a title are named by their file name "
        f"({heading} of them have a first '# ' line that differs); {len(kept)}/{len(titled)} with a title keep it"
    )
    return [f"{p} is named {notes.get(p, {}).get('title')!r}" for p in wrong[:10]] + (
        [f"{len(titled) - len(kept)} notes lost their frontmatter title"] if len(kept) != len(titled) else []
    )


def _check_topics(files: dict[str, Any], index: dict, notes: dict[str, dict]) -> list[str]:
    wanted: dict[str, set[str]] = {}
    for path, parsed in files.items():
        parts = path.split("/")
        if len(parts) >= 3 and not parsed.meta.get("category") and not parsed.meta.get("topic"):
            wanted.setdefault(parts[0], set()).add(parts[1])
    out = []
    for category, topics in sorted(wanted.items()):
        listed = set(index["categories"].get(category, {}).get("topics", {}))
        missing = topics - listed
        print(
            f"topics of {category}: {len(topics & listed)}/{len(topics)} folders listed by get_index "
            f"({', '.join(sorted(listed)[:6])}{', ...' if len(listed) > 6 else ''})"
        )
        out += [f"get_index does not list {category}/{t} as a topic" for t in sorted(missing)]
    none = sum(1 for m in notes.values() if m.get("topic") is None)
    print(f"notes without a topic: {none}/{len(notes)} (those directly in a category folder, or at the root)")
    return out


def _busiest_folder(files: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for path in files:
        if path.count("/") >= 2:
            folder = "/".join(path.split("/")[:2])
            counts[folder] = counts.get(folder, 0) + 1
    return max(counts, key=lambda f: counts[f]) if counts else ""


def _check_folder(files: dict[str, Any], folder: str, found: list[str]) -> list[str]:
    expected = sorted(p for p in files if p.startswith(folder + "/"))
    print(f"folder filter {folder!r}: {len(found)} notes returned, {len(expected)} files under it")
    return [] if sorted(found) == expected else [f"folder filter {folder!r} returned {len(found)}, not {len(expected)}"]


def _check_pages(http: httpx2.Client, notes: dict[str, dict]) -> list[str]:
    some = [m for m in notes.values() if m.get("topic")][:1]
    categories = sorted({m["category"] for m in notes.values() if m.get("category")})
    for category in categories:  # one note of each category (language)
        some += [m for m in notes.values() if m.get("category") == category][:1]
    first = some[0] if some else {"category": "", "topic": ""}
    pages = [
        "/",
        "/activity",
        "/care",
        "/graph",
        f"/graph?category={quote(first['category'] or '')}",
        "/search?q=" + quote("sync settings"),
        "/search?q=" + quote(first["title"]),
        f"/search?q=*&category={quote(first['category'] or '')}&topic={quote(first.get('topic') or '')}&limit=50",
    ]
    pages += list(dict.fromkeys(f"/memory/{quote(m['id'], safe='')}" for m in some))
    out = []
    for page in pages:
        started = time.monotonic()
        answer = http.get(page)
        took = (time.monotonic() - started) * 1000
        print(f"  {answer.status_code} {took:7.0f} ms {len(answer.content):>9,} B  {page}")
        if answer.status_code != 200:
            out.append(f"{page} answered {answer.status_code}: {re.sub(r'<[^>]+>', ' ', answer.text)[-300:]}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
