"""Which keyword tokenisation for Korean (and English)? Plain BM25 (k1 1.2, b 0.75) over the eval
sets with several tokenisers; prints hit@1/5/10 and MRR@10 per tokeniser.

    .venv/bin/python bench/tokenizer_compare.py
"""

from __future__ import annotations

import gzip
import json
import math
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from spellbook.index.keyword import STOPWORDS, tokenize

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def ngrams(n: int, with_unigrams: bool = False):
    def fn(text: str) -> list[str]:
        out: list[str] = []
        for word in words(text):
            if word.isascii():
                out.append(word)
                continue
            if with_unigrams:
                out.extend(word)
            out.extend(word[i : i + n] for i in range(max(1, len(word) - n + 1)))
        return out
    return fn


TOKENIZERS = {
    "whitespace words (what peers use)": words,
    "Spellbook tokenize() (uni+bigrams, stems)": tokenize,
    "char bigrams": ngrams(2),
    "char trigrams (FTS5 trigram-like)": ngrams(3),
    "unigrams + bigrams": ngrams(2, with_unigrams=True),
}


class BM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.lengths = [len(d) for d in docs]
        self.avg = sum(self.lengths) / len(docs)
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                self.postings[term].append((i, tf))
        self.n = len(docs)

    def search(self, query: list[str], k: int = 10) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for term in set(query):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (self.n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, tf in posting:
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                scores[i] += idf * tf * (self.k1 + 1) / norm
        return sorted(scores, key=lambda i: -scores[i])[:k]


def main() -> None:
    for name in ("dev_ko", "dev_en"):
        notes, queries = [], []
        with gzip.open(EVAL / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                (notes if rec["kind"] == "note" else queries).append(rec)
        print(f"\n== {name}: {len(notes)} notes, {len(queries)} queries (plain BM25, body only)")
        print(f"{'tokeniser':<36} hit@1  hit@5 hit@10 MRR@10  index s")
        for label, fn in TOKENIZERS.items():
            started = time.perf_counter()
            index = BM25([fn(n["text"]) for n in notes])
            built = time.perf_counter() - started
            h1 = h5 = h10 = mrr = 0.0
            for q in queries:
                terms = [t for t in fn(q["q"]) if t not in STOPWORDS]
                ranked = [notes[i]["id"] for i in index.search(terms)]
                for rank, nid in enumerate(ranked, 1):
                    if nid in q["relevant"]:
                        h1 += rank == 1
                        h5 += rank <= 5
                        h10 += 1
                        mrr += 1 / rank
                        break
            n = len(queries)
            print(f"{label:<36} {h1 / n:.3f}  {h5 / n:.3f}  {h10 / n:.3f}  {mrr / n:.3f}  {built:6.2f}")


if __name__ == "__main__":
    main()
