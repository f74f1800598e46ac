"""The embedded word leg's total and word matches, counted from the matches (SQL, or numpy
with the vector leg's candidates), against the plain count over the visible items."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suli.backends.base import LegQuery
from suli.backends.embedded import EmbeddedBackend
from suli.backends.embedded import sql as q
from suli.models import BoardAcl, Filters, Item
from suli.visibility import Visibility

WORDS = ("alpha", "alphas", "alpah", "beta", "betas", "gamma", "gammon", "delta", "deltas",
         "epsilon", "omega", "omegas", "the", "of")  # fmt: skip
BOARDS = ("brd_1", "brd_2")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBackend]:
    rnd = random.Random(3)
    b = EmbeddedBackend(tmp_path_factory.mktemp("totals") / "s.db", 4)
    items = []
    for n in range(250):
        text = " ".join(rnd.choices(WORDS, k=rnd.randint(1, 8)))
        items.append(Item(f"itm_{n}", rnd.choice(("ws", "ws", "ws_other")), text.split()[0],
                          body=text, board=rnd.choice((None, None, *BOARDS)),
                          outcome=rnd.choice(("approved", "failed")),
                          hidden=rnd.random() < 0.1))  # fmt: skip
    b.upsert([(it, [1.0, 0.0, 0.0, 0.0]) for it in items])
    b.put_acls([BoardAcl("brd_1", "ws", members=("prn_me",))])
    yield b
    b.close()


@settings(max_examples=120, deadline=None)
@given(
    words=st.lists(
        st.sampled_from((*WORDS, "alph", "gam", "omegsa", "zzz")), min_size=1, max_size=6
    ),
    boards=st.sets(st.sampled_from(BOARDS)),
    outcome=st.sampled_from((None, "approved")),
    among=st.lists(st.integers(1, 260), max_size=20, unique=True),
)
def test_counts_from_the_matches_equal_the_count_over_visible_items(
    store: EmbeddedBackend,
    words: list[str],
    boards: set[str],
    outcome: str | None,
    among: list[int],
) -> None:
    text = " ".join(words)
    vis = Visibility("ws", "prn_me", frozenset(boards))
    filters = Filters(outcomes=(outcome,) if outcome else ())
    fields = "plain" if all(w in ("the", "of") for w in words) else "stemmed"
    query = LegQuery(vis, filters, text, None, 10, text_fields=fields)
    with store.db.tx() as c:
        tm = store.items._text_match(c, vis, text, fields)
        where, params = q.where(vis, filters)
        cond, cparams = tm.condition(fields)
        # Apart: every visible item, kept when it matches in any tier.
        want = {r for (r,) in c.execute(f"SELECT i.rowid FROM items i WHERE {where} AND {cond}",
                                        [*params, *cparams])}  # fmt: skip
        visible = np.array(
            [r for (r,) in c.execute(f"SELECT i.rowid FROM items i WHERE {where}", params)],
            dtype=np.int64,
        )
        by_sql = store.items._count_text(c, query, tm, among)
        by_numpy = store.items._count_text(c, query, tm, among, visible)
    expected = (len(want), sorted(r for r in among if r in want))
    assert (by_sql[0], sorted(by_sql[1])) == expected
    assert (by_numpy[0], sorted(by_numpy[1])) == expected
