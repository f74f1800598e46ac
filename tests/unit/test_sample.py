"""The demo's sample workspace: deterministic, and shipped with every item's vector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from cli import sample
from suli.embedding import MiniLMEmbedder


class _NoModel:
    """The bundled model's name without the model: any call to embed is a failure."""

    name = MiniLMEmbedder.name
    dimension = 384

    def __init__(self) -> None:
        self.asked: list[str] = []

    def embed_documents(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.asked += list(texts)
        return np.zeros((len(texts), self.dimension), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        raise AssertionError("not used")


def test_the_same_seed_builds_the_same_workspace() -> None:
    a, b = sample.build(200), sample.build(200)
    assert [i.id for i in a.items] == [i.id for i in b.items]
    assert a.items == b.items and len(a.items) == 200


def test_the_shipped_vectors_cover_every_sample_item_so_the_demo_embeds_nothing() -> None:
    ws = sample.build()
    model = _NoModel()
    vecs = sample.vectors_for(ws.items, model)  # type: ignore[arg-type]
    assert model.asked == []
    assert vecs.shape == (len(ws.items), 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)  # stored, not zero-filled


def test_a_changed_text_is_embedded_and_the_rest_come_from_the_file() -> None:
    ws = sample.build()
    changed = [replace(ws.items[0], title="a title never stored")]
    model = _NoModel()
    sample.vectors_for(changed + ws.items[1:3], model)  # type: ignore[arg-type]
    assert model.asked == [changed[0].embed_text()]
