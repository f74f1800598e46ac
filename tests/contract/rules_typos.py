"""DESIGN 3.12: a small typo, or a half-typed last word, still finds its items through the word
leg's lower-weighted typo clause; exact words rank first; corrections never draw on words the
caller cannot see (another workspace's, a board it is not on)."""

from __future__ import annotations

import pytest

from suli.models import Filters

from .helpers import OTHER_WS, MakeSearcher, World, acl, facet_dict, item, principal

TYPO_ITEMS = [
    item("itm_t1", "Deploy checklist", "Run the deploy checklist before each release."),
    item("itm_t2", "Rollback guide", "How to roll back a failed release safely."),
    item("itm_t3", "Deplyo notes", "The team's own spelling of deploy, on purpose."),
    item("itm_t4", "Canary metrics", "Watch the canary dashboards during rollout."),
    # On a board prn_a is not on, and in another workspace: words only they hold.
    item("itm_sec", "Quarterly zanzibar", "The zanzibar figures.", board="brd_secret"),
    item("itm_far", "Quarterly zanzibor", "Other tenant.", workspace=OTHER_WS),
    item("itm_vis", "Quarterly zanzibur", "Visible spelling."),
]


def _ids(world: World, query: str, **params: object) -> list[str]:
    return world.ids("prn_a", query, mode="text", limit=25, **params)


class TypoRules:
    @pytest.fixture(scope="class")
    @classmethod
    def typos(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher(
            TYPO_ITEMS,
            [principal("prn_a"), principal("prn_s"), principal("prn_o", workspace=OTHER_WS)],
            [acl("brd_secret", members=["prn_s"])],
        )

    def test_a_swapped_letter_still_finds_the_word(self, typos: World) -> None:
        got = _ids(typos, "cheklist")  # a dropped letter
        assert got == ["itm_t1"]
        assert _ids(typos, "rollbakc") == ["itm_t2"]  # a swap
        assert _ids(typos, "canaray") == ["itm_t4"]  # an inserted letter
        assert set(_ids(typos, "relaese")) == {"itm_t1", "itm_t2"}  # a swap, in two bodies

    def test_two_typos_find_what_both_words_find(self, typos: World) -> None:
        got = _ids(typos, "deplyo cheklist")
        assert set(got) >= {"itm_t1", "itm_t3"}
        assert got[0] in {"itm_t1", "itm_t3"}

    def test_the_last_word_matches_as_a_prefix(self, typos: World) -> None:
        assert _ids(typos, "deplo") != []
        assert "itm_t1" in _ids(typos, "deplo")
        assert "itm_t4" in _ids(typos, "canary dash")  # "dashboards" from "dash"
        assert _ids(typos, "ca") == []  # too short to stand for a word

    def test_an_exact_word_ranks_above_its_typo(self, typos: World) -> None:
        # "deplyo" is a word of itm_t3 and a typo of itm_t1's "deploy": exact first.
        got = _ids(typos, "deplyo")
        assert got[0] == "itm_t3" and "itm_t1" in got
        got = _ids(typos, "deploy")
        assert got[0] == "itm_t1"

    def test_short_and_common_words_are_never_fuzzed(self, typos: World) -> None:
        assert _ids(typos, "teh") == []  # three letters: exact only (and no prefix of a word)
        assert _ids(typos, "rool") == []  # four letters: exact only

    def test_a_typo_match_is_a_kept_word_match_and_counted(self, typos: World) -> None:
        resp = typos.search("prn_a", "cheklist", mode="hybrid", explain=True, limit=25)
        hit = next(r for r in resp.results if r.id == "itm_t1")
        assert hit.explain is not None and hit.explain.text_rank == 1
        assert hit.explain.kept == "word-match"
        text = typos.search("prn_a", "cheklist", mode="text", facets=True)
        assert text.total == 1 and text.facets is not None and text.facets.total == 1

    def test_corrections_never_reach_words_the_caller_cannot_see(self, typos: World) -> None:
        # "zanzibar" (a board prn_a is not on), "zanzibor" (another workspace), "zanzibur"
        # (visible): prn_a's typo finds the visible one only, whatever the others hold.
        for query in ("zanzibar", "zanzibor", "zanzibxr", "zanzi"):
            resp = typos.search("prn_a", query, mode="text", explain=True, facets=True)
            assert [r.id for r in resp.results] == ["itm_vis"], query
            assert resp.total == 1 and resp.facets is not None and resp.facets.total == 1
            assert "zanzibar" not in str(resp) and "zanzibor" not in str(resp)
        # The board member finds its own item by the exact word, first.
        assert typos.ids("prn_s", "zanzibar", mode="text")[0] == "itm_sec"

    def test_another_tenants_words_change_nothing(self, make_searcher: MakeSearcher) -> None:
        """The same visible items with and without a crowd of near-miss words elsewhere: the
        caller's results, order, counts, facets and explain are the same."""
        mine = [
            item("itm_m1", "Deploy checklist", "deploy steps"),
            item("itm_m2", "Deploys", "deploys today"),
        ]
        crowd = [
            item(f"itm_c{n}", f"deplo{chr(97 + n)} notes", f"deplx{chr(97 + n)}", board="brd_x")
            for n in range(26)
        ] + [item(f"itm_o{n}", f"deplyo{n} dep{n}y", workspace=OTHER_WS) for n in range(30)]
        alone = make_searcher(mine, [principal("prn_a")])
        crowded = make_searcher([*mine, *crowd], [principal("prn_a")], [acl("brd_x")])
        for query in ("deplyo", "deplo", "depoly cheklist"):
            a = alone.search("prn_a", query, mode="text", explain=True, facets=True, limit=25)
            b = crowded.search("prn_a", query, mode="text", explain=True, facets=True, limit=25)
            assert [r.id for r in a.results] == [r.id for r in b.results], (
                query,
                [r.id for r in a.results],
                [r.id for r in b.results],
            )
            assert [r.snippet for r in a.results] == [r.snippet for r in b.results], query
            assert [r.explain.text_rank for r in a.results if r.explain] == [
                r.explain.text_rank for r in b.results if r.explain
            ]
            assert a.total == b.total and a.facets is not None and b.facets is not None
            assert facet_dict(a.facets) == facet_dict(b.facets)
        assert facet_dict(crowded.facets("prn_a", Filters())) == facet_dict(
            alone.facets("prn_a", Filters())
        )

    @pytest.mark.parametrize("where", ["another workspace", "an invisible board"])
    def test_a_crowd_of_invisible_near_misses_never_crowds_out_a_visible_correction(
        self, make_searcher: MakeSearcher, where: str
    ) -> None:
        """DESIGN 3.12 (#33): candidates are checked for visibility before any cap. Here 64
        near-misses the caller cannot see sort before the visible word (as near, earlier
        alphabetically); the typo is not the last word, so only its correction (not the last
        word's prefix) can find the visible item."""
        typo, right = "quizzicla", "quizzical"  # one swap apart
        letters = "abcdefghijklmnopqrstuvwxyz"
        edits = {typo[:i] + ch + typo[i + 1 :] for i in range(1, len(typo)) for ch in letters}
        edits |= {typo[:i] + ch + typo[i:] for i in range(1, len(typo) + 1) for ch in letters}
        near = sorted(w for w in edits if w < right and w != typo)[:64]  # one edit, sort first
        assert len(near) == 64
        mine = [
            item("itm_vis", "Quizzical ledger", "A quizzical look at the books."),
            item("itm_other", "Plain notes", "Nothing near the word."),
        ]
        if where == "another workspace":
            crowd = [item(f"itm_c{n:02}", w, w, workspace=OTHER_WS) for n, w in enumerate(near)]
        else:
            crowd = [item(f"itm_c{n:02}", w, w, board="brd_secret") for n, w in enumerate(near)]
        w = make_searcher(
            [*mine, *crowd], [principal("prn_a")], [acl("brd_secret", members=["prn_s"])]
        )
        for query in (f"{typo} zyxwv", f"zyxwv {typo} qqqqq"):
            got = w.search("prn_a", query, mode="text", limit=25)
            assert [r.id for r in got.results] == ["itm_vis"], query
            assert got.total == 1

    def test_a_typo_in_the_rarest_word_weighs_as_that_word(
        self, make_searcher: MakeSearcher
    ) -> None:
        """#35: a corrected word counts by its rarity, as the word spelt right would (times a
        penalty for the edit), not in a tier below every item holding an exact word: a typo in
        the one rare word of a long query keeps the item holding that word on top."""
        common = [
            item(f"itm_c{n:02}", f"Cell energy notes {n}", "Notes on cell energy.")
            for n in range(12)
        ]
        other = [
            item(f"itm_o{n:02}", f"Budget review {n}", "Quarterly figures.") for n in range(24)
        ]
        rare = item("itm_mito", "Mitochondria", "Mitochondria make the energy a cell uses.")
        w = make_searcher([*common, *other, rare], [principal("prn_a")])
        for query in ("mitochondria cell energy", "mitocnhondria cell energy"):
            got = w.ids("prn_a", query, mode="text", limit=25)
            assert got[0] == "itm_mito", (query, got[:3])
            assert len(got) == 13, query  # every item still found, the rare one first
