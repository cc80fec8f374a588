"""Realistic coding sessions of three projects over a few weeks, as Claude Code transcripts, with the
questions a developer asks at the start of the next session (what the next session must know).

Each project has eight sessions: decisions with their reasons, errors and what fixed them, commands
that passed or failed, config values that change a week later (a port, a timeout, a batch size),
TODOs left open and some resolved later, and memories the agent scribed (decision, failure,
insight). ``write_project`` writes the JSONL files; ``PROBES`` are the questions with the words of
the current answer, and the old values that must never be shown as current.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.helpers.sessions import Entries


@dataclass(frozen=True)
class Turn:
    prompt: str
    answer: str
    tools: tuple[tuple, ...] = ()  # ("Read"|"Edit"|"Write", path) or ("Bash", command, passed)
    scribe: dict | None = None  # a memory the agent scribed during the turn (title, text, type)


@dataclass(frozen=True)
class Spec:
    day: str  # when it happened, e.g. "2026-11-02 09:10"
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Probe:
    question: str
    expect: tuple[str, ...]  # all of these words must be in the briefing
    stale: tuple[str, ...] = ()  # an old value: any line naming it must say it changed
    not_open: tuple[str, ...] = ()  # resolved: must not be listed among the open items


@dataclass
class Project:
    name: str
    sessions: list[Spec] = field(default_factory=list)


T = Turn
FILLER = (
    T("run the tests", "All tests pass (212 passed).", (("Bash", "pytest -q", True),)),
    T("looks good, commit it", "Committed.", (("Bash", "git commit -am 'wip'", True),)),
)

SHOP = Project(
    "shop",
    [
        Spec(
            "2026-11-02 09:10",
            (
                T(
                    "Set up the local dev environment for the shop API with docker compose",
                    "The shop API now runs locally with `docker compose up`; it listens on port 8000 and the seed script loads "
                    "50 demo products. Postgres 16 runs in its own container.",
                    (
                        ("Write", "docker-compose.yml"),
                        ("Write", "scripts/seed.py"),
                        ("Bash", "docker compose up -d", True),
                    ),
                ),
                T(
                    "Should we use MySQL or Postgres for the orders database?",
                    "We decided on Postgres 16 instead of MySQL because order line items are stored as JSONB and queried by "
                    "attribute; MySQL's JSON indexes would need generated columns for each attribute.",
                    (("Read", "src/shop/orders/models.py"),),
                    {
                        "title": "Postgres over MySQL for orders",
                        "type": "decision",
                        "text": "Postgres 16 instead of MySQL because order line items are JSONB, queried by attribute.",
                    },
                ),
                FILLER[0],
            ),
        ),
        Spec(
            "2026-11-04 14:02",
            (
                T(
                    "The Stripe webhook fails with SignatureVerificationError in staging, can you look?",
                    "The webhook failed because Django parsed the JSON body before verification, so the signature was checked "
                    "against re-serialised bytes. Fixed by verifying against request.body (the raw bytes) before parsing. "
                    "TODO: webhook deliveries that fail are dropped; we still need a retry queue for them.",
                    (
                        ("Read", "src/shop/payments/webhooks.py"),
                        ("Edit", "src/shop/payments/webhooks.py"),
                        ("Bash", "pytest tests/payments -q", False),
                        ("Edit", "tests/payments/test_webhooks.py"),
                        ("Bash", "pytest tests/payments -q", True),
                    ),
                    {
                        "title": "Stripe webhook signature needs the raw body",
                        "type": "failure",
                        "text": "SignatureVerificationError: verify against request.body (raw bytes) before any JSON parsing.",
                    },
                ),
                FILLER[1],
            ),
        ),
        Spec(
            "2026-11-06 10:30",
            (
                T(
                    "Add a timeout to the payment provider client, requests hang forever sometimes",
                    "The payment client's request timeout is now 30 s (connect timeout 5 s), set in settings.PAYMENT_TIMEOUT. "
                    "A hung call now raises PaymentTimeout, which the checkout view turns into a retryable 503.",
                    (
                        ("Read", "src/shop/payments/client.py"),
                        ("Edit", "src/shop/payments/client.py"),
                        ("Edit", "src/shop/settings.py"),
                        ("Bash", "pytest tests/payments -q", True),
                    ),
                ),
                T(
                    "requests or httpx for the payment client?",
                    "Going with httpx rather than requests, because we need HTTP/2 to the provider and the async checkout "
                    "view can await it.",
                    (("Edit", "pyproject.toml"),),
                ),
                FILLER[0],
            ),
        ),
        Spec(
            "2026-11-09 16:45",
            (
                T(
                    "Cache the product list in Redis",
                    "The product list is cached in Redis for 300 seconds under the key products:v1, invalidated on product save.",
                    (
                        ("Edit", "src/shop/catalog/views.py"),
                        ("Edit", "src/shop/catalog/signals.py"),
                        ("Bash", "pytest tests/catalog -q", True),
                    ),
                ),
                T(
                    "why does the cache lose keys in staging?",
                    "Redis in staging had maxmemory-policy noeviction with volatile keys, so writes failed when memory was full. "
                    "Gotcha: the cache Redis must run with maxmemory-policy allkeys-lru; I set it in the Helm values.",
                    (("Read", "deploy/redis/values.yaml"), ("Edit", "deploy/redis/values.yaml")),
                    {
                        "title": "Cache Redis needs allkeys-lru",
                        "type": "insight",
                        "text": "Gotcha: the cache Redis must run with maxmemory-policy allkeys-lru, or writes fail when full.",
                    },
                ),
            ),
        ),
        Spec(
            "2026-11-11 11:20",
            (
                T(
                    "The docs server also wants port 8000, move the API somewhere else",
                    "The shop API now listens on port 8080 instead of 8000, because 8000 clashes with the mkdocs server; "
                    "docker-compose.yml, the Makefile and the README say 8080.",
                    (
                        ("Edit", "docker-compose.yml"),
                        ("Edit", "Makefile"),
                        ("Edit", "README.md"),
                        ("Bash", "docker compose up -d api", True),
                    ),
                ),
                FILLER[1],
            ),
        ),
        Spec(
            "2026-11-13 15:05",
            (
                T(
                    "Checkout still sees PaymentTimeout at peak, the provider's p99 is 38 s",
                    "Raised the payment client's request timeout from 30 s to 45 s, since the provider's p99 is 38 s at peak; "
                    "connect timeout stays 5 s.",
                    (("Edit", "src/shop/settings.py"), ("Bash", "pytest tests/payments -q", True)),
                ),
                FILLER[0],
            ),
        ),
        Spec(
            "2026-11-17 09:40",
            (
                T(
                    "Let's finally add the retry queue for failed webhook deliveries",
                    "Failed webhook deliveries are now retried by a Celery task with exponential backoff, up to 8 attempts, then "
                    "logged to the dead_webhooks table. The webhook retry queue is done.",
                    (
                        ("Write", "src/shop/payments/retry.py"),
                        ("Edit", "src/shop/payments/webhooks.py"),
                        ("Bash", "pytest tests/payments -q", True),
                    ),
                ),
                T(
                    "what's left before launch?",
                    "Everything on the launch checklist is green except load testing. Next step: load test checkout with k6 "
                    "at 200 requests per second before launch.",
                    (("Read", "docs/launch.md"),),
                ),
            ),
        ),
        Spec(
            "2026-11-20 13:15",
            (
                T(
                    "pytest-xdist runs are flaky on CI",
                    "The flakes came from workers sharing one test database; each xdist worker now runs migrations into its own "
                    "database (test_shop_gw0, gw1...). We chose per-worker databases over transactions because the Celery tests "
                    "commit.",
                    (
                        ("Edit", "tests/conftest.py"),
                        ("Bash", "pytest -n 4 -q", False),
                        ("Edit", "tests/conftest.py"),
                        ("Bash", "pytest -n 4 -q", True),
                    ),
                ),
                T(
                    "Can we upgrade Django to 5.1 now?",
                    "Not today: django-celery-beat does not support 5.1 yet. Left open: upgrade Django to 5.1 once "
                    "django-celery-beat 2.7 is out.",
                    (("Bash", "pip index versions django-celery-beat", True),),
                ),
            ),
        ),
    ],
)

ATLAS = Project(
    "atlas",
    [
        Spec(
            "2026-10-26 10:00",
            (
                T(
                    "Write the Kafka consumer for the ingest pipeline",
                    "The consumer reads the events topic in batches of 500 records and commits offsets after each batch is "
                    "written to ClickHouse.",
                    (("Write", "internal/ingest/consumer.go"), ("Bash", "go test ./...", True)),
                ),
                T(
                    "sarama or franz-go?",
                    "We decided on franz-go instead of sarama because sarama's consumer-group rebalances stalled for 30 s in "
                    "our tests; franz-go's cooperative rebalancing does not stop the group.",
                    (("Edit", "go.mod"),),
                    {
                        "title": "franz-go over sarama",
                        "type": "decision",
                        "text": "franz-go instead of sarama: sarama's consumer-group rebalances stalled; franz-go rebalances cooperatively.",
                    },
                ),
            ),
        ),
        Spec(
            "2026-10-29 15:30",
            (
                T(
                    "The ingest pods get OOMKilled after a few hours",
                    "pprof showed the dedupe cache was an unbounded map; it is now an LRU of 100,000 entries and memory stays "
                    "under 300 MB. The error was the OOMKill every 4 hours.",
                    (
                        ("Bash", "go tool pprof -top heap.out", True),
                        ("Edit", "internal/ingest/dedupe.go"),
                        ("Bash", "go test ./internal/ingest/...", True),
                    ),
                    {
                        "title": "Dedupe cache must be bounded",
                        "type": "failure",
                        "text": "OOMKill: the dedupe cache was an unbounded map; an LRU of 100,000 entries fixed it.",
                    },
                ),
            ),
        ),
        Spec(
            "2026-11-02 11:10",
            (
                T(
                    "Add retries when ClickHouse writes fail",
                    "Writes retry with exponential backoff, 5 attempts at most, starting at 200 ms. TODO: poison messages "
                    "still block the partition; we need a dead-letter topic for them.",
                    (("Edit", "internal/ingest/writer.go"), ("Bash", "go test ./internal/ingest/...", True)),
                ),
                FILLER[0],
            ),
        ),
        Spec(
            "2026-11-05 14:20",
            (
                T(
                    "Benchmark the consumer batch size",
                    "Batch size is now 2000 instead of 500: the benchmark showed 3.1x the throughput with p99 write latency "
                    "still under 400 ms.",
                    (
                        ("Bash", "go test -bench BenchmarkIngest ./internal/ingest", True),
                        ("Edit", "internal/ingest/config.go"),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-09 09:50",
            (
                T(
                    "Implement the dead-letter topic for poison messages",
                    "Poison messages now go to the ingest.dlq topic after 5 failed attempts, with the error in a header; "
                    "the dead-letter topic is done and the partition no longer blocks.",
                    (
                        ("Write", "internal/ingest/dlq.go"),
                        ("Edit", "internal/ingest/writer.go"),
                        ("Bash", "go test ./...", False),
                        ("Edit", "internal/ingest/dlq_test.go"),
                        ("Bash", "go test ./...", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-12 16:00",
            (
                T(
                    "CI fails on the loop variable test but passes locally",
                    "CI built with Go 1.21, where the loop variable is shared between iterations; locally we have Go 1.22. "
                    "Gotcha: the CI image must use Go 1.22 or later; I bumped it in .github/workflows/ci.yml.",
                    (
                        ("Read", ".github/workflows/ci.yml"),
                        ("Edit", ".github/workflows/ci.yml"),
                        ("Bash", "go test ./...", True),
                    ),
                    {
                        "title": "CI needs Go 1.22 loop semantics",
                        "type": "insight",
                        "text": "Gotcha: the code relies on Go 1.22 per-iteration loop variables; the CI image must be Go 1.22+.",
                    },
                ),
                T(
                    "pin the linter version too",
                    "Pinned golangci-lint to v1.59.1 because v1.60 flags every fmt.Errorf without %w.",
                    (("Edit", ".github/workflows/ci.yml"),),
                ),
            ),
        ),
        Spec(
            "2026-11-16 10:30",
            (
                T(
                    "Write the Helm chart for the ingest service",
                    "The chart deploys 3 replicas with a PodDisruptionBudget of 1; the consumer group is atlas-ingest. "
                    "Still need to set up an alert on consumer lag above 10,000 messages.",
                    (
                        ("Write", "deploy/chart/values.yaml"),
                        ("Write", "deploy/chart/templates/deployment.yaml"),
                        ("Bash", "helm lint deploy/chart", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-19 13:40",
            (
                T(
                    "Should the events move to protobuf?",
                    "Yes, eventually: we decided to move events to protobuf with a schema registry because JSON parsing is "
                    "40% of the consumer's CPU. Not started; next step: pick Buf or Confluent schema registry.",
                    (("Bash", "go tool pprof -top cpu.out", True),),
                ),
                FILLER[1],
            ),
        ),
    ],
)

QUILL = Project(
    "quill",
    [
        Spec(
            "2026-11-03 09:00",
            (
                T(
                    "Scaffold the notes app with Vite and React",
                    "The app is scaffolded with Vite and React 18; the dev server runs on port 5173 with `npm run dev`.",
                    (("Bash", "npm create vite@latest quill -- --template react-ts", True), ("Write", "src/App.tsx")),
                ),
                T(
                    "Redux or Zustand for state?",
                    "We'll go with Zustand rather than Redux because the store is small and Zustand needs no provider or "
                    "reducers boilerplate.",
                    (("Write", "src/store.ts"),),
                    {
                        "title": "Zustand over Redux",
                        "type": "decision",
                        "text": "Zustand instead of Redux: the store is small, no provider or reducer boilerplate.",
                    },
                ),
            ),
        ),
        Spec(
            "2026-11-05 13:30",
            (
                T(
                    "Hydration mismatch error on the note list page",
                    "The hydration mismatch was caused by Date.now() in the render of the relative timestamps; fixed by "
                    "computing them in a useEffect after mount.",
                    (
                        ("Read", "src/components/NoteList.tsx"),
                        ("Edit", "src/components/NoteList.tsx"),
                        ("Bash", "npm test", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-07 10:15",
            (
                T(
                    "Add autosave to the editor",
                    "Autosave writes the note 1000 ms after the last keystroke (debounced) and on blur. TODO: offline mode: "
                    "keep edits in IndexedDB when the network is down.",
                    (
                        ("Edit", "src/editor/Editor.tsx"),
                        ("Write", "src/editor/autosave.ts"),
                        ("Bash", "npm test", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-10 15:45",
            (
                T(
                    "The app crashes in Safari on load",
                    "Safari has no requestIdleCallback, so the search indexer crashed on load. Fixed with a setTimeout "
                    "fallback in src/lib/idle.ts.",
                    (("Write", "src/lib/idle.ts"), ("Edit", "src/search/indexer.ts"), ("Bash", "npm test", True)),
                    {
                        "title": "Safari lacks requestIdleCallback",
                        "type": "insight",
                        "text": "Gotcha: Safari has no requestIdleCallback; use the fallback in src/lib/idle.ts.",
                    },
                ),
            ),
        ),
        Spec(
            "2026-11-14 11:00",
            (
                T(
                    "Users lose edits when they close the tab right after typing",
                    "Lowered the autosave debounce from 1000 ms to 400 ms, because users closed the tab within a second of "
                    "typing, and added a beforeunload flush.",
                    (("Edit", "src/editor/autosave.ts"), ("Bash", "npm test", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-17 14:10",
            (
                T(
                    "Set up end-to-end tests",
                    "We chose Playwright over Cypress because the sharing flow needs two browser tabs and Cypress cannot drive "
                    "more than one. The suite has 14 tests.",
                    (
                        ("Write", "e2e/sharing.spec.ts"),
                        ("Bash", "npx playwright test", False),
                        ("Edit", "e2e/sharing.spec.ts"),
                        ("Bash", "npx playwright test", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-21 09:30",
            (
                T(
                    "Start on offline mode",
                    "Offline mode is in: edits are kept in IndexedDB through idb-keyval and synced when the network returns. "
                    "Left open: conflict resolution when two devices edit the same note offline.",
                    (("Write", "src/sync/offline.ts"), ("Edit", "src/editor/autosave.ts"), ("Bash", "npm test", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-24 16:20",
            (
                T(
                    "The bundle is too big",
                    "The bundle went from 1.4 MB to 610 KB by lazy-loading the editor. Next step: replace moment.js with "
                    "date-fns, which would save another 70 KB.",
                    (("Bash", "npx vite build", True), ("Edit", "src/main.tsx")),
                ),
            ),
        ),
    ],
)

PROJECTS = [SHOP, ATLAS, QUILL]

PROBES: dict[str, list[Probe]] = {
    "shop": [
        Probe("Which port does the shop API listen on locally?", ("8080",), stale=("8000",)),
        Probe("What is the payment client's request timeout?", ("45 s",), stale=("30 s",)),
        Probe("Why Postgres and not MySQL?", ("Postgres", "JSONB")),
        Probe("Which HTTP client for payments, and why?", ("httpx", "HTTP/2")),
        Probe("What fixed the webhook SignatureVerificationError?", ("raw",)),
        Probe("Which Redis eviction policy does the cache need?", ("allkeys-lru",)),
        Probe("What is left to do before launch?", ("k6",), not_open=("retry queue",)),
        Probe("What was left open about Django?", ("Django to 5.1",)),
    ],
    "atlas": [
        Probe("What batch size does the consumer use?", ("2000",), stale=("500 records",)),
        Probe("Why franz-go rather than sarama?", ("franz-go", "rebalanc")),
        Probe("What fixed the OOMKills?", ("LRU",)),
        Probe("Where do poison messages go?", ("ingest.dlq",), not_open=("dead-letter topic for them",)),
        Probe("Which Go version must CI use?", ("1.22",)),
        Probe("What alert is still missing?", ("consumer lag",)),
        Probe("What was decided about protobuf?", ("protobuf", "schema registry")),
    ],
    "quill": [
        Probe("What is the autosave debounce?", ("400 ms",), stale=("1000 ms",)),
        Probe("Why Zustand?", ("Zustand", "boilerplate")),
        Probe("What caused the hydration mismatch?", ("Date.now()",)),
        Probe("What is the Safari gotcha?", ("requestIdleCallback",)),
        Probe("Why Playwright over Cypress?", ("Playwright", "tabs")),
        Probe(
            "What is left open about offline mode?", ("conflict resolution",), not_open=("offline mode: keep edits",)
        ),
        Probe("What dependency should be replaced next?", ("moment.js",)),
    ],
}

# Written after the digest's rules were fixed, in other wordings, and not used to tune them: the
# eval reports them apart (bench/eval_briefing.py).
LEDGER = Project(
    "ledger",
    [
        Spec(
            "2026-11-01 08:30",
            (
                T(
                    "Kick off the ledger export service; CSV or Parquet?",
                    "Let's use Parquet; the reason is that the analysts load it straight into DuckDB and it is a fifth of "
                    "the CSV size. The exporter writes one file per day to s3://ledger-exports.",
                    (("Write", "ledger/export.py"), ("Bash", "pytest -q tests/test_export.py", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-03 17:10",
            (
                T(
                    "exports for Nov 2 are missing rows",
                    "Root cause: the query filtered on created_at in local time, so rows after 23:00 UTC landed in the next "
                    "day's file. The patch converts the window to UTC before querying, and a regression test covers it.",
                    (
                        ("Read", "ledger/query.py"),
                        ("Edit", "ledger/query.py"),
                        ("Bash", "pytest -q", False),
                        ("Bash", "pytest -q", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-06 10:00",
            (
                T(
                    "How long do we keep exports?",
                    "Exports are kept for 14 days by an S3 lifecycle rule on the bucket. I haven't added the Glacier tier "
                    "yet; that's still to do once finance confirms the 7-year requirement.",
                    (("Edit", "infra/s3.tf"), ("Bash", "terraform plan", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-10 14:40",
            (
                T(
                    "finance says 14 days is too short",
                    "Retention was bumped to 30 days (it was 14), in infra/s3.tf; terraform apply went through.",
                    (("Edit", "infra/s3.tf"), ("Bash", "terraform apply -auto-approve", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-13 09:20",
            (
                T(
                    "The nightly export job is slow",
                    "The job took 41 minutes because it read the whole table; it now reads only the day's partition and "
                    "takes 3 minutes. We're switching the scheduler to Dagster since cron gave us no retries or history.",
                    (
                        ("Edit", "ledger/export.py"),
                        ("Write", "dagster/jobs.py"),
                        ("Bash", "dagster job execute -j export", True),
                    ),
                ),
            ),
        ),
        Spec(
            "2026-11-18 16:05",
            (
                T(
                    "Add the Glacier tier now that finance confirmed",
                    "Objects move to Glacier Deep Archive after 30 days and expire after 7 years; the Glacier tier is in "
                    "place. Remaining work: document the restore procedure for auditors.",
                    (("Edit", "infra/s3.tf"), ("Bash", "terraform apply -auto-approve", True)),
                ),
            ),
        ),
    ],
)

HANGUL = Project(
    "hangul-shop",
    [
        Spec(
            "2026-11-02 10:00",
            (
                T(
                    "주문 API의 페이지 크기를 정해줘",
                    "주문 목록 API의 페이지 크기를 50개로 정했습니다. 모바일 앱이 한 화면에 50개까지 보여주기 때문입니다.",
                    (("Edit", "api/orders.py"), ("Bash", "pytest -q", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-05 15:00",
            (
                T(
                    "결제 웹훅에서 500 에러가 나",
                    "웹훅 서명 검증 전에 본문을 파싱해서 에러가 났습니다. 원본 바이트로 검증하도록 수정했습니다. "
                    "TODO: 실패한 웹훅을 재시도하는 큐를 추가해야 합니다.",
                    (("Edit", "payments/webhook.py"), ("Bash", "pytest -q", False), ("Bash", "pytest -q", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-09 11:00",
            (
                T(
                    "페이지 크기가 너무 커서 느려",
                    "주문 목록 API의 페이지 크기를 50개에서 20개로 줄였습니다. 응답 시간이 1.2초에서 300ms로 줄었습니다.",
                    (("Edit", "api/orders.py"), ("Bash", "pytest -q", True)),
                ),
            ),
        ),
        Spec(
            "2026-11-12 09:00",
            (
                T(
                    "캐시는 Redis 대신 Memcached로 갈까?",
                    "Redis를 계속 쓰기로 결정했습니다. 세션 저장에도 Redis를 쓰고 있기 때문입니다. 아직 캐시 만료 시간은 정하지 않았습니다.",
                    (("Read", "config/cache.py"),),
                ),
            ),
        ),
    ],
)

HELD_OUT = [LEDGER, HANGUL]
PROBES_HELD_OUT: dict[str, list[Probe]] = {
    "ledger": [
        Probe("Which export format and why?", ("Parquet", "DuckDB")),
        Probe("What caused the missing rows?", ("UTC",)),
        Probe("How long are exports kept?", ("30 days",), stale=("14 days",)),
        Probe("Which scheduler runs the export?", ("Dagster",)),
        Probe("What is left to do?", ("restore procedure",), not_open=("Glacier tier",)),
    ],
    "hangul-shop": [
        Probe("주문 API 페이지 크기는?", ("20개",), stale=("50개로",)),
        Probe("웹훅 500 에러의 원인은?", ("원본 바이트",)),
        Probe("남은 일은?", ("재시도",)),
        Probe("캐시는 무엇을 쓰기로 했나?", ("Redis를 계속",)),
        Probe("정하지 않은 것은?", ("캐시 만료 시간",)),
    ],
}

KOREAN = Spec(
    "2026-11-18 10:00",
    (
        T(
            "결제 모듈의 타임아웃 오류를 고쳐줘",
            "결제 클라이언트의 타임아웃을 30초에서 45초로 늘렸습니다. 원인은 결제사의 응답 지연이었습니다. "
            "TODO: 재시도 큐를 추가해야 합니다.",
            (("Edit", "src/결제/client.py"), ("Bash", "pytest -q", True)),
        ),
        T(
            "Redis 대신 Postgres를 쓰기로 하자",
            "Postgres를 쓰기로 결정했습니다. 왜냐하면 트랜잭션이 필요하기 때문입니다.",
            (),
        ),
    ),
)
JAPANESE = Spec(
    "2026-11-18 11:00",
    (
        T(
            "ログイン画面のエラーを直してください",
            "セッションの有効期限が切れていたため、ログインでエラーが発生していました。トークンの更新処理を追加して修正しました。"
            "次のステップ：リフレッシュトークンのテストを書く。",
            (("Edit", "src/auth/ログイン.ts"), ("Bash", "npm test", False), ("Bash", "npm test", True)),
        ),
    ),
)


def write_session(folder: Path, project: str, spec: Spec, seed: int | str) -> tuple[Path, str]:
    """One session's JSONL, as Claude Code writes it, in ``folder``; returns (file, session id)."""
    rng = random.Random(seed)
    session_id = str(uuid.UUID(int=rng.getrandbits(128)))
    entries = Entries(
        rng,
        session_id,
        f"/home/dev/{project}",
        datetime.strptime(spec.day, "%Y-%m-%d %H:%M").replace(tzinfo=UTC),
        step=(5, 90),
    )
    cwd, add = entries.cwd, entries.add

    def tool(name: str, params: dict, output: str, failed: bool = False) -> None:
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
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": output}
        if failed:
            result["is_error"] = True
        add({"type": "user", "message": {"role": "user", "content": [result]}, "toolUseResult": {"stdout": output}})

    for turn in spec.turns:
        add({"type": "user", "message": {"role": "user", "content": turn.prompt}})
        add(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Let me look at the code first."}],
                },
            }
        )
        for step in turn.tools:
            if step[0] == "Bash":
                passed = step[2]
                tool("Bash", {"command": step[1]}, "ok" if passed else "Exit code 1\nFAILED (1 failed)", not passed)
            elif step[0] == "Read":
                tool("Read", {"file_path": f"{cwd}/{step[1]}"}, "(file contents)")
            else:
                tool(step[0], {"file_path": f"{cwd}/{step[1]}", "old_string": "a", "new_string": "b"}, "ok")
        if turn.scribe:
            tool("mcp__spellbook__scribe", {**turn.scribe, "context": project}, '{"id": "x"}')
        add({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": turn.answer}]}})
    return entries.write(folder / f"{session_id}.jsonl"), session_id


def capture_projects(hub: Any, folder: Path, projects: list[Project], seed: int = 3) -> None:
    """Every session of ``projects`` captured through the real capture path, in a shuffled order
    (captured is not when it happened), with the memories the agent scribed in them."""
    from spellbook.sessions.capture import capture
    from spellbook.sessions.transcript import read_transcript

    runs = [(p.name, file, spec) for p in projects for file, spec in write_project(folder, p)]
    random.Random(seed).shuffle(runs)
    for name, file, spec in runs:
        capture(hub, read_transcript(file), folder / "locks")
        for turn in spec.turns:
            if turn.scribe:
                hub.call("scribe", {**turn.scribe, "context": name})


def write_project(folder: Path, project: Project) -> list[tuple[Path, Spec]]:
    """Every session of ``project`` as a transcript file, in the order they happened."""
    return [
        (write_session(folder, project.name, spec, f"{project.name}-{n}")[0], spec)
        for n, spec in enumerate(project.sessions)
    ]


def score(text: str, probes: list[Probe]) -> tuple[list[Probe], list[str]]:
    """(the probes the briefing ``text`` answers, the faults found): a probe is answered when every
    expected word is in the text, no line names an old value as current (a line with the old value
    and not the new one must say it changed), and nothing resolved is listed as open."""
    lines = text.splitlines()
    open_lines: list[str] = []
    section = ""
    for line in lines:
        if line.startswith("## "):
            section = line.lower()
        elif "open" in section:
            open_lines.append(line)
    answered, faults = [], []
    folded = text.casefold()
    for probe in probes:
        ok = all(word.casefold() in folded for word in probe.expect)
        for line in lines:
            for old in probe.stale:
                if old in line and not any(w in line for w in probe.expect) and "changed" not in line.lower():
                    ok = False
                    faults.append(f"old value {old!r} shown as current: {line[:160]}")
        for line in open_lines:
            for done in probe.not_open:
                if done.casefold() in line.casefold():
                    ok = False
                    faults.append(f"resolved item listed as open: {line[:160]}")
        if ok:
            answered.append(probe)
    return answered, faults
