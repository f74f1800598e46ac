"""A vector a line brings cannot hijack meaning search: it is stored at unit length on both
backends, so a long one does not multiply its item's similarity past the meaning floor.

Every similarity is a dot product of unit vectors; a 1000x-long vector of an unrelated item
scored 229 against a query that must find nothing, defeating the floor (0.33).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import numpy as np
import pytest
from opensearchpy import OpenSearch

from indexer.pipeline import index_stream
from suli.backends.base import Backend
from suli.backends.embedded import EmbeddedBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import Principal
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings
from suli.visibility import Visibility

MODEL = FakeEmbedder()
WS = "ws"
NONSENSE = "zqxv blorft wuggle"
QUESTION = "kestrel migration timetable"


def aimed(query: str, cos: float, length: float) -> list[float]:
    """A vector of the given length whose cosine with the query's vector is exactly `cos`."""
    q = MODEL.embed_query(query).astype(np.float64)
    q /= np.linalg.norm(q)
    other = np.zeros_like(q)
    other[int(np.argmin(np.abs(q)))] = 1.0
    other -= other.dot(q) * q  # orthogonal to the query
    other /= np.linalg.norm(other)
    v = cos * q + math.sqrt(1 - cos * cos) * other
    return [float(x) for x in length * v]


def line(item_id: str, title: str, vector: list[float]) -> str:
    item = {"id": item_id, "workspace": WS, "title": title, "vector": vector,
            "vector_model": MODEL.name}  # fmt: skip
    return json.dumps(item) + "\n"


@pytest.fixture(params=["embedded", "opensearch"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, Settings]]:
    if request.param == "embedded":
        settings = Settings(backend="embedded", embedded_path=tmp_path / "s.db", embedder="fake")
        backend: Backend = EmbeddedBackend(settings.sqlite_path, MODEL.dimension, model=MODEL.name)
        yield backend, settings
        backend.close()
        return
    url = request.getfixturevalue("opensearch_url")
    client: OpenSearch = request.getfixturevalue("os_client")
    name = f"test-{uuid4().hex}"
    settings = Settings(backend="opensearch", opensearch_url=url, index_alias=name,
                        acl_index=f"{name}-acl", embedder="fake")  # fmt: skip
    os_backend = OpenSearchBackend(settings, MODEL.dimension, MODEL.name)
    os_backend.ensure_ready()
    try:
        yield os_backend, settings
    finally:
        found = client.indices.get(index=f"{name}*", expand_wildcards="all",
                                   ignore_unavailable=True)  # fmt: skip
        if found:
            client.indices.delete(index=",".join(found), ignore=[404])
        os_backend.close()


def test_a_long_supplied_vector_does_not_beat_the_meaning_floor(
    world: tuple[Backend, Settings],
) -> None:
    backend, settings = world
    backend.put_principals([Principal("prn_ana", WS, "person", ())])
    data = (
        # Unrelated to the nonsense query (cosine 0.1, under the 0.33 floor), 1000x long.
        line("itm_long", "Heron feeding schedule", aimed(NONSENSE, 0.1, 1000.0))
        # Close to a real question (cosine 0.8), 1000x long too: still found, at 0.8.
        + line("itm_close", "Kestrel notes", aimed(QUESTION, 0.8, 1000.0))
        + line("itm_tiny", "Osprey notes", aimed(QUESTION, 0.4, 1e-30))
    )
    summary = index_stream(io.BytesIO(data.encode()), backend, MODEL)
    assert (summary.indexed, summary.supplied, summary.rejected) == (3, 3, [])
    backend.refresh()

    vis = Visibility(workspace=WS, principal_id="prn_ana", boards=frozenset())
    stored = backend.vectors(vis, ["itm_long", "itm_close", "itm_tiny"])
    for item_id, vec in stored.items():
        assert math.isclose(math.fsum(x * x for x in vec), 1.0, rel_tol=1e-5), item_id

    searcher = Searcher(backend, MODEL, settings)
    ana = searcher.principal("prn_ana")
    assert (settings.meaning_floor, settings.meaning_margin) == (0.33, 0.3)
    nothing = searcher.search(ana, search_request(NONSENSE, explain=True))
    assert not nothing.degraded, nothing.degraded  # the vector leg answered: it found nothing
    assert [(r.id, r.explain) for r in nothing.results] == []
    found = searcher.search(ana, search_request(QUESTION, explain=True, mode="vector"))
    sims = {r.id: r.explain.vector_similarity for r in found.results if r.explain}
    # the tiny one's 0.4 is over the floor but outside the margin (0.3) of the best, 0.8
    assert set(sims) == {"itm_close"}, (found.degraded, found.dropped)
    assert sims["itm_close"] == pytest.approx(0.8, abs=1e-3)
