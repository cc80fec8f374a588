"""The web view in a real browser: Debian's chromium driven by Playwright, against a real
``spellbook ui`` process on a generated vault of a few hundred notes (hashing embedder).

Screenshots of each page go to ``.cache/screenshots/`` (gitignored); docs/img/ holds a copy of one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from tests.helpers.git import git
from tests.helpers.processes import ROOT
from tests.helpers.web import base_of, start_ui, stop_ui, token_of, write_vault

pytestmark = pytest.mark.slow
if os.environ.get("CI"):  # CI installs both (.ci/run, the test extra): missing there is a failure, not a skip
    import playwright.sync_api as playwright_api
else:
    playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = ROOT / ".cache" / "screenshots"
NOTES = 300
TRAP = "<script>window.pwned = 1</script> Trap"
V1 = "Release checklist: tag, build, canary for ten minutes, then everyone.\n"
V2 = "Release checklist: tag and ship straight to everyone.\n"
DUP = (
    "Reciprocal rank fusion weights: the semantic side gets 0.7 and keywords 0.3, measured on the dev set "
    "with the bundled model; ties go to the newer memory and short notes get no bonus at all."
)


def _note(vault: Path, path: str, front: dict[str, str], body: str) -> None:
    file = vault / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("---\n" + "".join(f"{k}: {v}\n" for k, v in front.items()) + "---\n" + body, encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run should have installed it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    vault = tmp_path_factory.mktemp("web") / "vault"
    vault.mkdir()
    write_vault(vault, NOTES)
    _note(vault, "ops/deploy/Release checklist.md", {"id": "rel1", "title": "Release checklist", "tags": "[ops]"}, V1)
    _note(
        vault,
        "misc/Trap.md",
        {"id": "trap1", "title": f"'{TRAP}'"},
        '<script>window.pwned = 2</script>\n\n<img src=x onerror="window.pwned = 3">\n\n[click](javascript:alert(1))\n',
    )
    _note(vault, "research/ranking/Fusion weights.md", {"id": "dupa", "title": "Fusion weights"}, DUP + "\n")
    _note(
        vault,
        "research/ranking/Fusion weight notes.md",
        {"id": "dupb", "title": "Fusion weight notes"},
        DUP + " Also: see [[Fusion weights]].\n",
    )
    _note(vault, "misc/Linker.md", {"id": "linker", "title": "Linker"}, "Points at [[Fusion weight notes]].\n")
    _note(vault, "misc/Alpha plan.md", {"id": "alpha1", "title": "Alpha plan", "context": "alpha"}, "Alpha only.\n")
    _note(
        vault,
        "misc/Beta secret.md",
        {"id": "beta1", "title": "Beta secret plan", "context": "beta"},
        "Beta only: the launch code is zebra.\n",
    )
    git(vault, "init", "-q")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "generated vault")
    (vault / "ops/deploy/Release checklist.md").write_text(
        "---\nid: rel1\ntitle: Release checklist\ntags: [ops]\n---\n" + V2, encoding="utf-8"
    )
    git(vault, "commit", "-qam", "shorter release checklist")
    proc, address = start_ui(vault)
    base, token = base_of(address), token_of(vault)
    _wait_ready(base, token)
    try:
        yield {"vault": vault, "base": base, "address": address, "token": token, "proc": proc}
    finally:
        log = stop_ui(proc)
        assert "Traceback" not in log, log


def _wait_ready(base: str, token: str) -> None:
    """Until the first index build is done (the overview says 'ready')."""
    for _ in range(600):
        page = httpx2.get(f"{base}/", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        if page.status_code == 200 and ">ready<" in page.text:
            return
        anyio.run(anyio.sleep, 0.1)
    raise AssertionError("the index never became ready")


@pytest.fixture(scope="module")
def browser(site: dict[str, Any]) -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def console() -> list[str]:
    """Script errors, CSP violations and failed loads the page logged; a test removes the ones it expects."""
    return []


@pytest.fixture
def page(browser: Any, site: dict[str, Any], console: list[str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = console
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(site["base"])  # the sign-in page: the token pasted into its form (a POST, never a URL)
    page.fill("form.signin input[name=token]", site["token"])
    page.click("form.signin button")
    page.wait_for_url(re.compile(r"^http://spellbook-[0-9a-f]{16}\.localhost:\d+/$"))  # the pages' own name
    site["pages"] = page.url.rstrip("/")
    errors.clear()  # the sign-in page's 401
    yield page
    context.close()
    assert not errors, errors  # no script error, no CSP violation


def run_async(main: Any) -> None:
    """Run ``main`` (async) in its own thread: Playwright's sync API holds this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, main).result()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=name != "graph")


def test_each_page_renders(page: Any, site: dict[str, Any]) -> None:
    base = site["pages"]
    assert "Overview" in page.title()
    cards = {c.split("\n")[0]: c.split("\n")[1] for c in page.locator(".card").all_inner_texts()}
    assert int(cards["Memories"].replace(",", "")) == NOTES + 7  # generated, and the test's own
    assert cards["Index"] == "ready" and cards["Embedder"] == "hashing-v1"
    assert cards["Summariser"] == "off"  # opt-in: SPELLBOOK_SUMMARISER
    assert page.locator("table.categories").inner_text().count("projects") >= 1
    shot(page, "overview")

    page.goto(f"{base}/graph")
    page.wait_for_selector("#graph[data-ready='1']", timeout=30_000)
    canvas = page.locator("#graph")
    assert int(canvas.get_attribute("data-nodes")) > NOTES  # the generated notes plus the guide
    assert int(canvas.get_attribute("data-edges")) > 100
    shot(page, "graph")
    page.select_option("select[name=category]", "ops")
    page.click("form.filters button")
    page.wait_for_selector("#graph[data-ready='1']")
    assert "/graph?category=ops&" in page.url
    assert int(page.locator("#graph").get_attribute("data-nodes")) < NOTES / 2
    page.fill("#find", "Release checklist")  # centres that memory in the picture; a click opens it
    box = page.locator("#graph").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(re.compile(r"/memory/rel1$"))

    page.goto(f"{base}/care")
    assert page.locator("section.near_duplicate form.merge").count() >= 1
    assert "Knowledge score" in page.locator(".cards").inner_text()
    shot(page, "care")


def test_search_is_a_bookmarkable_url_with_sides_and_scores(page: Any, site: dict[str, Any]) -> None:
    page.fill("header form.quick input[name=q]", "fusion weights semantic")
    page.press("header form.quick input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/search\?q=fusion\+weights\+semantic"))
    rows = page.locator("table.hits tbody tr")
    assert rows.count() >= 2
    first = rows.nth(0).inner_text()
    assert "Fusion weight" in first and "keywords" in first and "meaning" in first
    shot(page, "search")
    page.goto(f"{site['pages']}/search?q=fusion&mode=keyword&category=research&limit=3")
    hits = page.locator("table.hits tbody tr")
    assert 1 <= hits.count() <= 3
    assert "meaning" not in page.locator("table.hits").inner_text()  # keyword mode: one side only
    assert page.locator("select[name=mode]").input_value() == "keyword"


def test_memory_page_and_restore(page: Any, site: dict[str, Any], console: list[str]) -> None:
    vault = site["vault"]
    page.goto(f"{site['pages']}/memory/dupb")
    assert page.locator("article.note a.wikilink", has_text="Fusion weights").count() == 1
    assert "Linker" in page.locator("aside").inner_text()  # a backlink
    page.goto(f"{site['pages']}/memory/rel1")
    assert V2.strip() in page.locator("article.note").inner_text()
    history = page.locator("table.history tbody tr")
    assert history.count() == 2
    shot(page, "memory")
    history.nth(1).locator("button", has_text="Restore").click()
    page.wait_for_url(re.compile(r"/memory/rel1\?done=restored"))
    assert "Restored" in page.locator(".msg.ok").inner_text()
    assert V1.strip() in page.locator("article.note").inner_text()
    assert (vault / "ops/deploy/Release checklist.md").read_text(encoding="utf-8").endswith(V1)
    file = vault / "ops/deploy/Release checklist.md"
    edited = file.read_text(encoding="utf-8") + "A hand edit made while the page was open.\n"
    file.write_text(edited, encoding="utf-8")  # after the page was read: its Restore must not overwrite this
    page.locator("table.history tbody tr").nth(1).locator("button", has_text="Restore").click()
    assert "changed" in page.locator(".msg.error").inner_text().lower()
    assert file.read_text(encoding="utf-8") == edited
    console.remove("Failed to load resource: the server responded with a status of 409 (Conflict)")
    page.goto(f"{site['pages']}/activity?tool=restore")
    row = page.locator("table.activity tbody tr").first.inner_text()
    assert "restore" in row and "Release checklist" in row and "web" in row
    page.locator("table.activity tbody tr").first.locator("a", has_text=re.compile("^[0-9a-f]{10}$")).click()
    assert "+" + V1.strip() in page.locator("pre.diff").inner_text()


def test_note_with_script_renders_as_text(page: Any, site: dict[str, Any]) -> None:
    page.goto(f"{site['pages']}/memory/trap1")
    assert page.locator("h1").inner_text() == TRAP
    body = page.locator("article.note").inner_text()
    assert "<script>window.pwned = 2</script>" in body and "onerror" in body
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.locator("article.note script, article.note img").count() == 0
    assert page.locator("article.note a[href^='javascript']").count() == 0
    page.goto(f"{site['pages']}/search?q=Trap+pwned")
    assert TRAP in page.locator("table.hits").inner_text()
    page.goto(f"{site['pages']}/graph")
    page.wait_for_selector("#graph[data-ready='1']")
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_activity_names_the_mcp_client(page: Any, site: dict[str, Any]) -> None:
    async def scribe() -> None:
        headers = {"Authorization": f"Bearer {site['token']}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(
                streamable_http_client(f"{site['base']}/mcp", http_client=http),
                client_info=Implementation(name="test-agent", version="1"),
            ) as client,
        ):
            done = await client.call_tool("scribe", {"text": "Written by an agent over MCP.", "title": "Agent note"})
            assert not done.is_error

    run_async(scribe)
    page.goto(f"{site['pages']}/activity?tool=scribe")
    row = page.locator("table.activity tbody tr").first.inner_text()
    assert "Agent note" in row and "test-agent" in row
    shot(page, "activity")


def test_merge_near_duplicates(page: Any, site: dict[str, Any]) -> None:
    vault = site["vault"]
    page.goto(f"{site['pages']}/care")
    pair = page.locator("section.near_duplicate form.merge").filter(has_text="Fusion weight notes").first
    pair.locator("label", has_text="keep Fusion weights").locator("input").check()
    pair.locator("button").click()
    page.wait_for_url(re.compile(r"/memory/dupa\?done=merged"))
    survivor = (vault / "research/ranking/Fusion weights.md").read_text(encoding="utf-8")
    assert "Also: see" in survivor  # the other's text
    assert not (vault / "research/ranking/Fusion weight notes.md").exists()
    trashed = list((vault / ".trash").rglob("Fusion weight notes*.md"))
    assert trashed and "merged_into: dupa" in trashed[0].read_text(encoding="utf-8")
    assert "[[Fusion weights" in (vault / "misc/Linker.md").read_text(encoding="utf-8")  # relinked to the survivor
    page.goto(f"{site['pages']}/care")  # the pair is gone: the kept analysis was dropped when the index changed
    assert page.locator("form.merge", has_text="Fusion weight notes").count() == 0
    page.goto(f"{site['pages']}/activity?tool=merge")
    log = page.locator("table.activity").inner_text()
    assert "Fusion weights" in log and "into dupa" in log and "Linker" in log and "web" in log


def test_foreign_origin_or_missing_csrf_changes_nothing(page: Any, site: dict[str, Any]) -> None:
    base, pages, vault = site["base"], site["pages"], site["vault"]
    target = vault / "misc/Alpha plan.md"
    before = target.read_text(encoding="utf-8")
    page.goto(f"{pages}/memory/alpha1")
    csrf = page.locator("form.erase input[name=csrf]").input_value()
    version = page.locator("form.erase input[name=version]").input_value()
    cookies = page.context.cookies()
    assert cookies and all(c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies)
    signed = {"Host": pages.removeprefix("http://"), "Cookie": "; ".join(f"{c['name']}={c['value']}" for c in cookies)}
    form = {"csrf": csrf, "version": version, "confirm": "yes"}
    with httpx2.Client(base_url=base, headers=signed) as http:  # to 127.0.0.1, as the pages' name: this machine
        evil = {"Origin": "http://evil.example"}
        assert http.post("/memory/alpha1/erase", data=form, headers=evil).status_code == 403
        assert http.post("/memory/alpha1/erase", data=form).status_code == 403  # no Origin at all
        no_csrf = {k: v for k, v in form.items() if k != "csrf"}
        assert http.post("/memory/alpha1/erase", data=no_csrf, headers={"Origin": pages}).status_code == 403
        wrong = {**form, "csrf": "0" * 64}
        assert http.post("/memory/alpha1/erase", data=wrong, headers={"Origin": pages}).status_code == 403
        merge = {"csrf": "", "ids": "dupa\nalpha1", "into": "dupa"}
        assert http.post("/care/merge", data=merge, headers={"Origin": pages}).status_code == 403
        assert http.get("/memory/alpha1/erase").status_code == 405  # never by GET
        assert http.get("/", headers={"Host": "evil.example"}).status_code == 421
    assert httpx2.get(f"{base}/memory/alpha1").status_code == 401  # no cookie, no token
    assert httpx2.get(f"{base}/memory/alpha1", headers={"Cookie": signed["Cookie"]}).status_code == 401  # not its name
    assert httpx2.get(f"{base}/?token={site['token']}").status_code == 401  # the token in a URL signs nobody in
    assert target.read_text(encoding="utf-8") == before
    with httpx2.Client(base_url=base, headers=signed) as http:  # the same form, from the page's origin: it works
        done = http.post("/memory/alpha1/erase", data=form, headers={"Origin": pages})
    assert done.status_code == 200 and not target.exists()


def test_scoped_server_shows_only_its_scope(site: dict[str, Any]) -> None:
    """A second ``ui`` on the same vault joins the owner; started with --context alpha it shows
    nothing of beta's on any page: not in search, the graph, the activity list or Care."""

    async def beta_write() -> None:
        headers = {"Authorization": f"Bearer {site['token']}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(f"{site['base']}/mcp", http_client=http)) as client,
        ):
            done = await client.call_tool(
                "scribe", {"text": "Beta again: zebra.", "title": "Beta secret followup", "context": "beta"}
            )
            assert not done.is_error

    run_async(beta_write)
    token = "alpha-token-" + "x" * 32
    proc, address = start_ui(site["vault"], "--context", "alpha", SPELLBOOK_TOKEN=token)
    base = base_of(address)
    auth = {"Authorization": f"Bearer {token}"}
    try:
        pages = {
            path: httpx2.get(base + path, headers=auth, timeout=30)
            for path in (
                "/",
                "/activity",
                "/search?q=launch+code+beta",
                "/search?q=*&limit=50",
                "/graph",
                "/care",
                "/memory/beta1",
            )
        }
        for path, answer in pages.items():
            assert "Beta secret" not in answer.text and "zebra" not in answer.text, path
        assert pages["/memory/beta1"].status_code == 404
        assert "context alpha" in pages["/"].text  # the scope badge
        owner = {"Authorization": f"Bearer {site['token']}"}
        unscoped = httpx2.get(f"{site['base']}/activity", headers=owner)
        assert "Beta secret followup" in unscoped.text  # it is in the log: the scope hid it
        for path in ("/graph?context=alpha", "/search?q=*&limit=50&context=alpha"):  # the unscoped server's filter
            picked = httpx2.get(site["base"] + path, headers=owner).text
            assert "Beta secret" not in picked and "Fusion weights" in picked, path
        assert "Beta secret" in httpx2.get(site["base"] + "/graph?context=beta", headers=owner).text
    finally:
        stop_ui(proc)
