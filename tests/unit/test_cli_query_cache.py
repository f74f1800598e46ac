"""A query whose vector is known never loads the model: the query cache and the lazy model."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.embedding import (
    CachedEmbedder,
    FakeEmbedder,
    FloatArray,
    LazyEmbedder,
    MiniLMEmbedder,
    ProgressFn,
    VectorCache,
    build_embedder,
    query_key,
)


class Counting:
    """A fake that records each query it embeds."""

    def __init__(self, name: str = "fake-hash-16", dimension: int = 16) -> None:
        self._fake = FakeEmbedder(dimension)
        self.name, self.dimension = name, dimension
        self.queries: list[str] = []

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        return self._fake.embed_documents(texts, on_progress=on_progress)

    def embed_query(self, text: str) -> FloatArray:
        self.queries.append(text)
        return self._fake.embed_query(text)


def test_a_query_known_to_the_cache_file_is_not_embedded_again(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    first = Counting()
    want = CachedEmbedder(first, VectorCache(path)).embed_query("deploy checklist")
    later = Counting()  # a new process: nothing in memory
    got = CachedEmbedder(later, VectorCache(path)).embed_query("  deploy \t checklist\n")
    assert later.queries == []
    assert np.array_equal(got, want)
    assert np.array_equal(want, FakeEmbedder(16).embed_query("deploy checklist"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_query_vectors_are_kept_per_model(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    CachedEmbedder(Counting("model-a"), VectorCache(path)).embed_query("q")
    other = Counting("model-b")
    CachedEmbedder(other, VectorCache(path)).embed_query("q")
    assert other.queries == ["q"]


def test_query_vectors_do_not_answer_for_documents(tmp_path: Path) -> None:
    inner = Counting()
    emb = CachedEmbedder(inner, VectorCache(tmp_path / "v.sqlite"))
    emb.embed_query("same text")
    assert emb.cache.get_many(inner.name, ["same text"]) == [None]


def test_the_query_cache_keeps_only_the_most_recent_rows(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    emb = CachedEmbedder(Counting(), cache, query_cache_size=1, query_rows=3)
    for q in ("q1", "q2", "q3", "q4", "q5"):
        emb.embed_query(q)
    rows = cache._conn.execute("SELECT count(*) FROM query_vectors").fetchone()[0]
    assert rows == 3
    again = Counting()
    fresh = CachedEmbedder(again, VectorCache(tmp_path / "v.sqlite"), query_rows=3)
    for q in ("q5", "q4", "q3", "q1"):
        fresh.embed_query(q)
    assert again.queries == ["q1"]  # q1 and q2 were dropped; q3-q5 kept


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["deploy", "Check", "list", "ünïcode", "42"]), min_size=1, max_size=5),
    st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\r\n", " \r\t"]), min_size=6, max_size=6),
)
def test_texts_with_one_key_get_one_vector_from_the_fake(words: list[str], gaps: list[str]) -> None:
    # Any whitespace between, before and after the words: the same key, the same vector.
    spaced = gaps[0] + "".join(w + gaps[i + 1] for i, w in enumerate(words))
    assert query_key(spaced) == " ".join(words)
    fake = FakeEmbedder(32)
    assert np.array_equal(fake.embed_query(spaced), fake.embed_query(" ".join(words)))


def test_the_lazy_model_is_built_on_the_first_miss_only(tmp_path: Path) -> None:
    built: list[Counting] = []

    def build() -> Counting:
        built.append(Counting())
        return built[-1]

    lazy = LazyEmbedder(build, "fake-hash-16", 16)
    emb = CachedEmbedder(lazy, VectorCache(tmp_path / "v.sqlite"))
    assert (emb.name, emb.dimension, lazy.loaded) == ("fake-hash-16", 16, False)
    CachedEmbedder(Counting(), emb.cache).embed_query("known")
    emb.embed_query("known")
    assert built == []
    emb.embed_query("unknown")
    emb.embed_query("another")
    assert len(built) == 1 and built[0].queries == ["unknown", "another"]


def test_build_embedder_lazy_knows_the_model_without_loading_it(tmp_path: Path) -> None:
    emb = build_embedder("minilm", tmp_path / "v.sqlite", lazy=True)
    assert isinstance(emb, CachedEmbedder) and isinstance(emb.inner, LazyEmbedder)
    assert (emb.name, emb.dimension) == (MiniLMEmbedder.name, MiniLMEmbedder.dimension)
    assert not emb.inner.loaded


def test_suli_search_with_a_known_query_vector_loads_no_model(tmp_path: Path) -> None:
    """The real CLI, in a fresh interpreter, on a store of the sample workspace."""
    from cli import sample
    from suli.backends.embedded import EmbeddedBackend

    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "demo.db"
    ws = sample.build(60)
    never = LazyEmbedder(_no_model, MiniLMEmbedder.name, MiniLMEmbedder.dimension)
    backend = EmbeddedBackend(db, MiniLMEmbedder.dimension)
    sample.load(backend, never, ws)  # the shipped vectors cover the sample: no model
    backend.close()
    # The query's vector, as an earlier search would have left it in the cache file.
    seed = Counting(MiniLMEmbedder.name, MiniLMEmbedder.dimension)
    CachedEmbedder(seed, VectorCache(home / "vectors.sqlite")).embed_query("deploy checklist")
    code = (
        "import sys, json\nfrom cli.main import cli\n"
        "try:\n    cli(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n    print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {**os.environ, "SULI_HOME": str(home), "SULI_EMBEDDER": "minilm"}
    env.pop("SULI_OPENSEARCH_URL", None)
    args = ["--db", str(db), "search", "deploy", "checklist", "--as", "prn_ana", "--json"]
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    modules = set(json.loads(out.splitlines()[-1]))
    body = json.loads("\n".join(out.splitlines()[:-1]))
    assert body["results"] and not body.get("degraded"), body
    assert modules.isdisjoint({"onnxruntime", "tokenizers", "httpx", "rich", "opensearchpy"})


def _no_model() -> Counting:
    raise AssertionError("the model was loaded")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\t\r "]), min_size=5),
)
def test_texts_with_one_key_get_the_same_tokens_from_the_real_tokenizer(
    words: list[str], gaps: list[str]
) -> None:
    # The model sees only token ids: the same ids give the same vector.
    spaced = gaps[0] + "".join(w + gaps[(i + 1) % len(gaps)] for i, w in enumerate(words))
    tok = _tokenizer()
    assert tok.encode(spaced).ids == tok.encode(query_key(spaced)).ids


def _tokenizer() -> Any:
    global _TOKENIZER
    if _TOKENIZER is None:
        from tokenizers import Tokenizer

        from suli.embedding import MAX_TOKENS, TOKENIZER_FILE

        _TOKENIZER = Tokenizer.from_file(str(TOKENIZER_FILE))
        _TOKENIZER.enable_truncation(max_length=MAX_TOKENS)
    return _TOKENIZER


_TOKENIZER: Any = None


def test_a_cache_file_that_cannot_be_written_costs_no_query_its_vector(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    VectorCache(path).close()
    inner = Counting()
    emb = CachedEmbedder(inner, VectorCache(path))
    emb.cache._conn.execute("PRAGMA query_only = ON")  # every write now fails, as read-only
    got = emb.embed_query("deploy checklist")
    assert np.array_equal(got, FakeEmbedder(16).embed_query("deploy checklist"))
    assert inner.queries == ["deploy checklist"]


def test_a_query_write_gives_up_soon_when_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    inner = Counting()
    emb = CachedEmbedder(inner, VectorCache(path))
    other = sqlite3.connect(path, isolation_level=None)  # another writer, as an indexer would be
    other.execute("BEGIN IMMEDIATE")
    try:
        start = time.perf_counter()
        got = emb.embed_query("deploy checklist")
        waited = time.perf_counter() - start
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert np.array_equal(got, FakeEmbedder(16).embed_query("deploy checklist"))
    assert waited < 5  # not the 30 s a document write would wait
    # Its default wait is back for the next writer: a batch waits out a short lock.
    emb.embed_documents(["after"])
    assert emb.cache.get_many(inner.name, ["after"])[0] is not None
