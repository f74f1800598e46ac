"""The real bundled model: shape, norms, batching invariance, meaning, and a recorded value."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from suli.embedding import MiniLMEmbedder

pytestmark = pytest.mark.model

# Mixed lengths in no particular order, so length sorting really reorders them and every
# batch of 3 pads its shorter rows.
TEXTS = [
    "Deployment rollback checklist: stop traffic, revert the release, verify health checks, "
    "then tell the on-call channel what happened and why the deploy failed.",
    "banana bread recipe",
    "how to roll back a failed deploy",
    "",
    "Quarterly budget review for the marketing team, with travel and events broken out.",
    "ok",
    "The new movie is awesome",
    "Kubernetes pod keeps restarting with CrashLoopBackOff after the config change",
]


@pytest.fixture(scope="module")
def model() -> Iterator[MiniLMEmbedder]:
    yield MiniLMEmbedder(batch_size=3)


def test_shape_dtype_and_unit_norm(model: MiniLMEmbedder) -> None:
    vecs = model.embed_documents(TEXTS)
    assert (model.name, model.dimension) == ("all-MiniLM-L6-v2-int8", 384)
    assert vecs.shape == (len(TEXTS), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = model.embed_query("roll back")
    assert query.shape == (384,) and query.dtype == np.float32


def test_batching_and_padding_do_not_change_vectors(model: MiniLMEmbedder) -> None:
    batched = model.embed_documents(TEXTS)
    one_by_one = np.stack([model.embed_query(t) for t in TEXTS])
    # Row i must be text i's vector: this also checks the order is restored after sorting.
    np.testing.assert_allclose(batched, one_by_one, atol=1e-4)


def test_order_restored_after_length_sort(model: MiniLMEmbedder) -> None:
    forward = model.embed_documents(TEXTS)
    backward = model.embed_documents(TEXTS[::-1])
    np.testing.assert_allclose(backward, forward[::-1], atol=1e-4)
    # Distinct texts give distinct rows, so a permutation would not go unnoticed.
    sims = forward @ forward.T
    assert (sims[~np.eye(len(TEXTS), dtype=bool)] < 0.99).all()


def test_semantic_ordering(model: MiniLMEmbedder) -> None:
    query = model.embed_query("how to roll back a failed deploy")
    docs = model.embed_documents(
        ["deployment rollback checklist", "banana bread recipe", "quarterly budget review"]
    )
    rollback, banana, budget = (float(query @ d) for d in docs)
    assert rollback > 0.5
    assert rollback > banana + 0.3
    assert rollback > budget + 0.3


def test_reference_cosine(model: MiniLMEmbedder) -> None:
    # Recorded 2026-11-30 from this model file (sha256 8199be6f...) with a standalone script
    # that does not use suli: tokenizers + onnxruntime directly, one sentence per run, mean of
    # last_hidden_state, L2-normalised, dot product -> 0.8920 (rounded to 3 decimals: 0.892).
    a, b = model.embed_documents(["The new movie is awesome", "The new movie is so great"])
    assert round(float(a @ b), 3) == 0.892


def test_close_to_published_fp32_scores(model: MiniLMEmbedder) -> None:
    # sentence-transformers' all-MiniLM-L6-v2 (fp32) example output: 0.8939, 0.6788, 0.5096.
    # int8 weights move cosines by a few thousandths at most; a wrong pooling, tokenizer or
    # model would move them much more.
    pairs = [
        ("The new movie is awesome", "The new movie is so great", 0.8939),
        ("The cat sits outside", "The cat plays in the garden", 0.6788),
        ("I love pasta", "Do you like pizza?", 0.5096),
    ]
    for left, right, published in pairs:
        a, b = model.embed_documents([left, right])
        assert abs(float(a @ b) - published) < 0.01, (left, right)


def test_truncates_at_256_tokens_not_128(model: MiniLMEmbedder) -> None:
    # 148 tokens: past the tokenizer file's own 128 limit, inside ours.
    medium = " ".join(f"item{i}" for i in range(70))
    long = "word " * 400  # far past 256
    tail = " bananas and custard"
    medium_vecs = model.embed_documents([medium, medium + tail])
    long_vecs = model.embed_documents([long, long + tail])
    assert float(medium_vecs[0] @ medium_vecs[1]) < 0.9999  # the tail was read
    np.testing.assert_array_equal(long_vecs[0], long_vecs[1])  # the tail was cut off


def test_progress_and_empty_input(model: MiniLMEmbedder) -> None:
    seen: list[int] = []
    model.embed_documents(TEXTS[:7], on_progress=seen.append)
    assert seen == [3, 6, 7]
    assert model.embed_documents([]).shape == (0, 384)
