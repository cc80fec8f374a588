"""Prompt-time recall on long conversations, end to end through the real hooks.

Each LoCoMo session of the developers' conversation set becomes a Claude Code transcript (the
conversation's first speaker types the prompts, the other answers; timestamps from the session's
date), captured by the real ``spellbook hook capture`` while ``spellbook serve`` owns the vault.
Every question is then typed as the next prompt: the real ``spellbook hook UserPromptSubmit``
runs with it on stdin, and its stdout (what Claude Code would add to the model's context) is
checked. Also run: 105 coding prompts unrelated to any conversation, which should get nothing.

    PYTHONPATH=. .venv/bin/python bench/eval_sessions.py                 # all 7 conversations
    PYTHONPATH=. .venv/bin/python bench/eval_sessions.py --convs 2 --limit 60   # a quick look
    cp -r spellbook /tmp/snap/ && PYTHONPATH=/tmp/snap:. .venv/bin/python bench/eval_sessions.py  # a fixed copy

Reported, over all questions (a prompt that got nothing holds nothing):
  evidence  share of prompts whose injection holds 80% of the words of one of its evidence turns
  answer    share whose injection holds the answer string (lower case, letters and digits only)
  session hit@5  an evidence turn's session among ``memorize``'s first 5 notes (the hook's query)
  injected  characters of the injection, p50 over prompts that got one
  false     share of unrelated coding prompts that got an injection
  latency   the UserPromptSubmit hook process's wall time with the server running

The data (``<workspace>/shared/eval/dev_conv_turns.jsonl.gz``, CC BY-NC 4.0) is read at run time
and never copied into the repository.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_hooks import SPELLBOOK, free_port, wait_owner

DATA = ROOT.parent / "shared" / "eval" / "dev_conv_turns.jsonl.gz"
EVIDENCE_SHARE = 0.8

# Prompts a developer types in a coding session: none is about anyone's life, so a vault of
# conversations has nothing to add to any of them.
UNRELATED = [
    "Add a unit test for the date parser",
    "Fix the failing CI build on the main branch",
    "Refactor the user service to use dependency injection",
    "Why does mypy complain about this Optional return type?",
    "Rename get_data to fetch_records everywhere",
    "Run the linter and fix the warnings",
    "Add type hints to the config loader",
    "Write a migration that adds an index on orders.created_at",
    "Bump the version to 2.3.1 and update the changelog",
    "The Docker image is too big, can you slim it down?",
    "Add retries with exponential backoff to the HTTP client",
    "Explain what this regex does: ^\\d{3}-\\d{4}$",
    "Convert this callback code to async/await",
    "Set up pre-commit with ruff and black",
    "Why is this SQL query doing a full table scan?",
    "Add pagination to the /api/items endpoint",
    "Make the logger write JSON lines instead of plain text",
    "Split utils.py into smaller modules",
    "Add a GitHub Actions workflow that runs pytest on pull requests",
    "The websocket connection drops after 60 seconds, investigate",
    "Cache the results of the pricing lookup in Redis",
    "Generate OpenAPI docs for the REST endpoints",
    "Fix the off-by-one error in the pagination helper",
    "Add a --dry-run flag to the cleanup script",
    "Replace the deprecated datetime.utcnow calls",
    "Write a Makefile target for building the docs",
    "Profile the CSV import, it takes too long on large files",
    "Add input validation to the signup form",
    "Upgrade the project to Python 3.12",
    "Remove the unused imports in the tests folder",
    "Why does this test pass locally but fail in CI?",
    "Implement a binary search over the sorted timestamps",
    "Add a health check endpoint for the load balancer",
    "Configure CORS for the frontend dev server",
    "Make the build reproducible by pinning dependencies",
    "Show me the git log for the last week",
    "Document the environment variables in the README",
    "Add a foreign key from invoices to customers",
    "Handle the KeyError when the config file is missing a section",
    "Write a benchmark for the JSON serializer",
    "Use a dataclass instead of this dict for the settings",
    "Squash the last three commits into one",
    "Add logging around the payment webhook handler",
    "Find where the memory leak in the worker comes from",
    "Translate the error messages into a constants module",
    "Add a unit test for the slugify helper",
    "Why does this list comprehension return None?",
    "Write a docstring for the parse_args function",
    "Change the default timeout of the HTTP client to 10 seconds",
    "Sort the leaderboard by score and then by name",
    "Make the CLI print a friendly error when the file is missing",
    "Extract the SQL strings into a queries module",
    "Add a progress bar to the download loop",
    "Fix the typo in the welcome email template",
    "Add a Dockerfile healthcheck for the API container",
    "Replace print statements with the logging module",
    "Write a property-based test for the tokenizer",
    "Why is the coverage report missing the utils package?",
    "Enable strict mode in the TypeScript config",
    "Add an index page to the docs site",
    "Convert the settings file from INI to TOML",
    "Make the retry decorator configurable per call",
    "Add dark mode to the dashboard",
    "Why does npm install fail with ERESOLVE?",
    "Set up a devcontainer for this repo",
    "Move the constants into an enum",
    "Add a context manager that times a block of code",
    "Write a script that renames the photos by their EXIF date",
    "Parse the CSV header case-insensitively",
    "Add a --verbose flag to the export command",
    "Implement LRU eviction for the in-memory cache",
    "Add OpenTelemetry tracing to the Flask app",
    "Fix the race condition in the job queue consumer",
    "Write the changelog entry for the new search filters",
    "Explain the difference between these two git branches",
    "Add a test fixture that creates a temporary directory",
    "Why is the Go build failing with an undefined symbol?",
    "Make the React table sortable by column",
    "Create a GraphQL resolver for the comments field",
    "Add a unique constraint on the username column",
    "Stream the large JSON response instead of loading it all",
    "Add keyboard shortcuts to the editor component",
    "Check the Terraform plan for the new VPC",
    "Add Sentry error reporting to the mobile app",
    "Write a bash one-liner that counts lines of Python code",
    "Refactor the giant if-else chain into a dispatch table",
    "Add a feature flag for the new onboarding flow",
    "Why does the Rust borrow checker reject this loop?",
    "Generate a random password with 20 characters",
    "Add i18n support to the settings page",
    "Write a SQL query for the top ten customers by revenue",
    "Add an ETag header to the static file responses",
    "Fix the flaky snapshot test in the header component",
    "Bump eslint and fix the new lint errors",
    "Add a pre-push hook that runs the type checker",
    "Make the thumbnail grid lazy-load images",
    "Implement a debounce for the search input",
    "Add graceful shutdown to the gRPC server",
    "Write a Kotlin data class for the order payload",
    "Add a CSV export button to the reports page",
    "Why does the Java service run out of heap?",
    "Add a CONTRIBUTING guide for new developers",
    "Validate the webhook signature with HMAC",
    "Add a cron expression parser test",
    "Create a script to seed the test database with fake users",
]


def load(path: Path) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    notes: dict[str, list[dict]] = defaultdict(list)
    queries: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            (notes if row["kind"] == "note" else queries)[row["conv"]].append(row)
    return notes, queries


def transcript(folder: Path, cwd: str, turns: list[dict], first: str, session_id: str) -> Path:
    """A Claude Code transcript of one session: ``first``'s turns are prompts, the other's answers
    (consecutive turns of one speaker are one message), 30 s apart from the session's date."""
    when = datetime.fromisoformat(turns[0]["meta"]["date"])
    entries: list[dict] = []
    parent = None
    messages: list[tuple[bool, str]] = []
    for turn in turns:
        user = turn["meta"]["speaker"] == first
        if messages and messages[-1][0] == user:
            messages[-1] = (user, messages[-1][1] + "\n\n" + turn["text"])
        else:
            messages.append((user, turn["text"]))
    if not messages[0][0]:  # a session the other speaker opens: an empty greeting would be dropped
        messages.insert(0, (True, f"{first}: (joins the conversation)"))
    for n, (user, text) in enumerate(messages):
        when += timedelta(seconds=30)
        message = (
            {"role": "user", "content": text}
            if user
            else {"role": "assistant", "content": [{"type": "text", "text": text}]}
        )
        entry = {
            "type": "user" if user else "assistant",
            "message": message,
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{n}")),
            "parentUuid": parent,
            "sessionId": session_id,
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "cwd": cwd,
            "gitBranch": "main",
            "isSidechain": False,
            "userType": "external",
            "version": "2.1.330",
        }
        parent = entry["uuid"]
        entries.append(entry)
    file = folder / f"{session_id}.jsonl"
    file.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return file


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def holds_turn(injected: set[str], turn: str) -> bool:
    need = set(words(turn))
    return bool(need) and len(need & injected) >= EVIDENCE_SHARE * len(need)


def squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def run_hook(event: str, vault: Path, payload: dict, env: dict, extra: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [SPELLBOOK, "hook", event, "--vault", str(vault), *extra],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    return (time.perf_counter() - started) * 1000, out.stdout.decode("utf-8", "replace")


def session_notes(vault: Path) -> dict[str, str]:
    """note id -> the captured session's id, read from the notes' frontmatter."""
    out: dict[str, str] = {}
    for file in (vault / "sessions").rglob("*.md"):
        head = file.read_text(encoding="utf-8").split("\n---", 1)[0]
        ids = re.search(r"^id: (\S+)", head, re.MULTILINE)
        session = re.search(r"^session: (\S+)", head, re.MULTILINE)
        if ids and session:
            out[ids.group(1).strip("'\"")] = session.group(1).strip("'\"")
    return out


def run_conv(
    conv: str, turns: list[dict], questions: list[dict], opts: Any, tmp: Path, env: dict, extra: list[str]
) -> dict[str, Any]:
    vault, project = tmp / conv / "vault", tmp / conv / conv
    project.mkdir(parents=True)
    subprocess.run([SPELLBOOK, "init", str(vault)], env=env, check=True, capture_output=True)
    server = subprocess.Popen(
        [SPELLBOOK, "serve", "--http", "--port", str(free_port()), "--vault", str(vault)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_owner(vault, server, env)
        return measure(conv, turns, questions, opts, tmp, vault, project, env, extra)
    finally:
        server.terminate()
        server.wait(timeout=60)


def measure(
    conv: str,
    turns: list[dict],
    questions: list[dict],
    opts: Any,
    tmp: Path,
    vault: Path,
    project: Path,
    env: dict,
    extra: list[str],
) -> dict[str, Any]:
    first = turns[0]["meta"]["speaker"]
    sessions: dict[int, list[dict]] = defaultdict(list)
    for turn in turns:
        sessions[turn["meta"]["session"]].append(turn)
    session_of = {t["id"]: t["meta"]["session"] for t in turns}
    text_of = {t["id"]: t["text"] for t in turns}
    ids: dict[int, str] = {}
    started = time.perf_counter()
    for number, group in sorted(sessions.items()):
        ids[number] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"locomo/{conv}/{number}"))
        file = transcript(tmp / conv, str(project), group, first, ids[number])
        payload = {
            "session_id": ids[number],
            "transcript_path": str(file),
            "cwd": str(project),
            "hook_event_name": "SessionEnd",
        }
        run_hook("capture", vault, payload, env, [])
    capture_s = time.perf_counter() - started
    note_session = session_notes(vault)
    number_of = {sid: n for n, sid in ids.items()}

    from spellbook.config import Settings
    from spellbook.server.hub import Hub

    hub = Hub(Settings(vault=vault, watch=False), watch=False, warm_up=False, client="eval")
    hub.start(background=False)
    rows: list[dict[str, Any]] = []
    try:
        for q in questions:
            payload = {
                "session_id": "eval-prompts",
                "prompt": q["q"],
                "cwd": str(project),
                "hook_event_name": "UserPromptSubmit",
            }
            ms, out = run_hook("UserPromptSubmit", vault, payload, env, extra)
            found = hub.call("memorize", {"query": q["q"], "limit": 5, "context": project.name})["results"]
            hit_sessions = {number_of.get(note_session.get(h["id"], ""), -1) for h in found}
            injected = set(words(out))
            rows.append(
                {
                    "ms": ms,
                    "chars": len(out),
                    "category": q.get("category"),
                    "q": q["q"],
                    "gold": q.get("answer"),
                    "turns": [text_of[r] for r in q["relevant"] if r in text_of],
                    "out": out,
                    "evidence": any(holds_turn(injected, text_of[r]) for r in q["relevant"] if r in text_of),
                    "answer": bool(str(q.get("answer") or "").strip()) and squash(str(q["answer"])) in squash(out),
                    "session": any(session_of.get(r) in hit_sessions for r in q["relevant"]),
                }
            )
        false = []
        for prompt in UNRELATED:
            payload = {
                "session_id": "eval-coding",
                "prompt": prompt,
                "cwd": str(project),
                "hook_event_name": "UserPromptSubmit",
            }
            ms, out = run_hook("UserPromptSubmit", vault, payload, env, extra)
            false.append({"ms": ms, "chars": len(out), "prompt": prompt})
    finally:
        hub.close()
    return {
        "conv": conv,
        "sessions": len(sessions),
        "turns": len(turns),
        "capture_s": capture_s,
        "rows": rows,
        "false": false,
    }


def share(rows: list[dict], key: str) -> float:
    return sum(1 for r in rows if r[key]) / max(1, len(rows))


def report(results: list[dict], opts: Any, elapsed: float) -> str:
    rows = [r for res in results for r in res["rows"]]
    false = [r for res in results for r in res["false"]]
    injected = [r["chars"] for r in rows if r["chars"]]
    latency = sorted(r["ms"] for r in rows + false)
    lines = [
        (
            f"eval_sessions: {len(results)} conversations, {sum(r['sessions'] for r in results)} sessions captured "
            f"through `hook capture`, {len(rows)} questions and {len(false)} unrelated prompts through "
            f"`hook UserPromptSubmit`; embedder {opts.embedder}; {elapsed / 60:.1f} min; "
            f"load average {os.getloadavg()[0]:.1f}"
        ),
        "",
        f"{'':18s} {'evidence':>9s} {'answer':>7s} {'sess@5':>7s} {'injected':>9s} {'n':>5s}",
    ]

    def line(name: str, part: list[dict]) -> str:
        got = [r["chars"] for r in part if r["chars"]]
        return (
            f"{name:18s} {share(part, 'evidence'):9.3f} {share(part, 'answer'):7.3f} {share(part, 'session'):7.3f} "
            f"{statistics.median(got) if got else 0:9.0f} {len(part):5d}"
        )

    lines.append(line("all", rows))
    for cat, name in ((1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")):
        part = [r for r in rows if r["category"] == cat]
        if part:
            lines.append(line(f"  {name}", part))
    for res in results:
        lines.append(line(f"  {res['conv']}", res["rows"]))
    lines += [
        "",
        (
            f"questions given an injection: {len(injected)}/{len(rows)}; injected characters p50 "
            f"{statistics.median(injected) if injected else 0:.0f}, p90 "
            f"{sorted(injected)[int(len(injected) * 0.9)] if injected else 0}"
        ),
        (
            f"unrelated coding prompts given an injection: {sum(1 for r in false if r['chars'])}/{len(false)} "
            f"= {share([{'x': bool(r['chars'])} for r in false], 'x'):.3f}"
        ),
        (
            f"UserPromptSubmit hook, server running: p50 {statistics.median(latency):.0f} ms, "
            f"p95 {latency[int(len(latency) * 0.95)]:.0f} ms (n={len(latency)})"
        ),
        (
            f"capture: {statistics.median(r['capture_s'] / r['sessions'] for r in results):.2f} s a session "
            "(the hook capture process, p50 over conversations)"
        ),
    ]
    hit = sorted({r["prompt"] for r in false if r["chars"]})
    if hit:
        lines.append("unrelated prompts that got one: " + "; ".join(hit[:10]))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--embedder", default="use-m3")
    ap.add_argument("--convs", type=int, default=0, help="only the first N conversations (0: all)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions of each conversation")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here")
    ap.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write every question here as JSON lines: the question, its answer and evidence turns, "
        "what was injected and what it held (data-derived: keep it outside the repository)",
    )
    opts = ap.parse_args()
    if not opts.data.exists():
        raise SystemExit(f"no data at {opts.data}: the LoCoMo dev set lives in the workspace's shared/eval/")
    notes, queries = load(opts.data)
    convs = sorted(notes)[: opts.convs or None]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPELLBOOK_")}
    # PYTHONPATH first: a copy of spellbook/ put there is what every hook runs (measure while editing)
    env.update(
        SPELLBOOK_EMBEDDER=opts.embedder,
        PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p),
    )
    os.environ.update(SPELLBOOK_EMBEDDER=opts.embedder)
    extra = ["--prompt-recall"]  # as `install claude-code --hooks` writes the hook
    tmp = Path(tempfile.mkdtemp(prefix="eval-sessions-"))
    started = time.perf_counter()
    results = []
    for conv in convs:
        qs = queries[conv][: opts.limit or None]
        results.append(run_conv(conv, notes[conv], qs, opts, tmp, env, extra))
        print(f"{conv}: {len(qs)} questions done", file=sys.stderr, flush=True)
    text = report(results, opts, time.perf_counter() - started)
    print(text)
    if opts.out:
        opts.out.write_text(text, encoding="utf-8")
    if opts.dump:
        keys = ("category", "q", "gold", "turns", "out", "evidence", "answer", "session")
        opts.dump.write_text(
            "".join(
                json.dumps({"conv": res["conv"], **{k: r[k] for k in keys}}) + "\n"
                for res in results
                for r in res["rows"]
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
