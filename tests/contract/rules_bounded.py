"""Contract rule: work on huge items is bounded and stops at the deadline.

Five bodies of 20k words from a 12-word vocabulary make every query word a hit thousands of
times per item. Search and related must answer (or say the deadline passed) soon after the
deadline, and no thread may keep working once the call returned.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from suli.errors import DeadlineExceeded
from suli.search_params import search_request
from suli.service import Deadline

from .helpers import KeyedEmbedder, MakeSearcher, World, axis, item, principal

VOCAB = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
         "lambda", "omicron")  # fmt: skip
BIG_ITEMS, BIG_WORDS = 5, 20_000
DEADLINE_S = 0.3
# Before the fix the embedded store took 5-24 s here with a 0.3 s deadline (2-core dev box).
BOUND_S = 2.5


def timed(fn: Callable[[], object]) -> tuple[float, BaseException | None]:
    """Run fn in a thread: (seconds until it returned, what it raised); it must have ended."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # collected: reported by the test thread
            raised.append(e)

    t0 = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    took = time.monotonic() - t0
    assert not thread.is_alive(), "the work went on after the deadline"
    return took, raised[0] if raised else None


class BoundedWorkRules:
    @pytest.fixture(scope="class")
    @classmethod
    def huge(cls, make_searcher: MakeSearcher) -> World:
        rng = random.Random(14)
        items = [
            item(f"itm_big{n}", f"big {n}", " ".join(rng.choices(VOCAB, k=BIG_WORDS)))
            for n in range(BIG_ITEMS)
        ]
        # Given vectors: the fake embedder would spend seconds on 20k-word texts.
        emb = KeyedEmbedder([(it, axis(n)) for n, it in enumerate(items)])
        items.append(item("itm_small", "small", "alpha beta in a short body"))
        return make_searcher(items, [principal("prn_p")], embedder=emb)

    def test_search_over_huge_bodies_stops_at_the_deadline(self, huge: World) -> None:
        me = huge.who("prn_p")
        req = search_request("alpha beta gamma delta", limit=10)
        took, err = timed(lambda: huge.searcher.search(me, req, Deadline(DEADLINE_S)))
        assert err is None or isinstance(err, DeadlineExceeded), err
        assert took < BOUND_S, f"search took {took:.1f}s with a {DEADLINE_S}s deadline"

    def test_related_of_a_huge_item_stops_at_the_deadline(self, huge: World) -> None:
        took, err = timed(lambda: huge.related("prn_p", "itm_big0", deadline=Deadline(DEADLINE_S)))
        assert err is None or isinstance(err, DeadlineExceeded), err
        assert took < BOUND_S, f"related took {took:.1f}s with a {DEADLINE_S}s deadline"

    def test_huge_bodies_still_get_highlighted_snippets(self, huge: World) -> None:
        res = huge.search("prn_p", "kappa", mode="text", limit=10)
        assert {r.id for r in res.results} == {f"itm_big{n}" for n in range(BIG_ITEMS)}
        for r in res.results:
            assert "<mark>kappa</mark>" in r.snippet.lower() and len(r.snippet) < 1000
