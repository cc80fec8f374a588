"""Core performance benchmark: startup, scribe, memorize, memory use and first index.

Everything goes through the real entry points: ``spellbook serve`` spawned as a subprocess and
driven by the real MCP SDK stdio client (so the numbers include process start, JSON-RPC over
pipes, the tool layer, the hub, the vault writes and the index), and ``spellbook index`` run as a
subprocess for the hand-written vault. It prints figures only; nothing here passes or fails.

    .venv/bin/python bench/bench_core.py                      # 1,000 notes, 200 queries, use-m3
    .venv/bin/python bench/bench_core.py --notes 200 --queries 50 --embedder hashing

Sections:
  1. startup: process start -> ``list_tools()`` answer, on a fresh vault (N runs: the first with no
     handshake cache, as after an install, the rest with it) and on a vault that already holds the
     benchmark's notes (restart cost); also the first tool call's answer and the index ready.
  2. scribe: ``--notes`` synthetic notes (60-200 words; English, Korean, Japanese) sent one by one.
  3. memorize: ``--queries`` queries per mode (hybrid, semantic, keyword, hybrid + category filter), then
     hybrid again with each query right after a scribe to another note (an agent's session mixes them).
  4. memory: VmHWM / VmRSS of the serving (owner) process, read from /proc.
  5. first index: ``--notes`` hand-written markdown files (no frontmatter, 2-4 ``##`` sections)
     indexed with ``spellbook index``, then a second, no-op run.

Each figure is printed beside the embedder's own cost for the same texts, measured in this
process with the same model and thread count (section 0): what is above it is Spellbook's, less
what the MCP SDK costs: its round trip for a tool that does nothing, and this (Python) client's
check of each answer against the tool's output schema, both printed. Scribe and memorize are also
split by language (English, Korean, Japanese). Section 6 exports the scribed
notes and imports them into a fresh vault twice: with the ``import`` tool of a running server over
MCP stdio (the call, the server's watcher on), and with ``spellbook import`` (process start to
exit: interpreter, Chroma and the model load included). An import and a first index are
compared with the model measured right before and after them; up to 2,000 notes each runs three
times between four such measurements and the median run is reported (``--batch-runs``): a run of a
few seconds moves with the machine.

The package's bytecode is written first, as an install leaves it (a checkout under edit, or a shell
with PYTHONDONTWRITEBYTECODE, would compile its changed modules again in every process timed).
The summary is printed at the end and written to ``bench/results/core_<embedder>_<N>k.txt`` (N thousand
notes; or ``--out``), the file docs/performance.md quotes.
The environment is passed through to every spawned process, so e.g. ``OPENBLAS_NUM_THREADS=1``
applies to the server and the indexer too (it matters a lot for use-m3 on a busy 2-core box).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from spellbook.defaults import INDEX_DIRNAME, cache_dir
from spellbook.index.analysis import embed_text

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS_DIR = HERE / "results"
SPELLBOOK_BIN = str(Path(sys.executable).with_name("spellbook"))
if not Path(SPELLBOOK_BIN).exists():  # fall back to the repo venv, then PATH
    SPELLBOOK_BIN = str(REPO / ".venv" / "bin" / "spellbook")
    if not Path(SPELLBOOK_BIN).exists():
        SPELLBOOK_BIN = shutil.which("spellbook") or "spellbook"

REST_WAIT_S = 25  # seconds the session waits at its end for the owner to close an idle Chroma
SEED = 20240611
MODES = ("hybrid", "semantic", "keyword")
TARGETS = {"startup_s": 1.0}


# ============================================================================================
# Synthetic text: topic word lists composed by templates, fixed seed, three languages.
# ============================================================================================
TOPICS: dict[str, dict[str, list[str]]] = {
    "deploy": {
        "en": [
            "deploy pipeline",
            "staging cluster",
            "canary release",
            "rollback script",
            "helm chart",
            "blue-green switch",
            "release tag",
            "build cache",
            "container image",
            "load balancer",
        ],
        "ko": [
            "배포 파이프라인",
            "스테이징 클러스터",
            "카나리 배포",
            "롤백 스크립트",
            "헬름 차트",
            "릴리스 태그",
            "빌드 캐시",
            "컨테이너 이미지",
            "로드 밸런서",
            "배포 승인",
        ],
        "ja": [
            "デプロイパイプライン",
            "ステージング環境",
            "カナリアリリース",
            "ロールバック手順",
            "ヘルムチャート",
            "リリースタグ",
            "ビルドキャッシュ",
            "コンテナイメージ",
            "ロードバランサー",
            "本番切り替え",
        ],
    },
    "database": {
        "en": [
            "postgres replica",
            "slow query log",
            "index migration",
            "connection pool",
            "vacuum job",
            "backup snapshot",
            "schema change",
            "read replica lag",
            "foreign key",
            "query planner",
        ],
        "ko": [
            "포스트그레스 복제본",
            "슬로우 쿼리 로그",
            "인덱스 마이그레이션",
            "커넥션 풀",
            "백업 스냅샷",
            "스키마 변경",
            "복제 지연",
            "외래 키",
            "쿼리 플래너",
            "테이블 파티션",
        ],
        "ja": [
            "レプリカ",
            "スロークエリログ",
            "インデックス移行",
            "コネクションプール",
            "バックアップ",
            "スキーマ変更",
            "レプリケーション遅延",
            "外部キー",
            "クエリプランナー",
            "パーティション",
        ],
    },
    "frontend": {
        "en": [
            "react component",
            "bundle size",
            "css grid",
            "dark mode",
            "form validation",
            "accessibility audit",
            "service worker",
            "image lazy loading",
            "design tokens",
            "route guard",
        ],
        "ko": [
            "리액트 컴포넌트",
            "번들 크기",
            "다크 모드",
            "폼 검증",
            "접근성 점검",
            "서비스 워커",
            "이미지 지연 로딩",
            "디자인 토큰",
            "라우트 가드",
            "상태 관리",
        ],
        "ja": [
            "Reactコンポーネント",
            "バンドルサイズ",
            "ダークモード",
            "フォーム検証",
            "アクセシビリティ監査",
            "サービスワーカー",
            "画像の遅延読み込み",
            "デザイントークン",
            "ルーティング",
            "状態管理",
        ],
    },
    "ml": {
        "en": [
            "embedding model",
            "training run",
            "eval set",
            "learning rate",
            "gpu memory",
            "tokenizer",
            "checkpoint",
            "reranker",
            "recall metric",
            "data loader",
        ],
        "ko": [
            "임베딩 모델",
            "학습 실행",
            "평가 세트",
            "학습률",
            "GPU 메모리",
            "토크나이저",
            "체크포인트",
            "리랭커",
            "재현율 지표",
            "데이터 로더",
        ],
        "ja": [
            "埋め込みモデル",
            "学習ジョブ",
            "評価セット",
            "学習率",
            "GPUメモリ",
            "トークナイザー",
            "チェックポイント",
            "リランカー",
            "再現率",
            "データローダー",
        ],
    },
    "security": {
        "en": [
            "api token",
            "ssh key",
            "audit log",
            "password rotation",
            "tls certificate",
            "firewall rule",
            "oauth scope",
            "secret vault",
            "phishing report",
            "access review",
        ],
        "ko": [
            "API 토큰",
            "SSH 키",
            "감사 로그",
            "비밀번호 교체",
            "TLS 인증서",
            "방화벽 규칙",
            "OAuth 권한",
            "시크릿 저장소",
            "피싱 신고",
            "접근 권한 검토",
        ],
        "ja": [
            "APIトークン",
            "SSH鍵",
            "監査ログ",
            "パスワード更新",
            "TLS証明書",
            "ファイアウォール設定",
            "OAuthスコープ",
            "シークレット管理",
            "フィッシング報告",
            "権限レビュー",
        ],
    },
    "cooking": {
        "en": [
            "sourdough starter",
            "kimchi batch",
            "miso soup",
            "cast iron pan",
            "bread flour",
            "fermentation time",
            "knife sharpening",
            "rice cooker",
            "spice rack",
            "weekly meal prep",
        ],
        "ko": [
            "사워도우 스타터",
            "김치 담그기",
            "된장찌개",
            "무쇠 팬",
            "강력분",
            "발효 시간",
            "칼 갈기",
            "밥솥",
            "양념장",
            "주간 밀프렙",
        ],
        "ja": [
            "サワードウ",
            "キムチ作り",
            "味噌汁",
            "鉄のフライパン",
            "強力粉",
            "発酵時間",
            "包丁研ぎ",
            "炊飯器",
            "出汁",
            "作り置き",
        ],
    },
    "travel": {
        "en": [
            "flight booking",
            "rail pass",
            "hotel check-in",
            "travel insurance",
            "packing list",
            "visa appointment",
            "airport lounge",
            "currency exchange",
            "day trip",
            "hiking trail",
        ],
        "ko": [
            "항공권 예약",
            "철도 패스",
            "호텔 체크인",
            "여행자 보험",
            "짐 목록",
            "비자 예약",
            "공항 라운지",
            "환전",
            "당일치기 여행",
            "등산로",
        ],
        "ja": [
            "航空券の予約",
            "鉄道パス",
            "ホテルのチェックイン",
            "旅行保険",
            "持ち物リスト",
            "ビザの予約",
            "空港ラウンジ",
            "両替",
            "日帰り旅行",
            "登山道",
        ],
    },
    "health": {
        "en": [
            "sleep schedule",
            "running plan",
            "blood test",
            "knee injury",
            "protein intake",
            "stretching routine",
            "dentist visit",
            "vitamin d",
            "posture check",
            "meditation habit",
        ],
        "ko": [
            "수면 패턴",
            "달리기 계획",
            "혈액 검사",
            "무릎 부상",
            "단백질 섭취",
            "스트레칭 루틴",
            "치과 예약",
            "비타민 D",
            "자세 교정",
            "명상 습관",
        ],
        "ja": [
            "睡眠リズム",
            "ランニング計画",
            "血液検査",
            "膝のけが",
            "タンパク質摂取",
            "ストレッチ",
            "歯医者の予約",
            "ビタミンD",
            "姿勢改善",
            "瞑想の習慣",
        ],
    },
    "finance": {
        "en": [
            "monthly budget",
            "tax return",
            "index fund",
            "invoice template",
            "expense report",
            "credit card statement",
            "savings goal",
            "subscription audit",
            "pension plan",
            "receipt archive",
        ],
        "ko": [
            "월 예산",
            "연말정산",
            "인덱스 펀드",
            "청구서 양식",
            "경비 보고서",
            "카드 명세서",
            "저축 목표",
            "구독 정리",
            "연금 계획",
            "영수증 보관",
        ],
        "ja": [
            "月の予算",
            "確定申告",
            "インデックス投資",
            "請求書テンプレート",
            "経費精算",
            "カード明細",
            "貯金目標",
            "サブスク整理",
            "年金プラン",
            "領収書の保管",
        ],
    },
    "team": {
        "en": [
            "standup notes",
            "sprint review",
            "onboarding doc",
            "hiring loop",
            "one-on-one",
            "retro action item",
            "roadmap draft",
            "incident postmortem",
            "on-call rotation",
            "design review",
        ],
        "ko": [
            "스탠드업 메모",
            "스프린트 리뷰",
            "온보딩 문서",
            "채용 면접",
            "일대일 면담",
            "회고 액션 아이템",
            "로드맵 초안",
            "장애 회고",
            "온콜 순번",
            "설계 리뷰",
        ],
        "ja": [
            "朝会メモ",
            "スプリントレビュー",
            "オンボーディング資料",
            "採用面接",
            "1on1",
            "振り返りのアクション",
            "ロードマップ案",
            "障害ポストモーテム",
            "オンコール当番",
            "設計レビュー",
        ],
    },
    "home": {
        "en": [
            "boiler service",
            "garden bed",
            "tomato seedlings",
            "leaky faucet",
            "wifi router",
            "bike repair",
            "window insulation",
            "recycling schedule",
            "bookshelf",
            "smart thermostat",
        ],
        "ko": [
            "보일러 점검",
            "텃밭",
            "토마토 모종",
            "수도꼭지 누수",
            "와이파이 공유기",
            "자전거 수리",
            "창문 단열",
            "분리수거 요일",
            "책장 정리",
            "스마트 온도조절기",
        ],
        "ja": [
            "給湯器の点検",
            "家庭菜園",
            "トマトの苗",
            "蛇口の水漏れ",
            "Wi-Fiルーター",
            "自転車の修理",
            "窓の断熱",
            "ゴミ出しの日",
            "本棚の整理",
            "スマートサーモスタット",
        ],
    },
    "language": {
        "en": [
            "korean grammar",
            "kanji flashcards",
            "listening practice",
            "vocabulary deck",
            "tutor session",
            "honorific forms",
            "reading club",
            "pronunciation drill",
            "jlpt mock test",
            "topik exam",
        ],
        "ko": [
            "한국어 문법",
            "한자 카드",
            "듣기 연습",
            "단어장",
            "과외 수업",
            "존댓말",
            "독서 모임",
            "발음 연습",
            "일본어 모의고사",
            "토픽 시험",
        ],
        "ja": [
            "韓国語の文法",
            "漢字カード",
            "リスニング練習",
            "単語帳",
            "家庭教師",
            "敬語",
            "読書会",
            "発音練習",
            "JLPT模試",
            "TOPIK試験",
        ],
    },
}
TOPIC_NAMES = list(TOPICS)

PEOPLE = {
    "en": ["Alice", "Bob", "Priya", "Kenji", "Minji", "Omar", "Lena", "Tomás"],
    "ko": ["지수", "민준", "서연", "현우", "다은", "준호", "하늘", "수빈"],
    "ja": ["田中", "佐藤", "鈴木", "高橋", "伊藤", "山本", "中村", "小林"],
}
DAYS = {
    "en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the weekend", "last night", "this morning"],
    "ko": ["월요일", "화요일", "수요일", "목요일", "금요일", "주말", "어젯밤", "오늘 아침"],
    "ja": ["月曜日", "火曜日", "水曜日", "木曜日", "金曜日", "週末", "昨夜", "今朝"],
}
EN_VERBS = [
    "migrate",
    "review",
    "benchmark",
    "debug",
    "document",
    "schedule",
    "refactor",
    "compare",
    "monitor",
    "clean up",
    "double-check",
    "simplify",
    "automate",
    "pin",
]
EN_ADJ = ["stable", "slow", "flaky", "fast", "expensive", "confusing", "reliable", "noisy", "fragile", "cheap"]
KO_VERBS = ["점검한다", "정리한다", "비교해 본다", "자동화한다", "문서로 남긴다", "다시 확인한다", "단순하게 만든다"]
KO_ADJ = ["불안정했다", "느려졌다", "빨라졌다", "비쌌다", "헷갈렸다", "안정적이었다", "복잡했다"]
JA_VERBS = ["確認する", "整理する", "比較する", "自動化する", "記録する", "見直す", "簡単にする"]
JA_ADJ = ["不安定に", "遅く", "速く", "高く", "分かりにくく", "安定して", "複雑に"]

EN_TEMPLATES = [
    "We decided to {verb} the {n1} before touching the {n2}.",
    "The {n1} became {adj} after {person} changed the {n2} on {day}.",
    "Remember that the {n1} depends on the {n2}, so {verb} it first.",
    "{person} noticed that the {n1} took {num} minutes on {day}, which is far too long.",
    "Next time, check the {n1} and the {n2} together instead of one at a time.",
    "It failed because the {n1} was {adj} and nobody looked at the {n2}.",
    "A good rule: never {verb} the {n1} without a fresh copy of the {n2}.",
    "The fix was to {verb} the {n1} and then restart the {n2}.",
    "Cost went from {num} to {num2} once we changed how the {n1} works.",
    "Open question: should the {n1} own the {n2}, or the other way round?",
    "{person} prefers to {verb} the {n1} weekly; I think monthly is enough.",
    "The {n2} is the part that usually goes wrong, not the {n1}.",
    "Keep a short checklist for the {n1}: {num} steps, written down, no guessing.",
    "Tried a new approach to the {n1} on {day} and it felt {adj}.",
]
KO_TEMPLATES = [
    "{n2} 작업 전에 {n1}부터 {verb}.",
    "{day}에 {person} 님이 {n2} 설정을 바꾼 뒤 {n1} 상태가 {adj}.",
    "{n1}은 {n2}에 의존하므로 순서를 꼭 지켜야 한다.",
    "{day}에 {n1} 확인을 했는데 {num}분이나 걸렸다.",
    "다음에는 {n1}와 {n2}를 한 번에 같이 확인하자.",
    "{n1} 때문에 {n2} 일정이 {num}일 늦어졌다.",
    "결론: {n1}은 {n2}와 분리해서 관리하는 것이 낫다.",
    "{num}번 시도한 끝에 {n1} 문제를 겨우 해결했다.",
    "{person} 님은 {n1}을 매주 {verb}고 했지만 한 달에 한 번이면 충분해 보인다.",
    "비용이 {num}에서 {num2}로 줄었고 {n1} 방식만 바꿨다.",
    "{n1} 체크리스트는 {num}단계로 짧게 유지한다.",
    "문제는 대개 {n1}이 아니라 {n2} 쪽에서 생긴다.",
]
JA_TEMPLATES = [
    "{n2}の作業の前に、まず{n1}を{verb}。",
    "{day}に{person}さんが{n2}を変更してから、{n1}が{adj}なった。",
    "{n1}は{n2}に依存しているので、順番を守ること。",
    "{day}に{n1}を確認したら{num}分もかかった。",
    "次回は{n1}と{n2}を一緒に確認するようにする。",
    "{n1}のせいで{n2}の予定が{num}日遅れた。",
    "結論として、{n1}は{n2}とは分けて管理したほうがいい。",
    "{num}回試して、やっと{n1}の問題が解決した。",
    "{person}さんは{n1}を毎週{verb}べきだと言うが、月一回で十分だと思う。",
    "費用は{num}から{num2}に下がった。{n1}のやり方を変えただけだ。",
    "{n1}のチェックリストは{num}項目に絞っておく。",
    "問題はたいてい{n1}ではなく{n2}の側で起きる。",
]
TEMPLATES = {"en": EN_TEMPLATES, "ko": KO_TEMPLATES, "ja": JA_TEMPLATES}
VERBS = {"en": EN_VERBS, "ko": KO_VERBS, "ja": JA_VERBS}
ADJS = {"en": EN_ADJ, "ko": KO_ADJ, "ja": JA_ADJ}
KINDS = {
    "en": ["notes", "decision", "checklist", "incident", "idea", "lesson", "plan", "review", "log", "tips"],
    "ko": ["메모", "결정", "체크리스트", "장애 기록", "아이디어", "교훈", "계획", "리뷰", "기록", "팁"],
    "ja": ["メモ", "決定", "チェックリスト", "障害記録", "アイデア", "教訓", "計画", "レビュー", "ログ", "コツ"],
}
HEADINGS = {
    "en": ["Context", "Decision", "Steps", "Why", "Gotchas", "Follow-ups", "Open questions", "Results", "Links"],
    "ko": ["배경", "결정", "절차", "이유", "주의할 점", "후속 작업", "열린 질문", "결과"],
    "ja": ["背景", "決定事項", "手順", "理由", "注意点", "フォローアップ", "未解決の質問", "結果"],
}
OTHER_CATEGORIES = ["projects", "personal", "research"]


def _pick_lang(rng: random.Random) -> str:
    return rng.choices(("en", "ko", "ja"), weights=(50, 25, 25))[0]


def _words(lang: str, text: str) -> int:
    """Rough word count: whitespace tokens for English/Korean; ~3 characters a word for Japanese."""
    return max(1, len(text) // 3) if lang == "ja" else len(text.split())


class TextGen:
    """Deterministic note and query generator."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)

    def sentence(self, lang: str, topic: str) -> str:
        r = self.rng
        n1, n2 = r.sample(TOPICS[topic][lang], 2)
        if r.random() < 0.2:  # borrow a noun from a neighbouring topic now and then
            n2 = r.choice(TOPICS[r.choice(TOPIC_NAMES)][lang])
        num = r.randint(2, 90)
        return r.choice(TEMPLATES[lang]).format(
            n1=n1,
            n2=n2,
            verb=r.choice(VERBS[lang]),
            adj=r.choice(ADJS[lang]),
            person=r.choice(PEOPLE[lang]),
            day=r.choice(DAYS[lang]),
            num=num,
            num2=max(1, num - r.randint(1, num)),
        )

    def paragraph(self, lang: str, topic: str, words: int) -> str:
        out = ""
        prev = ""
        count = 0
        while count < words:
            # one sentence in five switches language (people mix languages in their notes)
            sl = lang if self.rng.random() > 0.2 else self.rng.choice(("en", "ko", "ja"))
            s = self.sentence(sl, topic)
            out += ("" if not out or (sl == "ja" and prev == "ja") else " ") + s
            prev = sl
            count += _words(sl, s)
        return out

    def title(self, lang: str, topic: str) -> str:
        r = self.rng
        n1, n2 = r.sample(TOPICS[topic][lang], 2)
        kind = r.choice(KINDS[lang])
        if lang == "en":
            return f"{n1.capitalize()} and {n2} {kind}"
        if lang == "ko":
            return f"{n1}, {n2} {kind}"
        return f"{n1}と{n2}の{kind}"

    def scribe_note(self, i: int) -> dict[str, Any]:
        r = self.rng
        lang = _pick_lang(r)
        topic = r.choice(TOPIC_NAMES)
        target = r.randint(60, 200)
        text = self.paragraph(lang, topic, target)
        if r.random() < 0.3:  # some notes have two paragraphs
            cut = text.find(". ", len(text) // 2)
            if cut > 0:
                text = text[: cut + 1] + "\n\n" + text[cut + 2 :]
        category = "bench" if i % 2 == 0 else r.choice(OTHER_CATEGORIES)
        return {
            "text": text,
            "title": self.title(lang, topic),
            "category": category,
            "topic": topic,
            "tags": [topic, lang, r.choice(KINDS["en"])],
        }

    def handwritten_note(self, i: int) -> tuple[str, str]:
        """(vault-relative path, markdown) of a hand-written note: no frontmatter, 2-4 ## sections."""
        r = self.rng
        lang = _pick_lang(r)
        topic = r.choice(TOPIC_NAMES)
        title = self.title(lang, topic)
        parts: list[str] = []
        if r.random() < 0.7:
            parts.append(f"# {title}\n")
        if r.random() < 0.5:
            parts.append(self.paragraph(lang, topic, r.randint(15, 40)) + "\n")
        for heading in r.sample(HEADINGS[lang], r.randint(2, 4)):
            parts.append(f"## {heading}\n")
            if r.random() < 0.25:
                items = [self.sentence(lang, topic) for _ in range(r.randint(2, 4))]
                parts.append("\n".join(f"- {s}" for s in items) + "\n")
            else:
                parts.append(self.paragraph(lang, topic, r.randint(30, 110)) + "\n")
        if r.random() < 0.2:
            parts.append(f"#{topic} #{lang}\n")
        folder = topic if r.random() < 0.8 else f"{topic}/{r.choice(KINDS['en'])}"
        return f"{folder}/{title} {i:04d}.md", "\n".join(parts)

    def query(self) -> str:
        r = self.rng
        lang = _pick_lang(r)
        topic = r.choice(TOPIC_NAMES)
        n1, n2 = r.sample(TOPICS[topic][lang], 2)
        if lang == "en":
            forms = [
                f"how did we {r.choice(EN_VERBS)} the {n1}",
                f"{n1} {n2}",
                f"why was the {n1} so slow",
                f"what changed in the {n2}",
                f"checklist for {n1}",
                f"{n1} problem fix",
            ]
        elif lang == "ko":
            forms = [
                f"{n1} {n2} 관련 메모",
                f"{n1} 문제 해결 방법",
                f"{n2} 일정이 늦어진 이유",
                f"{n1} 체크리스트",
                f"{n1}",
                f"{n2} 설정 변경",
            ]
        else:
            forms = [
                f"{n1}と{n2}について",
                f"{n1}の問題はどう解決した",
                f"{n2}の予定が遅れた理由",
                f"{n1}のチェックリスト",
                f"{n1}",
                f"{n2}の変更",
            ]
        return r.choice(forms)


def lang_of(text: str) -> str:
    """en, ko or ja by the script most of the letters are in."""
    hangul = len(re.findall(r"[\uac00-\ud7af]", text))
    kana_kanji = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
    latin = len(re.findall(r"[A-Za-z]", text)) / 4  # letters, not syllables
    best = max(("en", latin), ("ko", hangul), ("ja", kana_kanji), key=lambda kv: kv[1])
    return best[0]


def against(rate: float, alone: dict[str, Any], key: str) -> str:
    """``rate`` as a share of the embedder alone on one thread, and on the ``parallel`` threads the
    server embeds a large batch on."""
    out = f"{alone[key]:.0f} texts/s on one thread -> {rate / alone[key] * 100:.0f}%"
    if alone.get(key + "_par"):
        out += (
            f"; {alone[key + '_par']:.0f} texts/s on {alone['parallel']} threads at once -> "
            f"{rate / alone[key + '_par'] * 100:.0f}%"
        )
    return out


def against_now(rate: float, step: dict[str, Any]) -> str:
    """``rate`` as a share of the embedder alone measured right before and after the step."""
    before, after = step["alone_now"]
    mean = (before + after) / 2
    return (
        f"the embedder alone right before / after it: {before:.0f} / {after:.0f} texts/s at once -> "
        f"{rate / mean * 100:.0f}% of their mean (the figure the target is read from)"
    )


def runs_line(step: dict[str, Any]) -> str | None:
    """Each run's share when there were several (``median_run``); the step is the median one."""
    shares = step.get("shares", [])
    if len(shares) < 2:
        return None
    return f"the median of {len(shares)} runs, each against the model right before and after it: " + ", ".join(
        f"{x:.0%}" for x in shares
    )


def embedder_alone(
    name: str, scribe_texts: list[str], queries: list[str], index_texts: list[str], import_texts: list[str]
) -> dict[str, Any]:
    """The embedder's own cost for the texts the server embeds: its model, its thread count, in
    this process, nothing else around it. Loading and resident memory in a child process."""
    from spellbook.config import Settings
    from spellbook.embedders.registry import load_embedder

    child = subprocess.run(
        [sys.executable, "-c", _EMBEDDER_RSS, name],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )
    out: dict[str, Any] = {"rss": child.stdout.strip() or child.stderr.strip()[-200:]}
    started = time.perf_counter()
    embedder = load_embedder(Settings(vault=Path(tempfile.gettempdir()) / "unused", embedder=name))
    embedder.warm_up()
    out["load_s"] = time.perf_counter() - started

    def each(texts: list[str], fn) -> list[float]:
        lat = []
        for text in texts:
            t = time.perf_counter()
            fn(text)
            lat.append((time.perf_counter() - t) * 1000)
        return lat

    out["scribe_ms"] = each(scribe_texts, lambda t: embedder.embed_documents([t]))
    out["query_ms"] = each(queries, embedder.embed_query)

    # The server embeds a large batch (first index, import) on the embedder's `parallel` threads
    # (spellbook/index/indexer.py _embed): the embedder alone is measured on one and on as many.
    out["parallel"] = getattr(embedder, "parallel", 1)
    out["index_texts_per_s"] = embed_rate(embedder, index_texts)
    out["import_texts_per_s"] = embed_rate(embedder, import_texts)
    if out["parallel"] > 1:
        out["index_texts_per_s_par"] = embed_rate(embedder, index_texts, out["parallel"])
        out["import_texts_per_s_par"] = embed_rate(embedder, import_texts, out["parallel"])
    embedder.close()
    return out


# The MCP SDK's own cost: its stdio server with one tool that does nothing, driven by the same client.
_SDK_FLOOR_SERVER = """
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer

class Result(BaseModel):
    query: str
    results: list[dict]

server = MCPServer("floor")

@server.tool()
def noop(query: str, limit: int = 5, mode: str = "hybrid") -> Result:
    \"\"\"Answers at once.\"\"\"
    return Result(query=query, results=[])

server.run("stdio")
"""


CLIENT_CHECK_MS: list[float] = []  # the MCP client's check of each tool result, one entry a call
SDK_CHECK_MS: list[float] = []  # ...of the no-op tool's results (sdk_round_trip)


def time_client_checks() -> None:
    """Time the MCP SDK client's check of each tool result against the tool's output schema
    (``ClientSession.validate_tool_result``: jsonschema, in pure Python). It is inside every figure
    over MCP and grows with the answer (5 hits of ``memorize``: ~1 ms here), while a client such as
    Claude Code checks with a compiled validator; printed beside the figures it is part of."""
    from mcp.client.session import ClientSession

    inner = ClientSession.validate_tool_result
    if getattr(inner, "timed_by_bench", False):
        return

    async def timed(self: Any, name: str, result: Any) -> None:
        started = time.perf_counter()
        try:
            await inner(self, name, result)
        finally:
            CLIENT_CHECK_MS.append((time.perf_counter() - started) * 1000)

    timed.timed_by_bench = True  # type: ignore[attr-defined]
    ClientSession.validate_tool_result = timed  # type: ignore[method-assign]


async def timed_call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[Any, float, float]:
    """``call_tool`` and its milliseconds, and those of the client's check of its result."""
    checks = len(CLIENT_CHECK_MS)
    started = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    took = (time.perf_counter() - started) * 1000
    return result, took, sum(CLIENT_CHECK_MS[checks:])


async def sdk_round_trip(calls: int = 300) -> list[float]:
    """Milliseconds a call to a tool that does nothing takes through the MCP SDK's stdio server and
    this client: the part of every figure over MCP that no tool can remove."""
    params = StdioServerParameters(command=sys.executable, args=["-c", _SDK_FLOOR_SERVER], env=dict(os.environ))
    async with Client(stdio_client(params)) as client:
        lat, checks = [], []
        for i in range(calls + 50):  # the first 50 warm up
            arguments = {"query": f"query {i}", "limit": 5, "mode": "keyword"}
            result, took, check = await timed_call(client, "noop", arguments)
            lat.append(took)
            checks.append(check)
            if result.is_error:
                raise RuntimeError(f"the SDK's no-op tool failed: {_error_text(result)}")
    SDK_CHECK_MS[:] = checks[50:]
    return lat[50:]


def client_check_line(checks: list[float]) -> str:
    """The client's check of each answer against the tool's output schema, beside the no-op's."""
    noop = f" (the SDK's no-op tool: {pct(SDK_CHECK_MS, 50):.2f})" if SDK_CHECK_MS else ""
    return (
        f"of which the MCP client's check of each answer against the tool's output schema (Python SDK, "
        f"jsonschema): p50 {pct(checks, 50):.2f} ms{noop}"
    )


def embed_rate(embedder: Any, texts: list[str], threads: int = 1) -> float:
    """Texts/s in batches of 64, on ``threads`` threads at once (each thread its own batches)."""
    batches = [texts[start : start + 64] for start in range(0, len(texts), 64)]
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(embedder.embed_documents, batches))
    return len(texts) / (time.perf_counter() - t) if texts else 0.0


def embedder_now(name: str, texts: list[str]) -> float:
    """The embedder alone on ``texts`` on its ``parallel`` threads, measured now: this machine's
    speed drifts by 10% and more over the minutes a run takes, so an import or a first index is
    compared with the model measured right before and right after it (the mean of the two)."""
    from spellbook.config import Settings
    from spellbook.embedders.registry import load_embedder

    embedder = load_embedder(Settings(vault=Path(tempfile.gettempdir()) / "unused", embedder=name))
    embedder.warm_up()
    try:
        return embed_rate(embedder, texts, getattr(embedder, "parallel", 1))
    finally:
        embedder.close()


_EMBEDDER_RSS = """
import sys
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) // 1024
from spellbook.config import Settings
from spellbook.embedders.registry import load_embedder
before = rss()
e = load_embedder(Settings(vault='/tmp/unused', embedder=sys.argv[1])); e.warm_up()
e.embed_documents(['warm up the buffers of a first batch'] * 8)
print(f"{rss() - before} MB (model loaded and used, in a process that imported only the embedder)")
"""


def chunk_texts(notes: list[tuple[str, str]]) -> list[str]:
    """What the indexer embeds for these hand-written files (spellbook.index.analysis)."""
    from spellbook.index.analysis import analyse_note
    from spellbook.index.chunker import MAX_CHUNK_CHARS

    size = MAX_CHUNK_CHARS
    texts: list[str] = []
    for path, text in notes:
        texts += analyse_note(path, text, "v", 0, len(text), size, lambda *_: None).embed_texts
    return texts


# ============================================================================================
# Measuring helpers
# ============================================================================================
def by_lang(values: list[float], langs: list[str]) -> str:
    parts = []
    for lang in ("en", "ko", "ja"):
        mine = [v for v, lg in zip(values, langs) if lg == lang]
        if mine:
            parts.append(f"{lang} p50 {pct(mine, 50):.1f} ms (n={len(mine)})")
    return ", ".join(parts)


def pct(values: list[float], p: float) -> float:
    """Percentile with linear interpolation (p in 0..100)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def proc_status(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS (kB) of a process from /proc."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "Threads"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def source_stamp() -> tuple[float, str]:
    """Newest modification time among spellbook/*.py (the code may be edited while we run)."""
    newest, name = 0.0, ""
    for f in (REPO / "spellbook").rglob("*.py"):
        m = f.stat().st_mtime
        if m > newest:
            newest, name = m, str(f.relative_to(REPO))
    return newest, name


def compile_package() -> int:
    """Write the package's bytecode now, as an install does (``make install``, a wheel): a checkout
    being edited, or a shell with PYTHONDONTWRITEBYTECODE set (this machine's), would otherwise
    compile every changed module again at each process start the benchmark times. Returns the
    modules that needed it."""
    import compileall
    import importlib.util

    stale = sum(
        1
        for f in (REPO / "spellbook").rglob("*.py")
        if not Path(importlib.util.cache_from_source(str(f))).exists()
        or Path(importlib.util.cache_from_source(str(f))).stat().st_mtime < f.stat().st_mtime
    )
    compileall.compile_dir(str(REPO / "spellbook"), quiet=1)
    return stale


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class ServerLogs:
    """The server's stderr goes to files here (not the console); scanned for warnings and errors."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: list[Path] = []

    def new(self, name: str):
        path = self.folder / f"{name}.stderr.log"
        self.files.append(path)
        return path.open("w", encoding="utf-8")

    def problems(self) -> list[str]:
        found: list[str] = []
        for path in self.files:
            if not path.exists():
                continue
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback", line):
                    found.append(f"{path.name}: {line.strip()[:300]}")
        return found


def client_for(vault: Path, embedder: str, errlog) -> Client:
    params = StdioServerParameters(
        command=SPELLBOOK_BIN, args=["serve", "--vault", str(vault), "--embedder", embedder], env=dict(os.environ)
    )
    return Client(stdio_client(params, errlog=errlog))


async def wait_ready(client: Client, timeout: float = 600.0) -> dict[str, Any]:
    """Poll ``stats`` until the first reconcile is done; returns the last stats."""
    deadline = time.monotonic() + timeout
    while True:
        r = await client.call_tool("stats", {})
        if r.is_error:
            raise RuntimeError(f"stats failed: {r.content}")
        data = r.structured_content or {}
        if data.get("state") == "ready" or time.monotonic() > deadline:
            return data
        await anyio.sleep(0.05)


def _error_text(result: Any) -> str:
    try:
        return " ".join(getattr(c, "text", "") for c in result.content)[:300]
    except Exception:
        return repr(result)[:300]


# ============================================================================================
# Sections
# ============================================================================================
async def bench_startup(
    vault: Path, embedder: str, logs: ServerLogs, name: str, queries: list[str] | None = None
) -> dict[str, Any]:
    """Process start -> tools/list answer; then -> index ready; then client close (process exit).
    With ``queries``: the owner's memory after them (a restart on a populated vault)."""
    with logs.new(name) as errlog:
        t0 = time.perf_counter()
        async with client_for(vault, embedder, errlog) as client:
            tools = await client.list_tools(cache_mode="bypass")
            t_list = time.perf_counter() - t0
            await client.call_tool("stats", {})  # the first tool call waits for the MCP SDK's import
            t_call = time.perf_counter() - t0
            stats = await wait_ready(client)
            t_ready = time.perf_counter() - t0
            t1 = time.perf_counter()
            r = await client.call_tool("memorize", {"query": "deploy pipeline rollback", "limit": 5})
            first_query = time.perf_counter() - t1
            rss = None
            if queries:
                for q in queries:
                    await client.call_tool("memorize", {"query": q, "limit": 5})
                rss = proc_status(int(stats["owner_pid"]))
            t_close0 = time.perf_counter()
        t_close = time.perf_counter() - t_close0
    return {
        "tools_list_s": t_list,
        "first_call_s": t_call,
        "ready_s": t_ready,
        "close_s": t_close,
        "tools": len(tools.tools),
        "first_memorize_ms": first_query * 1000,
        "first_memorize_error": r.is_error,
        "notes": stats.get("notes"),
        "chunks": stats.get("chunks"),
        "embedder": stats.get("embedder"),
        "rss_after_queries": rss,
        "queries": len(queries or []),
    }


async def bench_session(
    vault: Path, embedder: str, notes: list[dict[str, Any]], queries: list[str], logs: ServerLogs
) -> dict[str, Any]:
    """One server: N scribes, then the queries per mode, then memory figures."""
    out: dict[str, Any] = {"scribe_errors": [], "memorize_errors": []}
    with logs.new("session") as errlog:
        t0 = time.perf_counter()
        async with client_for(vault, embedder, errlog) as client:
            await client.list_tools(cache_mode="bypass")
            stats = await wait_ready(client)
            out["ready_s"] = time.perf_counter() - t0
            pid = int(stats["owner_pid"])
            out["owner_pid"] = pid
            out["embedder"] = stats.get("embedder")
            out["rss_ready"] = proc_status(pid)
            log(
                f"server pid {pid} ready in {out['ready_s']:.2f} s ({stats.get('embedder')}); "
                f"RSS {out['rss_ready'].get('VmRSS', 0) / 1024:.0f} MB"
            )

            # --- scribe ---------------------------------------------------------------------
            lat: list[float] = []
            started = time.perf_counter()
            checks: list[float] = []
            for i, note in enumerate(notes, 1):
                r, took, check = await timed_call(client, "scribe", note)
                lat.append(took)
                checks.append(check)
                if r.is_error:
                    out["scribe_errors"].append(_error_text(r))
                if i % 200 == 0 or i == len(notes):
                    el = time.perf_counter() - started
                    log(f"scribe {i}/{len(notes)}: {i / el:.1f} notes/s, last-200 p50 {pct(lat[-200:], 50):.1f} ms")
            out["scribe_wall_s"] = time.perf_counter() - started
            out["scribe_lat_ms"] = lat
            out["scribe_check_ms"] = checks
            out["scribe_langs"] = [lang_of(n["text"]) for n in notes]
            out["rss_after_scribe"] = proc_status(pid)

            stats = (await client.call_tool("stats", {})).structured_content or {}
            out["stats_after_scribe"] = {k: stats.get(k) for k in ("notes", "chunks", "vectors", "problems_total")}

            # --- memorize -------------------------------------------------------------------
            variants: list[tuple[str, dict[str, Any]]] = [(m, {"mode": m}) for m in MODES]
            variants.append(("hybrid+filter", {"mode": "hybrid", "filter": {"category": "bench"}}))
            variants.append(("semantic+filter", {"mode": "semantic", "filter": {"category": "bench"}}))
            out["memorize"] = {}
            for label, extra in variants:
                for q in queries[:3]:  # warm-up, not timed
                    await client.call_tool("memorize", {"query": q, "limit": 5, **extra})
                lat, checks = [], []
                hits: list[int] = []
                for q in queries:
                    r, took, check = await timed_call(client, "memorize", {"query": q, "limit": 5, **extra})
                    lat.append(took)
                    checks.append(check)
                    if r.is_error:
                        out["memorize_errors"].append(f"{label}: {_error_text(r)}")
                    else:
                        res = (r.structured_content or {}).get("results", [])
                        hits.append(len(res))
                        if "filter" in extra and any(h.get("category") != "bench" for h in res):
                            out["memorize_errors"].append(f"{label}: a hit outside category bench for {q!r}")
                out["memorize"][label] = {
                    "lat": lat,
                    "hits": hits,
                    "langs": [lang_of(q) for q in queries],
                    "checks": checks,
                }
                log(
                    f"memorize {label:15s}: p50 {pct(lat, 50):6.1f} ms  p95 {pct(lat, 95):6.1f} ms  "
                    f"mean hits {statistics.fmean(hits) if hits else 0:.2f}"
                )
            # An agent's session mixes the two: each query right after a write (untimed) to another
            # note; those notes are erased after, so what follows sees the vault of ``notes``.
            later = TextGen(SEED + 1)
            lat, hits, extra = [], [], []
            for i, q in enumerate(queries):
                r = await client.call_tool("scribe", later.scribe_note(len(notes) + i))
                if r.is_error:
                    out["scribe_errors"].append(_error_text(r))
                else:
                    extra.append((r.structured_content or {})["id"])
                t = time.perf_counter()
                r = await client.call_tool("memorize", {"query": q, "limit": 5})
                lat.append((time.perf_counter() - t) * 1000)
                if r.is_error:
                    out["memorize_errors"].append(f"after a scribe: {_error_text(r)}")
                else:
                    hits.append(len((r.structured_content or {}).get("results", [])))
            out["memorize"]["hybrid, each after a scribe"] = {
                "lat": lat,
                "hits": hits,
                "langs": [lang_of(q) for q in queries],
            }
            log(f"memorize hybrid after a scribe: p50 {pct(lat, 50):6.1f} ms  p95 {pct(lat, 95):6.1f} ms")
            for note_id in extra:
                r = await client.call_tool("erase", {"id": note_id})
                if r.is_error:
                    out["scribe_errors"].append(f"erase: {_error_text(r)}")

            # --- memory ---------------------------------------------------------------------
            stats = (await client.call_tool("stats", {})).structured_content or {}
            out["stats_end"] = {k: stats.get(k) for k in ("notes", "chunks", "vectors", "problems_total", "owner_pid")}
            out["rss_end"] = proc_status(int(stats.get("owner_pid", pid)))
            # The owner closes an idle embedded Chroma 20 s after its last use (VectorIndex.rest).
            await anyio.sleep(REST_WAIT_S)
            out["rss_rested"] = proc_status(int(stats.get("owner_pid", pid)))
            t_close0 = time.perf_counter()
        out["close_s"] = time.perf_counter() - t_close0
    return out


def bench_cli_index(vault: Path, embedder: str, logs: ServerLogs, name: str) -> dict[str, Any]:
    """Run ``spellbook index`` as a subprocess; wall time, its own summary line and peak RSS."""
    err_path = logs.folder / f"{name}.stderr.log"
    logs.files.append(err_path)
    with err_path.open("wb") as err, open(os.devnull, "wb") as devnull:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [SPELLBOOK_BIN, "index", "--vault", str(vault), "--embedder", embedder],
            stdout=devnull,
            stderr=err,
            env=dict(os.environ),
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = err_path.read_text(encoding="utf-8", errors="replace")
    summary = ""
    for line in reversed(re.split(r"[\r\n]+", text)):
        if "notes," in line and "chunks indexed" in line:
            summary = line.strip()
            break
    m = re.search(r"(\d+) notes, (\d+) chunks", summary)
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "summary": summary,
        "maxrss_kb": usage.ru_maxrss,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "notes": int(m.group(1)) if m else None,
        "chunks": int(m.group(2)) if m else None,
        "stderr_tail": text[-600:] if proc.returncode else "",
    }


def bench_cli_import(vault: Path, export: Path, embedder: str, notes: int) -> dict[str, Any]:
    """Run ``spellbook import`` of ``export`` into ``vault`` as a subprocess: process start to exit."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        [SPELLBOOK_BIN, "import", "--vault", str(vault), str(export), "--embedder", embedder],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"spellbook import exited {os.waitstatus_to_exitcode(status)}")
    return {"wall_s": wall, "notes": notes, "load": os.getloadavg()[0], "cpu_s": usage.ru_utime + usage.ru_stime}


def file_making_ms(folder: Path, count: int = 300) -> float:
    """Milliseconds to make an empty file in a new folder under ``folder`` (kept: deleting them would
    slow the next ones). On this VM's ext4, which has no journal, the kernel skips the inodes freed in
    the last minute or more while it looks for a free one, so a file made soon after many were deleted
    nearby (a test run's clean-up) costs 0.3-0.6 ms of CPU instead of 0.02: 0.3-0.6 s of an import of
    1,000 notes. The bench prints it beside the imports so such a run shows for what it is."""
    place = Path(tempfile.mkdtemp(dir=folder, prefix="file-making-"))
    t = time.perf_counter()
    for i in range(count):
        os.close(os.open(place / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return (time.perf_counter() - t) / count * 1000


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far, its exited threads included, and those of
    the children it has reaped (the processes a first index or an import embeds in)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def bench_mcp_import(
    vault: Path, export: Path, embedder: str, notes: int, logs: ServerLogs, name: str
) -> dict[str, Any]:
    """The ``import`` tool of a server on a fresh vault, over MCP stdio: the call, timed from the
    request to the answer (the server started and ready before), and the server's CPU meanwhile."""
    with logs.new(name) as errlog:
        async with client_for(vault, embedder, errlog) as client:
            await client.list_tools(cache_mode="bypass")
            pid = int((await wait_ready(client))["owner_pid"])
            cpu = proc_cpu(pid)
            t = time.perf_counter()
            r = await client.call_tool("import", {"path": str(export)})
            wall = time.perf_counter() - t
            cpu = proc_cpu(pid) - cpu
    if r.is_error:
        raise SystemExit(f"the import tool failed: {_error_text(r)}")
    created = ((r.structured_content or {}).get("counts") or {}).get("created")
    if created != notes:
        raise SystemExit(f"the import tool created {created} of {notes} memories")
    return {"wall_s": wall, "notes": notes, "load": os.getloadavg()[0], "cpu_s": cpu}


def median_run(runs: list[dict[str, Any]], texts: int) -> dict[str, Any]:
    """The run whose share of the embedder alone (measured right before and after it) is the
    median, with every run's share beside it: one run of a few seconds moves with the machine."""
    shares = [texts / r["wall_s"] / (sum(r["alone_now"]) / 2) for r in runs]
    middle = sorted(range(len(runs)), key=shares.__getitem__)[len(runs) // 2]
    return {**runs[middle], "shares": shares}


# ============================================================================================
# Main
# ============================================================================================
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=1000, help="notes to scribe / hand-written files to index")
    ap.add_argument("--queries", type=int, default=200, help="memorize queries per mode")
    ap.add_argument("--embedder", default="use-m3", choices=["use-m3", "minilm", "ollama", "hashing"])
    ap.add_argument("--startup-runs", type=int, default=5, help="fresh-vault startups to time")
    ap.add_argument("--keep", action="store_true", help="keep the temporary vaults and server logs")
    ap.add_argument("--out", type=Path, help="summary file (default bench/results/core_<embedder>_<N>k.txt)")
    ap.add_argument("--skip-index", action="store_true", help="skip section 5 (hand-written vault)")
    ap.add_argument(
        "--batch-runs",
        type=int,
        default=0,
        help="imports and first indexes to run, the model measured between them (default 5 up to "
        "2,000 notes, else 1); the median run is reported",
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="spellbook-bench-"))
    logs = ServerLogs(tmp)
    log(
        f"bench_core: notes={args.notes} queries={args.queries} embedder={args.embedder}; "
        f"bin={SPELLBOOK_BIN}; work dir {tmp}"
    )
    gen = TextGen(SEED)
    notes = [gen.scribe_note(i) for i in range(args.notes)]
    queries = [gen.query() for _ in range(args.queries)]
    handwritten = [gen.handwritten_note(i) for i in range(args.notes)]
    res: dict[str, Any] = {
        "source_before": source_stamp(),
        "load_before": os.getloadavg(),
        "compiled": compile_package(),
    }
    time_client_checks()
    scribe_texts = [embed_text(n["title"], None, n["text"]) for n in notes]
    index_texts = chunk_texts(handwritten[:1000]) if not args.skip_index else []
    log("0. the embedder alone on the same texts (this process)")
    res["alone"] = embedder_alone(args.embedder, scribe_texts[:300], queries, index_texts, scribe_texts[:1000])
    res["alone"]["scribe_langs"] = [lang_of(t) for t in scribe_texts[:300]]
    res["alone"]["query_langs"] = [lang_of(q) for q in queries]
    log(
        f"   load {res['alone']['load_s']:.2f} s; a note p50 {pct(res['alone']['scribe_ms'], 50):.1f} ms; "
        f"a query p50 {pct(res['alone']['query_ms'], 50):.2f} ms; {res['alone']['index_texts_per_s']:.0f} texts/s"
    )
    try:
        res["sdk_ms"] = anyio.run(sdk_round_trip)
        log(f"   the MCP SDK's round trip for a tool that does nothing: p50 {pct(res['sdk_ms'], 50):.2f} ms")
    except Exception as exc:
        log(f"   the MCP SDK's round trip not measured: {type(exc).__name__}: {exc}")
    try:
        # 1. startup on fresh vaults (the folder does not exist yet: serve creates it from the template)
        runs = []
        for stale in Path(cache_dir()).glob("mcp-front-*.json"):
            stale.unlink()  # the first start is the first of an install: no handshake cache yet
        for i in range(args.startup_runs):
            vault = tmp / f"fresh{i}" / "vault"
            vault.parent.mkdir()
            r = anyio.run(bench_startup, vault, args.embedder, logs, f"startup{i}")
            runs.append(r)
            log(
                f"startup {i + 1}/{args.startup_runs}: tools/list {r['tools_list_s']:.2f} s, "
                f"first tool call {r['first_call_s']:.2f} s, ready {r['ready_s']:.2f} s, "
                f"close {r['close_s']:.2f} s ({r['tools']} tools)"
            )
            shutil.rmtree(vault.parent, ignore_errors=True)
        res["startup"] = runs

        # 2-4. scribe, memorize, memory in one session
        vault = tmp / "scribed" / "vault"
        vault.parent.mkdir()
        res["session"] = anyio.run(bench_session, vault, args.embedder, notes, queries, logs)

        # 1b. restart on the now-populated vault
        r = anyio.run(bench_startup, vault, args.embedder, logs, "restart", queries)
        res["restart"] = r
        log(
            f"restart with {r['notes']} notes: tools/list {r['tools_list_s']:.2f} s, ready {r['ready_s']:.2f} s, "
            f"first memorize {r['first_memorize_ms']:.0f} ms"
        )

        # 6. export the scribed notes, import them into a fresh vault
        export = tmp / "export.json"
        subprocess.run(
            [SPELLBOOK_BIN, "export", "--vault", str(vault), "--out", str(export), "--embedder", args.embedder],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        runs = args.batch_runs or (5 if args.notes <= 2000 else 1)  # a run's share moves by 3-4 points
        import_texts = scribe_texts[:1000]
        alone = [embedder_now(args.embedder, import_texts)]
        res["file_making_ms"] = [file_making_ms(tmp)]
        imports = []
        for k in range(runs):
            fresh = tmp / f"imported{k}" / "vault"
            fresh.mkdir(parents=True)
            imports.append(bench_cli_import(fresh, export, args.embedder, len(notes)))
            alone.append(embedder_now(args.embedder, import_texts))
            imports[-1]["alone_now"] = (alone[-2], alone[-1])
            log(f"import {k + 1}/{runs} of {len(notes)} notes: {imports[-1]['wall_s']:.1f} s")
            # Kept until the end: on ext4, files made right after thousands were deleted take a
            # slow path for their inodes (measured: mkstemp 0.5 ms a file after a 10k rmtree), which
            # would load the next import with the cost of this one's clean-up.
        res["import"] = median_run(imports, len(notes))
        res["file_making_ms"].append(file_making_ms(tmp))
        imports = []
        for k in range(runs):
            fresh = tmp / f"mcp-imported{k}" / "vault"
            fresh.parent.mkdir(parents=True)
            imports.append(anyio.run(bench_mcp_import, fresh, export, args.embedder, len(notes), logs, f"import{k}"))
            alone.append(embedder_now(args.embedder, import_texts))
            imports[-1]["alone_now"] = (alone[-2], alone[-1])
            log(f"import tool {k + 1}/{runs} of {len(notes)} notes: {imports[-1]['wall_s']:.1f} s")
        res["import_mcp"] = median_run(imports, len(notes))

        # 5. first index of a hand-written vault, then the no-op reconcile
        if not args.skip_index:
            hv = tmp / "handwritten"
            t = time.perf_counter()
            total_bytes = 0
            for path, text in handwritten:
                f = hv / path
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(text, encoding="utf-8")
                total_bytes += len(text.encode())
            log(
                f"wrote {len(handwritten)} hand-written files ({total_bytes / 1e6:.1f} MB) in "
                f"{time.perf_counter() - t:.1f} s"
            )
            res["hand_bytes"] = total_bytes
            alone = [embedder_now(args.embedder, index_texts)]
            firsts = []
            for k in range(runs):
                shutil.rmtree(hv / INDEX_DIRNAME, ignore_errors=True)  # each run a first index
                firsts.append(bench_cli_index(hv, args.embedder, logs, f"index1-{k + 1}"))
                alone.append(embedder_now(args.embedder, index_texts))
                firsts[-1]["alone_now"] = (alone[-2], alone[-1])
                log(f"index (first) {k + 1}/{runs}: {firsts[-1]['wall_s']:.1f} s  {firsts[-1]['summary']}")
            res["index1"] = median_run(firsts, firsts[-1]["chunks"] or 0)
            res["index2"] = bench_cli_index(hv, args.embedder, logs, "index2")
            log(f"index (no-op): {res['index2']['wall_s']:.2f} s  {res['index2']['summary']}")

        res["source_after"] = source_stamp()
        summary = render_summary(args, res, logs)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(summary, flush=True)
    size = f"{args.notes // 1000}k" if args.notes >= 1000 and args.notes % 1000 == 0 else str(args.notes)
    out = args.out or RESULTS_DIR / f"core_{args.embedder}_{size}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(summary + "\n", encoding="utf-8")
    print(f"\n(written to {out})")
    return 0


def _version() -> str:
    try:
        from spellbook import __version__

        return __version__
    except Exception:
        return "?"


def render_summary(args: argparse.Namespace, res: dict[str, Any], logs: ServerLogs) -> str:
    L: list[str] = []
    add = L.append
    ms = "ms"
    add("=" * 78)
    add(f"Spellbook core benchmark  embedder={args.embedder}  notes={args.notes}  queries={args.queries}")
    add(
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}  {platform.platform()}  "
        f"python {platform.python_version()}  cpus={os.cpu_count()}  "
        f"load(1m) at start {res['load_before'][0]:.2f}, at end {os.getloadavg()[0]:.2f}"
    )
    src_t, src_f = res["source_before"]
    add(
        f"spellbook {_version()} source as of {datetime.fromtimestamp(src_t, UTC):%H:%M:%S UTC} ({src_f}); "
        f"bytecode written before the runs, as an install leaves it ({res.get('compiled', 0)} module(s) were stale)"
    )
    if res.get("source_after", res["source_before"])[0] != src_t:
        t2, f2 = res["source_after"]
        add(
            f"!! spellbook/ changed during the run ({f2} at {datetime.fromtimestamp(t2, UTC):%H:%M:%S UTC}): "
            "sections run after that use newer code"
        )
    add(
        "Targets (issue 15): scribe p50 < 25 ms @10k; memorize p50 < 12 ms @1k, < 20 ms @10k; startup to "
        "tools/list < 1.0 s; RSS < 250 MB @10k; import and first index >= 80% of the embedder's texts/s"
    )
    add("=" * 78)
    a = res.get("alone")
    if a:
        add(
            f"0. The embedder alone ({args.embedder}, this process, same threads): load {a['load_s']:.2f} s; "
            f"resident {a['rss']}"
        )
        add(f"   a note {by_lang(a['scribe_ms'], a['scribe_langs'])}")
        add(f"   a query {by_lang(a['query_ms'], a['query_langs'])}")
        hand = f"{a['index_texts_per_s']:.0f} texts/s (hand-written sections), " if a["index_texts_per_s"] else ""
        add(f"   batches of 64: {hand}{a['import_texts_per_s']:.0f} texts/s (the scribed notes)")
        if a.get("import_texts_per_s_par"):
            both = f"{a['index_texts_per_s_par']:.0f} and " if a.get("index_texts_per_s_par") else ""
            add(
                f"   the same on {a['parallel']} threads at once: {both}{a['import_texts_per_s_par']:.0f} texts/s "
                "(the server embeds a first index or an import so)"
            )
    if res.get("sdk_ms"):
        add(
            f"   the MCP SDK alone (its stdio server, a tool that does nothing, this client): p50 "
            f"{pct(res['sdk_ms'], 50):.2f} ms a call, in every figure over MCP below"
        )

    runs = res.get("startup", [])
    if runs:
        tl = [r["tools_list_s"] for r in runs[1:]] or [runs[0]["tools_list_s"]]
        rd = [r["ready_s"] for r in runs]
        fc = [r["first_call_s"] for r in runs[1:]] or [runs[0]["first_call_s"]]
        add(f"1. Startup, fresh vault ({len(runs)} runs; process start -> answer)")
        add(
            f"   tools/list           min {min(tl):.2f} s   median {statistics.median(tl):.2f} s   "
            f"max {max(tl):.2f} s   (target < {TARGETS['startup_s']} s; runs 2-{len(runs)}, answered from the "
            "handshake cache)"
        )
        add(f"   tools/list, first start of an install (no handshake cache) {runs[0]['tools_list_s']:.2f} s")
        add(
            f"   first tool call      min {min(fc):.2f} s   median {statistics.median(fc):.2f} s   "
            "(waits for the MCP SDK's import; the first start: "
            f"{runs[0]['first_call_s']:.2f} s)"
        )
        add(
            f"   index ready (stats)  min {min(rd):.2f} s   median {statistics.median(rd):.2f} s   "
            f"(model loaded + template notes indexed)"
        )
        if a:
            add(f"   (the model loads after tools/list, in the background: {a['load_s']:.2f} s alone)")
        add(f"   first memorize after ready  median {statistics.median(r['first_memorize_ms'] for r in runs):.0f} ms")
        add(f"   shutdown (stdin closed -> exit) median {statistics.median(r['close_s'] for r in runs):.2f} s")
    r = res.get("restart")
    if r:
        add(
            f"   restart, existing vault of {r['notes']} notes / {r['chunks']} chunks: tools/list "
            f"{r['tools_list_s']:.2f} s, ready {r['ready_s']:.2f} s, first memorize {r['first_memorize_ms']:.0f} {ms}"
        )
        if r.get("rss_after_queries"):
            add(
                f"   the restarted owner after {r['queries']} memorize: VmRSS "
                f"{r['rss_after_queries'].get('VmRSS', 0) / 1024:.0f} MB"
            )

    s = res.get("session")
    if s:
        lat = s["scribe_lat_ms"]
        n = len(lat)
        add(f"2. scribe over MCP stdio ({n} notes, sequential; serve defaults, vault watcher on)")
        add(f"   throughput {n / s['scribe_wall_s']:.1f} notes/s ({s['scribe_wall_s']:.1f} s total)")
        add(
            f"   latency p50 {pct(lat, 50):.1f} {ms}   p95 {pct(lat, 95):.1f} {ms}   p99 {pct(lat, 99):.1f} {ms}   "
            f"max {max(lat):.0f} {ms}"
        )
        if a:
            add(f"   by language: {by_lang(lat, s['scribe_langs'])}")
            own = pct(a["scribe_ms"], 50)
            part = pct(lat, 50) - own
            sdk = f" ({part - pct(res['sdk_ms'], 50):.1f} less the SDK's round trip)" if res.get("sdk_ms") else ""
            add(f"   the embedder alone on these notes: p50 {own:.1f} ms -> Spellbook's part {part:.1f} ms{sdk}")
        if s.get("scribe_check_ms"):
            add(f"   {client_check_line(s['scribe_check_ms'])}")
        first, last = lat[: max(1, n // 10)], lat[-max(1, n // 10) :]
        add(f"   first 10% p50 {pct(first, 50):.1f} {ms} vs last 10% p50 {pct(last, 50):.1f} {ms}")
        add(f"   errors {len(s['scribe_errors'])}; index after: {s['stats_after_scribe']}")
        add(f"3. memorize at {s['stats_after_scribe'].get('notes')} notes ({args.queries} queries each, limit 5)")
        for label, m in s["memorize"].items():
            hits = m["hits"]
            if label == "hybrid, each after a scribe":
                add("   hybrid, each query right after a scribe to another note (untimed; erased after):")
                label = ""
            add(
                f"   {label:16s} p50 {pct(m['lat'], 50):6.1f} {ms}   p95 {pct(m['lat'], 95):6.1f} {ms}   "
                f"max {max(m['lat']):6.0f} {ms}   mean hits {statistics.fmean(hits) if hits else 0:.2f}"
            )
            if label == "hybrid" and a:
                add(f"   {'':16s} by language: {by_lang(m['lat'], m['langs'])}")
        if a:
            add(
                f"   the embedder alone on these queries: p50 {pct(a['query_ms'], 50):.2f} ms "
                "(keyword mode embeds nothing)"
            )
        if res.get("sdk_ms"):
            add(f"   the MCP SDK's round trip alone: p50 {pct(res['sdk_ms'], 50):.2f} ms (in each figure above)")
        hybrid = s["memorize"].get("hybrid", {})
        if hybrid.get("checks"):
            add(f"   {client_check_line(hybrid['checks'])}, hybrid")
        add("   (filter = {'category': 'bench'}, ~half the notes)")
        add(f"   errors {len(s['memorize_errors'])}")
        add(f"4. Server process memory (pid {s['owner_pid']}, /proc/<pid>/status)")
        for label, key in (
            ("after ready", "rss_ready"),
            ("after scribes", "rss_after_scribe"),
            ("at end", "rss_end"),
            (f"{REST_WAIT_S} s later", "rss_rested"),
        ):
            st = s[key]
            add(
                f"   {label:14s} VmRSS {st.get('VmRSS', 0) / 1024:6.0f} MB   VmHWM {st.get('VmHWM', 0) / 1024:6.0f} MB"
                f"   threads {st.get('Threads', '?')}"
            )
        if a:
            add(f"   of which the embedder: {a['rss']}")

    i1, i2 = res.get("index1"), res.get("index2")
    if i1:
        rate = (i1["notes"] or args.notes) / i1["wall_s"]
        add(
            f"5. `spellbook index` of a hand-written vault ({args.notes} files, 2-4 ## sections, "
            f"{res.get('hand_bytes', 0) / 1e6:.1f} MB)"
        )
        add(
            f"   first index  {i1['wall_s']:6.1f} s  {rate:6.1f} notes/s  cpu {i1['user_s'] + i1['sys_s']:.1f} s  "
            f"peak RSS {i1['maxrss_kb'] / 1024:.0f} MB  rc {i1['rc']}"
        )
        if a and i1["chunks"]:
            chunks_s = i1["chunks"] / i1["wall_s"]
            add(
                f"                {chunks_s:.0f} sections/s against the embedder alone on the same kind of sections: "
                + against(chunks_s, a, "index_texts_per_s")
            )
            add("                " + against_now(chunks_s, i1))
            if runs_line(i1):
                add("                " + runs_line(i1))
        add(f"                -> {i1['summary']}")
    if i2:
        add(
            f"   no-op rerun  {i2['wall_s']:6.2f} s  cpu {i2['user_s'] + i2['sys_s']:.1f} s  "
            f"peak RSS {i2['maxrss_kb'] / 1024:.0f} MB  rc {i2['rc']}"
        )
        add(f"                -> {i2['summary']}")
        for r in (i1, i2):
            if r and r["rc"]:
                add(f"   stderr tail: {r['stderr_tail']!r}")

    imp = res.get("import")
    if imp:
        rate = imp["notes"] / imp["wall_s"]
        add(
            f"6. `spellbook import` of the {imp['notes']} scribed notes into a fresh vault (process start to exit): "
            f"{imp['wall_s']:.1f} s, {rate:.1f} notes/s, cpu {imp['cpu_s']:.1f} s with the processes it embedded in "
            f"(load {imp['load']:.2f})"
        )
        if a:
            add(f"   the embedder alone on those texts: {against(rate, a, 'import_texts_per_s')}")
            add("   " + against_now(rate, imp))
            if runs_line(imp):
                add("   " + runs_line(imp))
            mean = sum(imp["alone_now"]) / 2
            with_load = imp["notes"] / (a["load_s"] + imp["notes"] / mean)
            add(
                f"   (this wall time holds the model's own load too, {a['load_s']:.2f} s in step 0; the embedder alone "
                f"with its load, {with_load:.0f} texts/s -> {rate / with_load:.0%})"
            )
            own = imp["notes"] / a["import_texts_per_s"]  # the model's own CPU seconds for these texts
            add(
                f"   CPU: the model's own {own:.1f} s of {imp['cpu_s']:.1f} s ({own / imp['cpu_s']:.0%}); the rest, "
                f"{(imp['cpu_s'] - own) / imp['notes'] * 1000:.1f} ms a note, "
                "is Spellbook's (start-up, files, catalog, Chroma)"
            )
        if res.get("file_making_ms"):
            before, *after = res["file_making_ms"]
            add(
                f"   making an empty file in the bench's folder: {before:.3f} ms before these imports"
                + (f", {after[0]:.3f} ms after" if after else "")
                + " (0.02 ms here normally; 0.3-0.6 ms within minutes "
                "of many deletes nearby, as this VM's ext4 has no journal: "
                "then the imports pay ~0.3-0.6 s of CPU a 1,000 notes)"
            )

    imp = res.get("import_mcp")
    if imp:
        rate = imp["notes"] / imp["wall_s"]
        add(
            f"6b. the `import` tool of a running server over MCP stdio, the same file into a fresh vault (the call): "
            f"{imp['wall_s']:.1f} s, {rate:.1f} notes/s, "
            f"server cpu {imp['cpu_s']:.1f} s with the processes it embedded "
            f"in (load {imp['load']:.2f})"
        )
        if a:
            add(f"   the embedder alone on those texts: {against(rate, a, 'import_texts_per_s')}")
            add("   " + against_now(rate, imp))
            if runs_line(imp):
                add("   " + runs_line(imp))
            own = imp["notes"] / a["import_texts_per_s"]
            add(
                f"   CPU: the model's own {own:.1f} s of {imp['cpu_s']:.1f} s ({own / imp['cpu_s']:.0%}); the rest, "
                f"{(imp['cpu_s'] - own) / imp['notes'] * 1000:.1f} ms a note, "
                "is Spellbook's (files, catalog, Chroma, watcher)"
            )

    odd: list[str] = []
    if s:
        odd += [f"scribe error: {e}" for e in s["scribe_errors"][:5]]
        odd += [f"memorize error: {e}" for e in s["memorize_errors"][:5]]
    odd += logs.problems()[:15]
    add("Server/CLI warnings and errors:" if odd else "Server/CLI warnings and errors: none")
    for line in odd:
        add(f"   {line}")
    add("=" * 78)
    return "\n".join(L)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
