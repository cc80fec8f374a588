"""Filtered search: the in-memory vector matrix, the filter cache, and what an English-only
embedder does with Korean. Real Chroma (embedded) and the real catalog in temp vaults."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from spellbook.config import Settings
from spellbook.engine import Engine
from spellbook.index.matrix import GROWS_IN_PLACE, VectorMatrix, zero_rows
from tests.helpers.engine import open_engine


def _brute_force(vectors: dict[str, np.ndarray], q: np.ndarray, ids: list[str], limit: int) -> list[str]:
    q = q / np.linalg.norm(q)
    scores = {i: float(vectors[i] @ q / np.linalg.norm(vectors[i])) for i in ids}
    return sorted(scores, key=lambda i: (-scores[i], i))[:limit]


@pytest.mark.parametrize("share", [0.05, 0.6])  # both code paths: gather rows, or score all and pick
def test_matrix_query_is_exact_and_follows_puts_and_removes(share: float) -> None:
    rng = np.random.default_rng(3)
    vectors = {f"c{i}": rng.normal(size=16).astype(np.float32) for i in range(400)}
    matrix = VectorMatrix()
    matrix.put(list(vectors), list(vectors.values()))
    allowed = [f"c{i}" for i in range(0, 400, int(1 / share))]
    q = rng.normal(size=16).astype(np.float32)
    got = matrix.query(q, 10, tuple(allowed))
    assert [cid for cid, _ in got] == _brute_force(vectors, q, allowed, 10)
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(got))

    matrix.remove(allowed[:5])  # removed rows never come back, and their slots are reused
    new = {f"n{i}": rng.normal(size=16).astype(np.float32) for i in range(5)}
    matrix.put(list(new), list(new.values()))
    assert len(matrix) == 400
    vectors.update(new)
    for cid in allowed[:5]:
        del vectors[cid]
    still = allowed[5:] + list(new)
    got = matrix.query(q, 10, tuple(still))
    assert [cid for cid, _ in got] == _brute_force(vectors, q, still, 10)
    assert not {cid for cid, _ in matrix.query(q, 400, tuple(allowed[:5]))}

    vectors["c1"] = -q  # an update in place moves the row to the bottom
    matrix.put(["c1"], [vectors["c1"]])
    everyone = tuple(dict.fromkeys([*still, "c1"]))
    assert matrix.query(q, len(everyone), everyone)[-1][0] == "c1"


def test_a_growing_matrix_keeps_every_row_in_place_or_copied() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(3000, 8)).astype(np.float32)
    matrix = VectorMatrix()
    for i, vector in enumerate(vectors):  # grows from 1,024 rows by an eighth at a time
        matrix.put([f"c{i}"], [vector])
        if i == 2000:
            held = matrix._data[:10]  # a view into the rows: the next growth must copy, not move them
    assert held.shape == (10, 8)
    got = matrix.get([f"c{i}" for i in range(3000)])
    want = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.allclose([got[f"c{i}"] for i in range(3000)], want, atol=1e-6)
    assert np.allclose(held, want[:10], atol=1e-6)
    matrix.reserve(5000, 8)
    assert matrix.shape() == (3000, 8) and len(matrix._data) == 5000
    assert matrix.query_all(vectors[1234], 1)[0][0] == "c1234"
    assert not zero_rows(4, 3).any() and zero_rows(0, 3).shape == (0, 3)


@pytest.mark.skipif(not GROWS_IN_PLACE, reason="mremap is Linux's")
def test_a_growing_matrix_never_holds_its_rows_twice() -> None:
    """The server's peak memory: growing by a copy held the old rows and the new array at once
    (17 MB over the resident size at 10k vectors of 512 dimensions)."""
    script = textwrap.dedent("""
        import numpy as np
        from spellbook.index.matrix import VectorMatrix
        def status(key):
            return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(key)) // 1024
        matrix, rng = VectorMatrix(), np.random.default_rng(0)
        vectors = np.concatenate([rng.normal(size=(500, 512)).astype(np.float32) for _ in range(21)])
        before = status('VmHWM')
        for i, vector in enumerate(vectors):
            matrix.put([f'c{i}'], [vector])
        print(status('VmHWM') - max(before, status('VmRSS')))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert int(out) <= 2, f"the peak went {out.strip()} MB over the resident size while the matrix grew"


def test_filtered_semantic_search_matches_the_unfiltered_ranking(engine: Engine) -> None:
    for i in range(30):
        engine.scribe(
            f"Note {i} about harbour cranes and cargo number {i}.",
            title=f"N{i}",
            category="even" if i % 2 == 0 else "odd",
        )
    everything = engine.memorize("harbour cranes cargo", limit=30, mode="semantic")["results"]
    filtered = engine.memorize("harbour cranes cargo", limit=15, mode="semantic", filter={"category": "even"})[
        "results"
    ]
    expected = [h for h in everything if h["category"] == "even"]
    assert {h["id"] for h in filtered} == {h["id"] for h in expected}
    # the same similarities in the same order (notes that tie may swap places)
    assert [h["similarity"] for h in filtered] == pytest.approx([h["similarity"] for h in expected], abs=2e-4)


def test_a_repeated_filter_sees_every_write_in_between(engine: Engine, vault: Path) -> None:
    spec = {"category": "ops"}
    engine.scribe("Deploys run through ArgoCD.", title="Deploy", category="ops")
    first = engine.memorize("deploy", filter=spec, mode="semantic")["results"]
    assert len(first) == 1
    added = engine.scribe("Rollbacks use argocd app rollback.", title="Rollback", category="ops")
    assert {h["id"] for h in engine.memorize("deploy", filter=spec, mode="semantic")["results"]} >= {added["id"]}
    engine.revise(added["id"], category="archive")  # moved out of the filter
    assert added["id"] not in {h["id"] for h in engine.memorize("deploy", filter=spec, mode="semantic")["results"]}
    (vault / "ops" / "Hand.md").write_text("---\ncategory: ops\n---\nHand-written deploy checklist.\n")
    engine.reconcile()
    assert "ops/Hand.md" in {
        h["path"] for h in engine.memorize("deploy checklist", filter=spec, mode="semantic")["results"]
    }
    engine.erase(first[0]["id"])
    assert first[0]["id"] not in {h["id"] for h in engine.memorize("deploy", filter=spec, mode="semantic")["results"]}


def test_rebuild_clears_the_matrix(engine: Engine) -> None:
    out = engine.scribe("Lighthouse keepers log the weather.", title="Lighthouse", category="sea")
    assert engine.memorize("lighthouse", filter={"category": "sea"}, mode="semantic")["results"]
    engine.rebuild_index()
    hits = engine.memorize("lighthouse", filter={"category": "sea"}, mode="semantic")["results"]
    assert [h["id"] for h in hits] == [out["id"]]
    assert len(engine.vectors.matrix()) == engine.vectors.count()


def test_english_only_embedder_ranks_korean_queries_by_keywords_and_says_so(vault: Path) -> None:
    settings = Settings(vault=vault, embedder="minilm", watch=False)
    engine = open_engine(settings, embedder=_minilm())
    try:
        target = engine.scribe(
            "배포는 ArgoCD 로 동기화한다. 롤백은 이전 리비전으로 한다.", title="배포 절차", category="ops"
        )
        for i in range(5):
            engine.scribe(f"회의록 {i}: 점심 메뉴와 휴가 일정을 정했다.", title=f"회의 {i}", category="misc")
        korean = engine.memorize("배포 롤백 방법")
        assert korean["results"][0]["id"] == target["id"]
        assert "only understands English" in korean["note"] and "use-m3" in korean["note"]
        assert "similarity" not in korean["results"][0]  # ranked by keywords alone
        english = engine.memorize("ArgoCD rollback")
        assert "note" not in english
        warnings = engine.stats()["setup_warnings"]
        assert len(warnings) == 1 and "SPELLBOOK_EMBEDDER=use-m3" in warnings[0]
    finally:
        engine.close()


def test_no_language_warning_for_a_multilingual_embedder(engine: Engine) -> None:
    engine.scribe("배포는 ArgoCD 로 동기화한다.", title="배포", category="ops")
    assert engine.stats()["setup_warnings"] == []
    assert "note" not in engine.memorize("배포")


def _minilm():
    from spellbook.embedders.registry import load_embedder

    return load_embedder(Settings(embedder="minilm"))


def test_kept_filter_answers_equal_fresh_ones_after_any_writes(engine: Engine, vault: Path) -> None:
    import random

    from spellbook.index.filter_model import Filter
    from spellbook.index.filters import to_sql

    rng = random.Random(5)
    filters = [
        to_sql(Filter(**f)) for f in ({"category": "a"}, {"tags_any": ["x"]}, {"category": "b", "importance": 3})
    ]
    ids: list[str] = []

    def check() -> None:
        kept = [set(engine.catalog.filtered_chunk_ids(w, p)) for w, p in filters]
        engine.catalog._filters.clear()
        assert kept == [set(engine.catalog.filtered_chunk_ids(w, p)) for w, p in filters]

    for step in range(60):
        action = rng.choice(["scribe", "scribe", "revise", "erase", "hand"])
        if action == "scribe" or not ids:
            out = engine.scribe(
                f"Note {step} about otters.\n\n## More\n\nSection {step}.",
                title=f"T{step}",
                category=rng.choice("ab"),
                tags=[rng.choice("xyz")],
                importance=rng.randint(1, 5),
            )
            ids.append(out["id"])
        elif action == "revise":
            engine.revise(
                rng.choice(ids), category=rng.choice("ab"), tags=[rng.choice("xyz")], importance=rng.randint(1, 5)
            )
        elif action == "erase":
            engine.erase(ids.pop(rng.randrange(len(ids))))
        else:
            (vault / f"hand{step}.md").write_text(f"---\ncategory: {rng.choice('ab')}\ntags: [x]\n---\nHand {step}.\n")
            engine.indexer.sync_path(f"hand{step}.md")
        if step % 5 == 0:
            check()
    check()


def test_keyword_search_with_a_narrow_filter_finds_every_match(engine: Engine, vault: Path) -> None:
    """Most matches fail the filter: the keyword side looks deeper, then ranks in SQL."""
    for i in range(700):
        category = "rare" if i % 70 == 0 else "common"
        folder = vault / category
        folder.mkdir(exist_ok=True)
        (folder / f"n{i}.md").write_text(f"---\ncategory: {category}\n---\nOtters float on kelp, note {i}.\n")
    engine.reconcile()
    rare = engine.memorize("otters kelp", mode="keyword", limit=20, filter={"category": "rare"})["results"]
    assert sorted(h["path"] for h in rare) == sorted(f"rare/n{i}.md" for i in range(0, 700, 70))
    assert len(engine.memorize("otters kelp", mode="keyword", limit=50)["results"]) == 50
