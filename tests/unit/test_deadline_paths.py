"""DESIGN 3.11 on every read path: a read that would outlast the request's deadline is cut by
it. The store here is a stand-in whose chosen read works far longer than the deadline: it
works only as long as the timeout it was handed allows (the explicit `timeout_s` where the
protocol has one, as the embedded store does; else the deadline in force, as the OpenSearch
client does), and a read handed no bound runs its whole work. A path whose read is not bounded
thus finishes that read, which the test sees; no clock is asserted."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import KeyedEmbedder, World, axis, item, principal

from suli.backends.memory import MemoryBackend
from suli.deadline import Deadline, in_force
from suli.errors import DeadlineExceeded
from suli.search_params import search_request
from suli.service import Card
from suli.settings import Settings

DEADLINE_S = 0.2
WORK_S = 3.0  # what the slow read would take unbounded: far past the deadline


class SlowStore(MemoryBackend):
    """The in-memory store, with its `slow` read (the `nth` call of that method) working
    WORK_S seconds unless a timeout cuts it, like a store under a heavy query."""

    def __init__(self, dimension: int, model: str) -> None:
        super().__init__(dimension, model)
        self.slow: tuple[str, int] | None = None
        self.calls: dict[str, int] = {}
        self.finished: list[str] = []  # slow reads that ran their whole work
        self.cut: list[str] = []  # slow reads their timeout ended

    def _work(self, name: str, timeout_s: float | None, explicit: bool) -> None:
        n = self.calls[name] = self.calls.get(name, 0) + 1
        if self.slow != (name, n):
            return
        bound = timeout_s
        if not explicit:
            deadline = in_force()
            bound = deadline.left() if deadline is not None else None
        if bound is None or bound >= WORK_S:
            threading.Event().wait(WORK_S)  # the work itself, not a synchronisation
            self.finished.append(name)
            return
        threading.Event().wait(max(bound, 0.0))
        self.cut.append(name)
        raise DeadlineExceeded(f"{name} did not answer in time")

    # Reads with a timeout of their own: only that one bounds them.
    def search(self, query: Any) -> Any:
        self._work("search", query.timeout_s, explicit=True)
        return super().search(query)

    def browse(
        self, vis: Any, filters: Any, limit: int, timeout_s: Any = None, *a: Any, **k: Any
    ) -> Any:
        self._work("browse", timeout_s, explicit=True)
        return super().browse(vis, filters, limit, timeout_s, *a, **k)

    def facets(
        self, vis: Any, filters: Any, match: Any = None, cap: int = 50, timeout_s: Any = None
    ) -> Any:
        self._work("facets", timeout_s, explicit=True)
        return super().facets(vis, filters, match, cap, timeout_s)

    # Reads without one: the deadline in force bounds them.
    def page(self, query: Any) -> Any:
        self._work("page", None, explicit=False)
        return super().page(query)

    def get_many(self, vis: Any, ids: Any) -> Any:
        self._work("get_many", None, explicit=False)
        return super().get_many(vis, ids)

    def referencing(self, vis: Any, item_id: str, limit: int) -> Any:
        self._work("referencing", None, explicit=False)
        return super().referencing(vis, item_id, limit)


@pytest.fixture(scope="module")
def world() -> World:
    emb = KeyedEmbedder([("deploy", axis(0))])
    items = [
        item("itm_1", "Deploy checklist", "deploy steps", outcome="approved", references=["itm_2"]),
        item("itm_2", "Rollback", "undo a deploy", outcome="failed"),
        item("itm_3", "Budget", "numbers", outcome="approved"),
    ]
    emb.set(items[2], axis(0))  # a meaning-only hit: the ticked facet's own leg has work
    store = SlowStore(emb.dimension, emb.name)
    settings = Settings(backend="embedded", embedder="fake", cursor_secret="unit-test-key")
    w = World(store, emb, settings, store.refresh)
    w.load(items, [principal("prn_a")])
    return w


def _search(query: str = "deploy", **params: Any) -> Callable[[World], object]:
    def run(w: World) -> object:
        req = search_request(query, **params)
        return w.searcher.search(w.who("prn_a"), req, Deadline(DEADLINE_S))

    return run


def _edge(fn: Callable[[World, Deadline], object]) -> Callable[[World], object]:
    """A call as the HTTP edge makes it: the deadline in force around the core call."""

    def run(w: World) -> object:
        d = Deadline(DEADLINE_S)
        return d.run(fn, w, d)

    return run


PATHS: dict[str, tuple[tuple[str, int], Callable[[World], object]]] = {
    "hybrid legs": (("search", 1), _search(mode="hybrid")),
    "text leg": (("search", 1), _search(mode="text")),
    "page fetch": (("page", 1), _search(mode="text")),
    "search facets": (("facets", 1), _search(mode="hybrid", facets=True)),
    "ticked facet's own leg": (
        ("search", 2),
        _search(mode="hybrid", facets=True, outcome="approved"),
    ),
    "ticked facet's count": (
        ("facets", 1),
        _search(mode="hybrid", facets=True, outcome="approved"),
    ),
    "browse": (("browse", 1), _search("")),
    "browse facets": (("facets", 1), _search("", facets=True)),
    "facets": (
        ("facets", 1),
        _edge(lambda w, d: w.searcher.facets(w.who("prn_a"), deadline=d)),
    ),
    "get": (("get_many", 1), _edge(lambda w, d: w.searcher.get(w.who("prn_a"), "itm_1"))),
    "related item": (
        ("get_many", 1),
        lambda w: w.related("prn_a", "itm_1", deadline=Deadline(DEADLINE_S)),
    ),
    "related legs": (
        ("search", 1),
        lambda w: w.related("prn_a", "itm_1", deadline=Deadline(DEADLINE_S)),
    ),
    "related card": (
        ("search", 1),
        lambda w: w.related(
            "prn_a", card=Card("Deploy", "steps", ()), deadline=Deadline(DEADLINE_S)
        ),
    ),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_read_that_outlasts_the_deadline_is_cut_by_it(world: World, path: str) -> None:
    store = world.backend
    assert isinstance(store, SlowStore)
    slow, call = PATHS[path]
    store.slow, store.calls, store.finished, store.cut = slow, {}, [], []
    with pytest.raises(DeadlineExceeded):
        call(world)
    assert store.finished == [], f"{path}: {slow[0]} ran past the deadline unbounded"
    assert store.cut == [slow[0]], f"{path}: the slow read was never reached"
