"""The web view's test material: a generated vault of linked notes (also used by bench/bench_web.py),
and a ``spellbook ui`` process that prints its sign-in address."""

from __future__ import annotations

import random
import select
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2

from tests.helpers.processes import SPELLBOOK, child_env

CATEGORIES = {
    "projects": ["atlas", "beacon", "compass", "delta"],
    "ops": ["deploy", "backups", "alerts", "dns"],
    "people": ["team", "customers", "hiring"],
    "research": ["embeddings", "ranking", "storage"],
    "recipes": ["bread", "soups"],
}
WORDS = [
    "cache",
    "index",
    "vector",
    "shard",
    "replica",
    "token",
    "budget",
    "latency",
    "window",
    "query",
    "ranking",
    "fusion",
    "keyword",
    "meaning",
    "release",
    "rollback",
    "canary",
    "backup",
    "snapshot",
    "restore",
    "alert",
    "pager",
    "threshold",
    "owner",
    "review",
    "sprint",
    "roadmap",
    "customer",
    "contract",
    "invoice",
    "hiring",
    "interview",
    "onboarding",
    "sourdough",
    "starter",
    "flour",
    "oven",
    "broth",
    "stock",
]
TAGS = [
    "infra",
    "decision",
    "fix",
    "howto",
    "idea",
    "risk",
    "meeting",
    "metric",
    "design",
    "policy",
    "todo",
    "incident",
    "research",
    "people",
    "recipe",
]


def write_vault(root: Path, count: int, seed: int = 7) -> list[dict[str, str]]:
    """``count`` notes under category/topic folders with tags, wikilinks and typed relations; returns
    their id, title and path. Deterministic for a seed."""
    rng = random.Random(seed)
    notes: list[dict[str, str]] = []
    for i in range(count):
        category = rng.choice(list(CATEGORIES))
        topic = rng.choice(CATEGORIES[category])
        words = rng.sample(WORDS, 3)
        title = f"{words[0].title()} {words[1]} {words[2]} {i}"
        notes.append(
            {
                "id": f"gen{i:05d}",
                "title": title,
                "path": f"{category}/{topic}/{title}.md",
                "category": category,
                "topic": topic,
            }
        )
    for i, note in enumerate(notes):
        links = [notes[j]["title"] for j in rng.sample(range(count), min(count, rng.choice([0, 1, 2, 3]))) if j != i]
        related = [notes[j]["title"] for j in rng.sample(range(count), min(count, rng.choice([0, 0, 1]))) if j != i]
        tags = rng.sample(TAGS, rng.choice([0, 1, 2, 3]))
        day = f"20{rng.choice([24, 25, 26])}-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}T10:00:00+00:00"
        sentences = [
            " ".join(
                rng.choice(WORDS) if rng.random() < 0.4 else _word(rng) for _ in range(rng.randint(8, 16))
            ).capitalize()
            + "."
            for _ in range(rng.randint(2, 5))
        ]
        body = " ".join(sentences) + "".join(f" See [[{t}]]." for t in links)
        front = [
            f"id: {note['id']}",
            f"title: {note['title']}",
            f"category: {note['category']}",
            f"topic: {note['topic']}",
            f"tags: [{', '.join(tags)}]",
            f"created: '{day}'",
            f"updated: '{day}'",
        ]
        if related:
            front.append("related: [" + ", ".join(f'"[[{t}]]"' for t in related) + "]")
        file = root / note["path"]
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("---\n" + "\n".join(front) + "\n---\n" + body + "\n", encoding="utf-8")
    return notes


def _word(rng: random.Random) -> str:
    """A made-up word, so that generated notes differ as much as real ones do."""
    return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))


def start_ui(vault: Path, *extra: str, **env: str) -> tuple[subprocess.Popen, str]:
    """``spellbook ui --no-browser`` on a free port; returns the process and its sign-in address."""
    proc = subprocess.Popen(
        [SPELLBOOK, "ui", "--no-browser", "--vault", str(vault), "--embedder", "hashing", *extra],
        env=child_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([proc.stdout], [], [], 60)  # the address, once the socket listens
    address = proc.stdout.readline().strip() if ready and proc.stdout else ""
    if not address.startswith("http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"spellbook ui printed {address!r}: {proc.stderr.read() if proc.stderr else ''}")
    base = base_of(address)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the server answers (the index may still be building)
        try:
            ok = httpx2.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx2.HTTPError:
            ok = False
        if ok:
            break
        time.sleep(0.1)
    return proc, address


def stop_ui(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.stderr.read() if proc.stderr else ""


def base_of(address: str) -> str:
    """``http://127.0.0.1:PORT`` of a sign-in address."""
    parts = urlsplit(address)
    return f"{parts.scheme}://{parts.netloc}"


def token_of(vault: Path) -> str:
    """The token ``spellbook ui`` made on its first start (the index folder is ``<vault>/.spellbook``)."""
    return (vault / ".spellbook" / "http.token").read_text(encoding="ascii").strip()


def sign_in(address: str) -> tuple[str, str]:
    """Follow a sign-in address as a browser would, over 127.0.0.1 (a name under ``.localhost`` is
    this machine, as browsers resolve it); returns the ``Host`` the pages answer on and the
    ``Cookie`` header the server set. AssertionError when it does not sign in."""
    parts, jar = urlsplit(address), {}
    base, host = f"http://127.0.0.1:{parts.port}", parts.netloc
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    for _ in range(5):
        cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        answer = httpx2.get(base + target, headers={"Host": host, **({"Cookie": cookie} if cookie else {})}, timeout=30)
        for header in answer.headers.get_list("set-cookie"):
            name, _, value = header.split(";")[0].partition("=")
            jar[name.strip()] = value
        follow = answer.headers.get("location") or answer.headers.get("refresh", "").partition("url=")[2]
        if not follow:
            assert answer.status_code == 200 and jar, (answer.status_code, answer.text[:300])
            return host, "; ".join(f"{k}={v}" for k, v in jar.items())
        moved = urlsplit(follow)
        host = moved.netloc or host
        target = moved.path + (f"?{moved.query}" if moved.query else "")
    raise AssertionError(f"{address} redirected too often")
