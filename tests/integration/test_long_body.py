"""A body the validator admits never takes out word search: the highlighter is bounded; and a
leg the engine refuses is reported as refused, not as the engine being unavailable.

OpenSearch measures a field for highlighting in UTF-16 code units and refuses a search that
would highlight one longer than `index.highlight.max_analyzed_offset` (1,000,000); the
validator counts characters, so 510,000 emoji (two units each) pass it at 1,020,000 units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from suli.backends.opensearch import OpenSearchBackend, bodies
from suli.embedding import FakeEmbedder
from suli.errors import BackendUnavailable, SuliError
from suli.models import Principal
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings
from suli.validate import parse_item

EMOJI_BODY = "lighthouse keeper logbook " + "\N{GRINNING FACE}" * 510_000


@pytest.fixture
def searcher(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path
) -> Iterator[Searcher]:
    alias = make_index_name()
    s = Settings(
        opensearch_url=opensearch_url,
        index_alias=alias,
        acl_index=f"{alias}-acl",
        home=tmp_path,
        embedder="fake",
    )
    emb = FakeEmbedder()
    backend = OpenSearchBackend(s, emb.dimension, emb.name)
    backend.ensure_ready()
    backend.put_principals([Principal("prn_a", "ws_a")])
    long_item = parse_item(
        {"id": "itm_long", "workspace": "ws_a", "title": "Emoji log", "body": EMOJI_BODY}
    )
    short = parse_item({"id": "itm_short", "workspace": "ws_a", "title": "keeper notes"})
    assert len(long_item.body.encode("utf-16-le")) // 2 > 1_000_000  # past the engine's limit
    items = [long_item, short]
    vectors = emb.embed_documents([i.embed_text() for i in items])
    assert backend.upsert(list(zip(items, vectors, strict=True))).indexed == (
        "itm_long",
        "itm_short",
    )
    backend.refresh()
    yield Searcher(backend, emb, s)
    backend.close()


@pytest.mark.parametrize("mode", ["hybrid", "text"])
def test_a_search_matching_a_body_past_the_highlight_limit_answers_whole(
    searcher: Searcher, mode: str
) -> None:
    who = searcher.principal("prn_a")
    resp = searcher.search(who, search_request("lighthouse logbook", mode=mode))
    assert resp.degraded == ()
    assert [r.id for r in resp.results][:1] == ["itm_long"]
    assert "<mark>" in (resp.results[0].snippet or "")  # the words lie inside the bound
    # The other item is still found by its own words in the same workspace.
    other = searcher.search(who, search_request("keeper", mode=mode))
    assert other.degraded == () and {r.id for r in other.results} >= {"itm_long", "itm_short"}


def test_a_leg_the_engine_refuses_is_reported_as_refused_not_unavailable(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A text leg past the index's result window: the engine refuses it in its query phase,
    # every time (the legs carry no highlight any more, so the highlight bound cannot be it).
    text_leg = bodies.text_leg

    def oversized(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**text_leg(*args, **kwargs), "size": 20_000}  # max_result_window is 10,000

    monkeypatch.setattr(bodies, "text_leg", oversized)
    who = searcher.principal("prn_a")
    hybrid = searcher.search(who, search_request("lighthouse logbook"))
    (why,) = hybrid.degraded
    assert why.leg == "text" and why.reason.startswith("refused by OpenSearch (status 400")
    assert "window is too large" in why.reason
    assert [r.id for r in hybrid.results][:1] == ["itm_long"]  # the vector leg still answers
    with pytest.raises(SuliError, match="refused the search") as caught:
        searcher.search(who, search_request("lighthouse logbook", mode="text"))
    assert not isinstance(caught.value, BackendUnavailable)
    assert "illegal_argument_exception" in caught.value.message
    assert "test-" not in caught.value.message  # no index names
