"""Pages reach what `total` counts, and a page is read again under the caller's visibility.

The legs return ids and scores only; the page's items are fetched after fusion, under the
visibility and filters once more. These rules force the interleaving that matters: an ACL or
an item changes between the two requests (a wrapper of the real backend makes the change just
before the page fetch), and the page still shows nothing the caller may no longer see.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from suli.backends.base import Backend, LegQuery, LegResults, Page, PageQuery
from suli.service import Searcher

from .helpers import OTHER_WS, T0, WS, MakeSearcher, World, acl, item, principal

# 14 "quokka" items: 8 workspace-wide, 6 on brd_q (prn_a's board); days repeat so browse has
# ties, which go by id.
SHARED = [
    item(f"itm_s{n:02}", f"Quokka note {n}", "quokka " * (1 + n % 4),
         last_activity_at=T0 - timedelta(days=n // 2))
    for n in range(8)
]  # fmt: skip
BOARD = [
    item(f"itm_b{n:02}", f"Quokka board note {n}", "quokka " * (2 + n % 3), board="brd_q",
         last_activity_at=T0 - timedelta(days=n))
    for n in range(6)
]  # fmt: skip
OTHER = [item(f"itm_o{n}", f"Wombat {n}", "no match here") for n in range(3)]
DEPTH = 4  # far below the matches: every rule below pages past the fused candidates


class BetweenLegsAndPage:
    """The real backend, with `change` run once between the two requests of a search: after
    the legs have answered, before the page is fetched."""

    def __init__(self, real: Backend, change: Callable[[], None]) -> None:
        self._real, self._change = real, change
        self.pages: list[PageQuery] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def search(self, query: LegQuery) -> LegResults:
        legs = self._real.search(query)
        self._change()
        return legs

    def page(self, query: PageQuery) -> Page:
        self.pages.append(query)
        return self._real.page(query)


def _walk(w: World, query: str, limit: int, **params: Any) -> tuple[list[str], list[Any]]:
    """Every page of a search through its cursors: the ids in order and the answers."""
    seen: list[str] = []
    answers = []
    cursor = None
    while True:
        resp = w.search("prn_a", query, limit=limit, cursor=cursor, **params)
        answers.append(resp)
        assert resp.offset == len(seen)
        seen += [r.id for r in resp.results]
        if not resp.has_more:
            assert resp.next is None
            return seen, answers
        assert len(answers) < 50, "paging does not end"
        cursor = resp.next


class PagingRules:
    @pytest.fixture(scope="class")
    @classmethod
    def shelf(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher(
            [*SHARED, *BOARD, *OTHER],
            [principal("prn_a"), principal("prn_z")],
            [acl("brd_q", members=["prn_a"])],
            candidate_depth=DEPTH,
        )

    def test_browse_pages_reach_total_in_browse_order(self, shelf: World) -> None:
        every = [*SHARED, *BOARD, *OTHER]
        want = [it.id for it in sorted(every, key=lambda it: it.id)]
        want.sort(key=lambda i: next(it.last_activity_at for it in every if it.id == i),
                  reverse=True)  # fmt: skip
        for limit in (3, 5, 25):
            seen, answers = _walk(shelf, "", limit)
            assert seen == want  # newest first, ties by id, nothing repeated or skipped
            assert {a.total for a in answers} == {len(want)}
            assert all(a.paging_limit is None for a in answers)
        # a page number reaches the same page as the cursors
        assert shelf.ids("prn_a", "", limit=5, page=3) == want[10:15]

    def test_text_mode_pages_reach_total(self, shelf: World) -> None:
        matches = {it.id for it in (*SHARED, *BOARD)}
        for limit in (2, 3, 25):
            seen, answers = _walk(shelf, "quokka", limit, mode="text")
            assert len(seen) == len(set(seen)) == len(matches)
            assert set(seen) == matches
            assert {(a.total, a.total_relation) for a in answers} == {(len(matches), "eq")}
            assert all(len(a.results) == limit for a in answers[:-1])  # no short page
            # page numbers reach the very same pages as the cursors
            by_number = [shelf.ids("prn_a", "quokka", mode="text", limit=limit, page=n + 1)
                         for n in range(len(answers))]  # fmt: skip
            assert by_number == [[r.id for r in a.results] for a in answers]
        # another caller: only what it sees, every page of it
        z = shelf.searcher.search(shelf.who("prn_z"), _req("quokka", mode="text", limit=25))
        assert z.total == len(SHARED)

    def test_hybrid_pages_to_its_fused_candidates_and_says_so(self, shelf: World) -> None:
        strict = shelf.with_settings(meaning_floor=0.999)  # no meaning-only hit: `total` exact
        seen, answers = _walk(strict, "quokka", 3)
        first = answers[0]
        assert first.total == len(SHARED) + len(BOARD) and first.total_relation == "eq"
        assert first.paging_limit is not None and first.paging_limit < first.total
        assert len(seen) == len(set(seen)) == first.paging_limit  # pages stop where it says
        assert {a.paging_limit for a in answers} == {first.paging_limit}
        wide = shelf.with_settings(candidate_depth=100)
        assert wide.search("prn_a", "quokka").paging_limit is None  # reaches every match

    @pytest.mark.parametrize("isolated", [False, True])
    def test_a_cursor_is_the_same_bytes_whatever_the_caller_cannot_see(
        self, make_searcher: MakeSearcher, isolated: bool
    ) -> None:
        """A cursor carries no engine score: BM25 counts every document of the index (another
        workspace's, or an invisible board's even when workspaces are isolated), so a score in
        the cursor told the caller how many of them hold its words (#33)."""
        # Equal scores (same words, same lengths): the caller's order is by id whatever the
        # statistics, so only a score in the cursor could change its bytes.
        mine = [item(f"itm_m{n:02}", f"Quokka note {n:02}", "quokka") for n in range(12)]
        w = make_searcher(
            mine,
            [principal("prn_a")],
            [acl("brd_secret", members=["prn_nobody"])],
            candidate_depth=DEPTH,
            isolate_workspaces=isolated,
        )
        seen, answers = _walk(w, "quokka", 2, mode="text")
        assert seen == [it.id for it in mine] and len(answers) == 6  # three windows of DEPTH
        cursors = [a.next for a in answers]
        theirs = [
            item(f"itm_x{n:02}", "Quokka", "quokka " * (1 + n % 5), workspace=OTHER_WS)
            for n in range(10)
        ]
        hidden = [
            item(f"itm_h{n:02}", "Quokka quokka", "quokka", board="brd_secret") for n in range(10)
        ]
        for more in (theirs, hidden):
            w.load(more)
            again, answers = _walk(w, "quokka", 2, mode="text")
            assert again == seen
            assert [a.next for a in answers] == cursors  # byte for byte

    def test_a_cursor_whose_window_start_is_gone_still_pages(
        self, make_searcher: MakeSearcher
    ) -> None:
        """The next text window starts after the last hit of the one before; deleted, that hit
        cannot be found again, and the window starts at its offset instead of failing."""
        mine = [item(f"itm_m{n:02}", f"Quokka note {n:02}", "quokka") for n in range(12)]
        w = make_searcher(mine, [principal("prn_a")], candidate_depth=DEPTH)
        first = w.search("prn_a", "quokka", mode="text", limit=DEPTH)
        assert [r.id for r in first.results] == [it.id for it in mine[:DEPTH]]
        w.backend.delete(WS, [mine[DEPTH - 1].id])  # the hit the next window starts after
        w.refresh()
        nxt = w.search("prn_a", "quokka", mode="text", limit=DEPTH, cursor=first.next)
        assert nxt.offset == DEPTH and len(nxt.results) == DEPTH
        assert not {r.id for r in nxt.results} & {r.id for r in first.results}

    @pytest.mark.parametrize("mode", ["text", "hybrid"])
    def test_a_page_never_shows_an_item_made_invisible_after_the_legs(
        self, make_searcher: MakeSearcher, mode: str
    ) -> None:
        w = make_searcher(
            [*SHARED, *BOARD], [principal("prn_a")], [acl("brd_q", members=["prn_a"])]
        )
        legs_only = w.search("prn_a", "quokka", mode=mode, limit=25)
        on_board = [r.id for r in legs_only.results if r.board == "brd_q"]
        assert on_board  # the board's items rank among the first

        def revoke() -> None:
            w.backend.put_acls([acl("brd_q", members=[])])
            w.refresh()

        spy = BetweenLegsAndPage(w.backend, revoke)
        searcher = Searcher(spy, w.embedder, w.settings)  # type: ignore[arg-type]
        resp = searcher.search(w.who("prn_a"), _req("quokka", mode=mode, limit=5))
        assert spy.pages and set(spy.pages[0].ids) & set(on_board)  # the legs still had them
        assert all(r.board is None for r in resp.results)
        # refilled from the next ranked ids: a full page of what prn_a still sees
        assert len(resp.results) == 5
        ranked_visible = [i for i in (r.id for r in legs_only.results) if i not in on_board]
        assert [r.id for r in resp.results] == ranked_visible[:5]
        w.backend.put_acls([acl("brd_q", members=["prn_a"])])
        w.refresh()

    def test_an_item_moved_off_the_callers_boards_after_the_legs_is_not_shown(
        self, make_searcher: MakeSearcher
    ) -> None:
        w = make_searcher([*SHARED], [principal("prn_a")], [acl("brd_q", members=["prn_a"])])
        top = w.ids("prn_a", "quokka", mode="text", limit=3)
        moved = next(it for it in SHARED if it.id == top[0])
        spy = BetweenLegsAndPage(w.backend, lambda: w.load([_on_board(moved, "brd_secret")]))
        searcher = Searcher(spy, w.embedder, w.settings)  # type: ignore[arg-type]
        resp = searcher.search(w.who("prn_a"), _req("quokka", mode="text", limit=3))
        assert top[0] in spy.pages[0].ids
        assert top[0] not in [r.id for r in resp.results] and len(resp.results) == 3


def _on_board(it: Any, board: str) -> Any:
    from dataclasses import replace

    return replace(it, board=board)


def _req(query: str, **params: Any) -> Any:
    from suli.search_params import search_request

    return search_request(query, **params)
