"""Each step of the search path alone (suli.steps), over the in-memory backend's legs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import World, axis, blend, item, memory_world, principal

from suli import steps
from suli.backends.base import LegResults
from suli.cursor import Filled, Position
from suli.models import SearchRequest
from suli.search_params import search_request
from suli.visibility import visibility_for

ITEMS = [
    item("itm_words", "Quokka care", "how to feed a quokka"),  # words only
    item("itm_near", "Marsupial notes", "small animals of Rottnest"),  # meaning only
    item("itm_both", "Quokka habitat", "where the quokka lives"),
]


@pytest.fixture(scope="module")
def zoo() -> World:
    w = memory_world(ITEMS, [principal("prn_a")], meaning_margin=2.0, meaning_floor=-1.0)
    emb = w.embedder
    emb.set("quokka", axis(0))  # type: ignore[attr-defined]
    emb.set(ITEMS[1], blend(0, 1, 0.9))  # type: ignore[attr-defined]
    emb.set(ITEMS[2], blend(0, 2, 0.8))  # type: ignore[attr-defined]
    emb.set(ITEMS[0], axis(3))  # type: ignore[attr-defined]
    w.load(ITEMS)  # again, with the vectors set
    return w


def _plan(w: World, req: SearchRequest, **kw: object) -> steps.Plan:
    vis = visibility_for(principal("prn_a"), [])
    vector = None if req.mode == "text" else list(w.embedder.embed_query(req.query))
    return steps.plan(w.settings, vis, req, req.query, vector, at=Position(req.offset), **kw)  # type: ignore[arg-type]


def _legs(w: World, p: steps.Plan) -> LegResults:
    return w.backend.search(p.query)


def test_plan_counts_up_to_the_limit_unless_asked_exact_and_merges_exclusions() -> None:
    w = memory_world()
    free = _plan(w, search_request("quokka"), exclude=["itm_x"])
    assert free.query.count_to == w.settings.total_count_limit
    assert free.query.filters.exclude_ids == ("itm_x",)
    exact = _plan(w, search_request("quokka", exact_total=True))
    assert exact.query.count_to is None
    text = _plan(w, search_request("quokka", mode="text"))
    assert text.query.vector is None and text.query.text == "quokka"
    vector = _plan(w, search_request("quokka", mode="vector"))
    assert vector.query.text is None
    # a lone common word searches the plain fields (DESIGN 3.5)
    assert _plan(w, search_request("the")).query.text_fields == "plain"


def test_fuse_ranks_both_legs_and_puts_preferred_items_first(zoo: World) -> None:
    p = _plan(zoo, search_request("quokka"))
    fused = steps.fuse(zoo.settings, p, _legs(zoo, p))
    ids = [r.id for r in fused.scored]
    assert ids[0] == "itm_both"  # found by both legs
    assert set(ids) == {"itm_words", "itm_near", "itm_both"}
    assert fused.text_ids == {"itm_words", "itm_both"}
    assert fused.listed == tuple(ids)
    near = ITEMS[1]
    related = _plan(zoo, search_request("quokka"), prefer=[near], exclude=["itm_words"])
    assert related.prefer == (near,)
    fused = steps.fuse(zoo.settings, related, _legs(zoo, related))
    assert fused.listed[0] == "itm_near" and "itm_words" not in fused.listed
    assert fused.listed.count("itm_near") == 1


def test_render_marks_words_of_word_hits_and_gives_meaning_hits_a_passage(zoo: World) -> None:
    p = _plan(zoo, search_request("quokka", explain=True))
    fused = steps.fuse(zoo.settings, p, _legs(zoo, p))
    items = {it.id: it for it in ITEMS}
    shown = steps.Shown(
        {i: items[i] for i in fused.listed}, Filled(3, frozenset(), frozenset()), 0, 3, "eq"
    )
    got = {r.id: r for r in steps.render(p, fused, shown)}
    assert "<mark>quokka</mark>" in got["itm_words"].snippet
    assert "<mark>" not in got["itm_near"].snippet  # meaning only: its best passage
    assert got["itm_near"].snippet == "small animals of Rottnest"
    assert got["itm_near"].explain is not None and got["itm_near"].explain.text_rank is None
    assert [r.id for r in steps.render(p, fused, shown)] == list(fused.listed)


def test_next_position_continues_the_list_then_the_text_windows(zoo: World) -> None:
    p = _plan(zoo, search_request("quokka", limit=1))
    legs = _legs(zoo, p)
    fused = steps.fuse(zoo.settings, p, legs)
    first = steps.Shown({}, Filled(1, frozenset(), frozenset()), 0, 3, "eq")
    assert steps.next_position(p, legs, fused, first) == Position(1, None, 0)
    last = steps.Shown({}, Filled(1, frozenset(), frozenset()), 2, 3, "eq")
    assert steps.next_position(p, legs, fused, last) is None
    assert steps.paging_limit(p, fused, last) is None  # the list reaches every match
    counted_more = steps.Shown({}, Filled(1, frozenset(), frozenset()), 2, 5, "eq")
    assert steps.paging_limit(p, fused, counted_more) == 3


def test_the_searcher_page_step_reads_the_page_and_counts(zoo: World) -> None:
    s = zoo.searcher
    p = _plan(zoo, search_request("quokka"))
    legs = _legs(zoo, p)
    fused = steps.fuse(zoo.settings, p, legs)
    from suli.deadline import Deadline
    from suli.service import Phases

    who = zoo.who("prn_a")
    shown = s._page(p, legs, fused, who, p.query.vis, Deadline(5.0), Phases())
    assert list(shown.items) == list(fused.listed)
    assert (shown.total, shown.relation) == (3, "eq")
    assert shown.filled.consumed == 3


def test_as_store_gives_the_operators_methods_of_a_store_and_refuses_a_bare_one() -> None:
    from suli.backends.base import Admin, as_store
    from suli.backends.memory import MemoryBackend

    store = MemoryBackend(4)
    assert as_store(store) is store and isinstance(store, Admin)

    class SearchOnly:  # the search core's protocols alone, no operators' methods
        def search(self, query: object) -> None: ...

    with pytest.raises(TypeError, match="operators"):
        as_store(SearchOnly())  # type: ignore[arg-type]
