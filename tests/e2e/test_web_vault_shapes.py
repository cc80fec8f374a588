"""The web view on a vault as a person keeps it, served by a real ``spellbook ui`` process on
127.0.0.1 (hashing embedder): hand-filed notes in nested folders without a ``title``, and more
issues of one kind than one engine call takes (get_memories takes 20 ids; Care shows up to 20
near-duplicate pairs, 40 notes). Every page answers 200 and names notes by their file names."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import pytest

from spellbook.vault.fields import derived_id
from tests.helpers.web import base_of, start_ui, stop_ui, token_of

pytestmark = pytest.mark.slow
PAIRS = 25
UNTAGGED = 30


def _write(vault: Path) -> None:
    for i in range(PAIRS):  # two copies of one page, as a translation left half done leaves them
        text = (
            f"# Example {i}\n\nThe sync setting number {i} keeps vault {i} in step: pick folder {i}, "
            f"then turn on option {i} and wait for the {i}th round to finish before closing.\n"
        )
        for copy in ("Draft", "Final"):
            file = vault / "en" / f"Area {i % 3}" / f"{copy} page {i}.md"
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
    for i in range(UNTAGGED):
        file = vault / "ko" / "Deep" / "Nested" / f"Loose {i}.md"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"# Heading 1\n\nLoose note {i} links to [[Missing page {i}]].\n", encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    vault = tmp_path_factory.mktemp("shapes") / "vault"
    vault.mkdir()
    _write(vault)
    proc, address = start_ui(vault)
    base, token = base_of(address), token_of(vault)
    client = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    try:
        for _ in range(600):  # until the first index build is done
            if ">ready<" in client.get("/").text:
                break
            time.sleep(0.1)
        yield {"client": client, "vault": vault}
    finally:
        client.close()
        log = stop_ui(proc)
        assert "Traceback" not in log, log


def test_care_pages_through_more_ids_than_one_call_takes(site: dict[str, Any]) -> None:
    page = site["client"].get("/care")
    assert page.status_code == 200, page.text[:500]
    pairs = page.text.split('class="issue-kind near_duplicate"', 1)[1].split("</section>", 1)[0]
    assert pairs.count('action="/care/merge"') == 20 and "more of this kind" in pairs
    forms = page.text.count('action="/care/merge"')  # near-duplicates, and contradictions among them
    versions = re.findall(r'name="version:[^"]+" value="([^"]*)"', page.text)
    assert len(versions) == 2 * forms and all(versions)  # every form has both versions filled in
    assert "Draft page 0" in page.text and "Broken links" in page.text


def test_pages_name_notes_by_file_name_and_list_folders_as_topics(site: dict[str, Any]) -> None:
    client = site["client"]
    overview = client.get("/")
    assert overview.status_code == 200
    for topic in ("Area 0", "Area 1", "Area 2", "Deep"):
        assert f">{topic}</a>" in overview.text
    listed = client.get("/search", params={"q": "*", "category": "ko", "topic": "Deep", "limit": 50})
    assert listed.status_code == 200 and listed.text.count("Loose ") >= UNTAGGED
    assert "Heading 1" not in listed.text
    hits = client.get("/search", params={"q": "sync setting number 7"})
    assert hits.status_code == 200 and "page 7</a>" in hits.text
    memory = client.get(f"/memory/{quote(derived_id('ko/Deep/Nested/Loose 3.md'), safe='')}")
    assert memory.status_code == 200 and "<h1>Loose 3</h1>" in memory.text
    assert client.get("/graph").status_code == 200 and client.get("/activity").status_code == 200
