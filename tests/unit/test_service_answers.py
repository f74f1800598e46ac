"""The Searcher's answers over the in-memory backend: cursors, totals, facets, superseded items
and the reporting of writes the store refused."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import World, acl, item, memory_world, principal

from indexer.pipeline import index_items
from suli.backends.memory import MemoryBackend
from suli.embedding import FakeEmbedder, FloatArray, ProgressFn
from suli.errors import InvalidInput
from suli.render import item_json, result_json
from suli.service import Card


def _zebras() -> list:
    shown = [
        item(f"itm_z{n}", f"Zebra note {n}", tags=[f"t{n % 2}"], kind="artifact") for n in range(5)
    ]
    hidden = [
        item(f"itm_s{n}", f"Zebra secret {n}", board="brd_s", tags=["t-secret"], agent="prn_x")
        for n in range(4)
    ]
    return [*shown, *hidden, item("itm_plain", "Giraffe", tags=["t-giraffe"])]


@pytest.fixture(scope="module")
def zoo() -> World:
    return memory_world(
        _zebras(),
        [principal("prn_ana"), principal("prn_bob"), principal("prn_sam")],
        [acl("brd_s", members=["prn_sam"])],
    )


# ---- cursors ------------------------------------------------------------------------------


def test_a_cursor_pages_on_for_its_own_caller_and_query(zoo: World) -> None:
    first = zoo.search("prn_ana", "zebra", limit=2, mode="text")
    assert first.has_more and first.next
    second = zoo.search("prn_ana", "zebra", limit=2, mode="text", cursor=first.next)
    assert second.offset == 2
    assert not {r.id for r in first.results} & {r.id for r in second.results}
    every = zoo.search("prn_ana", "zebra", limit=25, mode="text")
    assert [r.id for r in (*first.results, *second.results)] == [r.id for r in every.results][:4]


def test_a_cursor_is_refused_for_another_caller(zoo: World) -> None:
    first = zoo.search("prn_ana", "zebra", limit=2, mode="text")
    with pytest.raises(InvalidInput) as e:
        zoo.search("prn_bob", "zebra", limit=2, mode="text", cursor=first.next)  # same view, too
    assert e.value.field == "cursor"
    browse = zoo.search("prn_ana", "", limit=2)
    with pytest.raises(InvalidInput):
        zoo.search("prn_bob", "", limit=2, cursor=browse.next)


@pytest.mark.parametrize(
    "changed",
    [{"query": "zebra note"}, {"tag": "t0"}, {"mode": "hybrid"}, {"regex": "Zebra"}],
)
def test_a_cursor_is_refused_for_another_search(zoo: World, changed: dict) -> None:
    first = zoo.search("prn_ana", "zebra", limit=2, mode="text")
    params = {"mode": "text", "limit": 2, **changed}
    query = params.pop("query", "zebra")
    with pytest.raises(InvalidInput):
        zoo.search("prn_ana", query, cursor=first.next, **params)


# ---- totals and facets --------------------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 3, 100])  # cut at depth: the rest is counted apart
@pytest.mark.parametrize("mode", ["text", "hybrid"])
def test_total_never_counts_invisible_items(zoo: World, depth: int, mode: str) -> None:
    w = zoo.with_settings(candidate_depth=depth)
    for pid, visible in (("prn_ana", 5), ("prn_sam", 9)):  # sam also sees the secret board
        assert w.search(pid, "zebra", mode=mode, limit=25).total == visible, pid
        faceted = w.search(pid, "zebra", mode=mode, limit=25, facets=True)
        assert faceted.total == visible and faceted.facets is not None
        assert faceted.facets.total == visible
    assert w.search("prn_ana", "", limit=1).total == 6  # browse: the giraffe too


def test_facets_come_only_from_visible_items_matching_the_search(zoo: World) -> None:
    resp = zoo.search("prn_ana", "zebra", mode="text", facets=True)
    assert resp.facets is not None
    assert resp.facets.total == 5
    assert dict(resp.facets.values["tag"]) == {"t0": 3, "t1": 2}  # no t-secret, no t-giraffe
    assert resp.facets.values["agent"] == [] and resp.facets.values["board"] == []
    wide = zoo.facets("prn_ana")  # no words: every visible item
    assert dict(wide.values["tag"]) == {"t0": 3, "t1": 2, "t-giraffe": 1}
    sam = zoo.search("prn_sam", "zebra", mode="text", facets=True)
    assert sam.facets is not None and dict(sam.facets.values["agent"]) == {"prn_x": 4}


def test_a_filter_narrows_the_other_facets(zoo: World) -> None:
    resp = zoo.search("prn_sam", "zebra", mode="text", tag="t-secret", facets=True)
    assert resp.facets is not None and resp.facets.total == 4
    assert dict(resp.facets.values["board"]) == {"brd_s": 4}
    assert dict(resp.facets.values["kind"]) == {"artifact": 4}


# ---- superseded: one rule on every path ---------------------------------------------------


@pytest.fixture(scope="module")
def versions() -> World:
    return memory_world(
        [
            # outcome "completed": only superseded_by says it was replaced
            item("itm_old", "Zebra plan v1", outcome="completed", superseded_by="itm_new"),
            item("itm_new", "Zebra plan v2", board="brd_s"),
            item("itm_mid", "Zebra plan v0", superseded_by="itm_pub"),
            item("itm_pub", "Zebra plan public"),
        ],
        [principal("prn_ana"), principal("prn_sam")],
        [acl("brd_s", members=["prn_sam"])],
    )


def test_an_invisible_replacement_shows_only_superseded_true(versions: World) -> None:
    card = Card("Zebra plan", "zebra")
    for resp in (
        versions.search("prn_ana", "zebra plan", limit=25),
        versions.search("prn_ana", "", limit=25),
        versions.related("prn_ana", card=card, limit=25),
        versions.related("prn_ana", "itm_mid", limit=25),
    ):
        old = {r.id: r for r in resp.results}["itm_old"]
        assert (old.superseded, old.superseded_by) == (True, None)
    got, res = versions.get("prn_ana", "itm_old")
    assert got.superseded_by is None
    assert (res.superseded, res.superseded_by) == (True, None)
    body = item_json(got, res)  # GET /items/{id}, `suli show`, the web item page
    assert (body["superseded"], body["superseded_by"]) == (True, None)
    assert "itm_new" not in repr(body) and "itm_new" not in repr(result_json(res))


def test_a_visible_replacement_is_named_on_every_path(versions: World) -> None:
    for pid, old, new in (("prn_sam", "itm_old", "itm_new"), ("prn_ana", "itm_mid", "itm_pub")):
        shown = {r.id: r for r in versions.search(pid, "zebra plan", limit=25).results}
        assert (shown[old].superseded, shown[old].superseded_by) == (True, new)
        got, res = versions.get(pid, old)
        assert item_json(got, res)["superseded_by"] == new and res.superseded is True
        assert not item_json(*versions.get(pid, new))["superseded"]


# ---- writes the store refused -------------------------------------------------------------


class PoisonEmbedder(FakeEmbedder):
    """Gives texts holding "poison" a vector the store must refuse (NaN)."""

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        out = super().embed_documents(texts, on_progress=on_progress).copy()
        for n, t in enumerate(texts):
            if "poison" in t:
                out[n] = np.nan
        return out


def test_every_line_the_store_refuses_is_reported_with_its_reason() -> None:
    emb = PoisonEmbedder(16)
    backend = MemoryBackend(emb.dimension, emb.name)
    lines = [item("itm_a", "fine"), item("itm_b", "poison pill"), item("itm_c", "fine too")]
    summary = index_items(enumerate(lines, start=1), backend, emb)
    assert summary.indexed == 2
    [rej] = summary.rejected
    assert (rej.line, rej.id) == (2, "itm_b") and "NaN" in rej.reason
    assert summary.read == summary.indexed + len(summary.rejected)
    assert sorted(it.id for it in backend.all_items()) == ["itm_a", "itm_c"]
