"""The meaning floor with the real model: the nonsense set finds nothing in the sample workspace,
while real questions about it still do (bench/floor.py calibrates the floor on NFCorpus too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.floor import nonsense_queries
from cli import sample
from suli.backends.embedded import EmbeddedBackend
from suli.embedding import MiniLMEmbedder
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    model = MiniLMEmbedder()
    path = Path(tmp_path_factory.mktemp("floor")) / "sample.db"
    backend = EmbeddedBackend(path, model.dimension, model=model.name)
    sample.load(backend, model)  # the sample's stored vectors: nothing is embedded but queries
    yield Searcher(backend, model, Settings(embedder="minilm", home=path.parent))
    backend.close()


@pytest.mark.parametrize("who", ["prn_ana", "prn_ben"])
def test_the_nonsense_set_finds_nothing(searcher: Searcher, who: str) -> None:
    principal = searcher.principal(who)
    found = {}
    for query in nonsense_queries():
        resp = searcher.search(principal, search_request(query, explain=True))
        if resp.results:
            found[query] = [(r.id, r.explain and r.explain.kept) for r in resp.results[:3]]
        else:
            assert resp.total == 0 and not resp.has_more and resp.next is None
    assert found == {}


def test_real_questions_still_find_meaning_only_matches(searcher: Searcher) -> None:
    principal = searcher.principal("prn_ana")
    kept: dict[str, set[str | None]] = {}
    for query in (
        "credentials expired",
        "what broke in production last night",
        "release went wrong",
    ):
        resp = searcher.search(principal, search_request(query, explain=True, limit=25))
        assert resp.results, query
        kept[query] = {r.explain.kept for r in resp.results if r.explain}
    # The floor keeps meaning-only matches of real questions (with the combined text field,
    # two of these questions now match their answers by words alone).
    assert any("meaning-within-margin" in k for k in kept.values()), kept
