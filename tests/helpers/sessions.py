"""Realistic Claude Code transcripts (the JSONL Claude Code writes), made up for tests and benches.

Each exchange is a prompt about one concrete task, the tools the assistant used (Read, Grep, Edit,
Bash...) with files, and a final answer carrying a specific fact (a port, a flag, a cause), so a
later query about that fact has one right exchange to find.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

TASKS: list[tuple[str, str, str, str]] = [
    # (prompt, file, answer, a later question the answer settles)
    (
        "The checkout page times out under load; find out why",
        "src/shop/checkout.py",
        (
            "The payment client opened a new TLS connection per request; "
            "I reused one pooled session, p95 fell from 4.1 s to 380 ms."
        ),
        "why was checkout slow",
    ),
    (
        "Set up the staging deploy for the billing service",
        "deploy/billing/values.yaml",
        "Staging deploys from the release branch through ArgoCD; billing listens on port 8443 with replicas set to 2.",
        "which port does billing use on staging",
    ),
    (
        "Our nightly backup job failed again, can you check the logs",
        "ops/backup.sh",
        "The backup failed because the S3 bucket lifecycle rule deleted the lock object; I moved the lock to DynamoDB.",
        "what broke the nightly backup",
    ),
    (
        "Add rate limiting to the public search API",
        "api/search/limits.py",
        "Search is limited to 30 requests per minute per token with a token bucket in Redis; 429 carries Retry-After.",
        "how is the search API rate limited",
    ),
    (
        "Migrate the users table to add an email_verified column",
        "migrations/0042_email_verified.sql",
        "The migration adds email_verified boolean default false and backfills it in batches of 5000 rows.",
        "how was email_verified added",
    ),
    (
        "Why do the integration tests flake on CI?",
        "tests/integration/conftest.py",
        "The flake came from a shared Postgres schema between workers; each xdist worker now gets its own schema.",
        "cause of the flaky integration tests",
    ),
    (
        "Write a script to rotate the API signing keys",
        "scripts/rotate_keys.py",
        "Keys rotate every 90 days; the old key stays valid for 7 days so clients can switch over.",
        "how long does the old signing key stay valid",
    ),
    (
        "Profile the image resizer, it uses too much memory",
        "media/resize.py",
        "Pillow decoded full-size images; draft mode plus thumbnail() cut peak memory from 1.2 GB to 140 MB.",
        "how did we reduce the image resizer memory",
    ),
    (
        "Upgrade the frontend to React 19",
        "web/package.json",
        (
            "React 19 upgrade done; the only break was the legacy context API in the settings panel, "
            "replaced by createContext."
        ),
        "what broke in the React 19 upgrade",
    ),
    (
        "Configure log shipping to Loki for the worker pods",
        "deploy/worker/promtail.yaml",
        "Promtail ships worker logs to Loki with the label app=worker; retention is 14 days.",
        "where do worker logs go and for how long",
    ),
    (
        "The cron for invoices runs twice, please fix",
        "ops/crontab",
        "Two replicas each ran the invoice cron; it now runs as a Kubernetes CronJob with concurrencyPolicy Forbid.",
        "why did invoices run twice",
    ),
    (
        "Document how to run the service locally",
        "README.md",
        "Local runs use docker compose up with the dev profile; the seed script loads 50 demo customers.",
        "how to run the service locally",
    ),
]
FILLER = [
    "Show me the current git status",
    "Run the unit tests",
    "Looks good, commit it",
    "Can you explain that diff?",
    "Rename the variable to something clearer",
    "Format the code",
]


class Entries:
    """The JSONL entries of one transcript, stamped as Claude Code stamps them (uuid, parent,
    session, time a few seconds after the last, cwd, branch)."""

    def __init__(
        self, rng: random.Random, session_id: str, cwd: str, when: datetime, step: tuple[int, int] = (2, 40)
    ) -> None:
        self.rng, self.session_id, self.cwd, self.when, self.step = rng, session_id, cwd, when, step
        self.lines: list[dict] = []
        self.parent: str | None = None

    def add(self, entry: dict) -> None:
        self.when += timedelta(seconds=self.rng.randint(*self.step))
        entry.update(
            uuid=str(uuid.UUID(int=self.rng.getrandbits(128))),
            parentUuid=self.parent,
            sessionId=self.session_id,
            timestamp=self.when.isoformat().replace("+00:00", "Z"),
            cwd=self.cwd,
            gitBranch="main",
            isSidechain=False,
            userType="external",
            version="2.1.330",
        )
        self.parent = entry["uuid"]
        self.lines.append(entry)

    def write(self, file: Path) -> Path:
        file.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.lines), encoding="utf-8")
        return file


def make_transcript(
    folder: Path,
    cwd: str,
    turns: int,
    seed: int = 0,
    start: datetime | None = None,
    tasks: list[tuple[str, str, str, str]] | None = None,
) -> tuple[Path, str, list[int]]:
    """A transcript of ``turns`` exchanges; returns (file, session id, the index in TASKS of each
    exchange's task, -1 for filler)."""
    rng = random.Random(seed)
    session_id = str(uuid.UUID(int=rng.getrandbits(128)))
    entries = Entries(rng, session_id, cwd, start or datetime(2026, 11, 2, 9, 0, tzinfo=UTC))
    add = entries.add
    kinds: list[int] = []
    tasks = tasks if tasks is not None else TASKS

    for turn in range(turns):
        pick = rng.randrange(len(tasks)) if rng.random() < 0.6 else -1
        kinds.append(pick)
        if pick >= 0:
            prompt, file, answer, _ = tasks[pick]
        else:
            prompt, file, answer = rng.choice(FILLER), "src/app.py", "Done: the tests pass (42 passed)."
        add({"type": "user", "message": {"role": "user", "content": prompt}})
        for name, params in (
            ("Read", {"file_path": f"{cwd}/{file}"}),
            ("Grep", {"pattern": file.split("/")[-1]}),
            ("Edit", {"file_path": f"{cwd}/{file}", "old_string": "a", "new_string": "b"}),
            ("Bash", {"command": "pytest -q", "description": "Run the tests"}),
        )[: rng.randint(1, 4)]:
            tool_id = f"toolu_{rng.getrandbits(64):016x}"
            add(
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": params}],
                    },
                }
            )
            add(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}],
                    },
                    "toolUseResult": {"ok": True},
                }
            )
        add({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]}})
    return entries.write(folder / f"{session_id}.jsonl"), session_id, kinds
