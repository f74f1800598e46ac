"""Contract rules of DESIGN.md section 3.1-3.5: filtered k-NN, RRF, outcome weights, keep rules."""

from __future__ import annotations

import pytest

from suli.backends.base import LegQuery
from suli.models import OUTCOMES, Filters
from suli.settings import DEFAULT_OUTCOME_WEIGHTS, Settings

from .helpers import OTHER_WS, KeyedEmbedder, MakeSearcher, World, acl, axis, blend, item, principal


def _explain(world: World, pid: str, query: str, **params: object) -> dict[str, object]:
    resp = world.search(pid, query, explain=True, limit=25, **params)
    return {r.id: r.explain for r in resp.results}


class FilteredKnnRules:
    """DESIGN 2 + 3.1: visibility sits inside the k-NN query, so k visible items come back."""

    @pytest.fixture(scope="class")
    @classmethod
    def sparse(cls, make_searcher: MakeSearcher) -> World:
        """1000 items: prn_p sees 10 (1 %), prn_o sees 4 of its workspace's 400.

        Every invisible item lies nearer the query than any visible one, so a k-NN that
        filtered after picking its k nearest would return nothing visible.
        """
        emb = KeyedEmbedder([("needle", axis(0))])
        items = []
        for n in range(1000):
            ws = OTHER_WS if n < 400 else "ws_main"
            visible = n in (0, 100, 200, 300) or (n >= 400 and n % 60 == 0)
            it = item(
                f"itm_{n:04d}",
                f"Needle report {n}",
                "shared words for every item",
                workspace=ws,
                board=None if visible else ("brd_far" if ws == OTHER_WS else "brd_closed"),
            )
            # Visible items: similarity 0.10-0.19, distinct so their order is known.
            cos = 0.10 + (n % 97) / 1000 if visible else 0.99
            emb.set(it, blend(0, 1 + n % 63, cos))
            items.append(it)
        principals = [principal("prn_p"), principal("prn_o", workspace=OTHER_WS)]
        acls = [acl("brd_closed"), acl("brd_far", workspace=OTHER_WS)]
        return make_searcher(items, principals, acls, embedder=emb)

    def _visible(self, world: World, pid: str) -> list[str]:
        return [r.id for r in world.search(pid, "", limit=25).results]

    def test_the_fixture_has_one_percent_visible(self, sparse: World) -> None:
        assert sparse.backend.count() == 1000
        assert len(self._visible(sparse, "prn_p")) == 10
        assert len(self._visible(sparse, "prn_o")) == 4

    @pytest.mark.parametrize("pid,visible", [("prn_o", 4), ("prn_p", 10)])
    @pytest.mark.parametrize("depth", [1, 4, 5, 10, 50])
    def test_vector_leg_returns_min_depth_visible_hits(
        self, sparse: World, pid: str, visible: int, depth: int
    ) -> None:
        vis = sparse.searcher.visibility(sparse.who(pid))
        hits = sparse.backend.search(
            LegQuery(vis, Filters(), None, [float(x) for x in axis(0)], depth)
        ).vector
        allowed = set(self._visible(sparse, pid))
        assert len(hits) == min(depth, visible)
        assert {h.id for h in hits} <= allowed
        sims = [h.score for h in hits]
        assert sims == sorted(sims, reverse=True)  # nearest visible first

    def test_searcher_vector_mode_returns_every_visible_item(self, sparse: World) -> None:
        wide = sparse.with_settings(candidate_depth=4, meaning_margin=2.0, meaning_floor=-1.0)
        assert set(wide.ids("prn_o", "needle", mode="vector")) == set(
            self._visible(sparse, "prn_o")
        )
        wide = sparse.with_settings(candidate_depth=10, meaning_margin=2.0, meaning_floor=-1.0)
        assert set(wide.ids("prn_p", "needle", mode="vector", limit=25)) == set(
            self._visible(sparse, "prn_p")
        )

    def test_hybrid_search_returns_only_visible_items(self, sparse: World) -> None:
        resp = sparse.search("prn_p", "needle report", limit=25)
        assert {r.id for r in resp.results} == set(self._visible(sparse, "prn_p"))
        assert resp.total == 10


class FusionRules:
    """DESIGN 3.2: reciprocal rank fusion, k = 60, both legs beat one; explain shows the parts."""

    @pytest.fixture(scope="class")
    @classmethod
    def legs(cls, make_searcher: MakeSearcher) -> World:
        both = item("itm_both", "Notes", "an alpha mention")  # text rank 2, vector rank 1
        text_only = item("itm_text", "Alpha alpha", "alpha first")  # text rank 1, far in meaning
        vec_only = item("itm_vec", "Unrelated words", "nothing shared")  # vector rank 2
        fillers = [item(f"itm_fill{n}", f"Filler {n}", "other matter") for n in range(4)]
        emb = KeyedEmbedder(
            [
                ("alpha", axis(0)),
                (both, axis(0)),
                (text_only, axis(2)),
                (vec_only, blend(0, 3, 0.95)),
            ]
        )
        for n, f in enumerate(fillers):
            emb.set(f, axis(10 + n))
        # depth 2: the vector leg holds only itm_both and itm_vec, so itm_text is text-only.
        return make_searcher(
            [both, text_only, vec_only, *fillers],
            [principal("prn_p")],
            embedder=emb,
            candidate_depth=2,
            vector_weight=1.0,  # equal legs: the shares below are plain 1 / (k + rank)
        )

    def test_found_by_both_legs_outranks_a_single_leg(self, legs: World) -> None:
        assert legs.ids("prn_p", "alpha") == ["itm_both", "itm_text", "itm_vec"]

    def test_default_k_is_60_and_explain_shows_each_leg(self, legs: World) -> None:
        assert legs.settings.rrf_k == 60
        ex = _explain(legs, "prn_p", "alpha")
        both, text, vec = ex["itm_both"], ex["itm_text"], ex["itm_vec"]
        assert (both.text_rank, both.vector_rank) == (2, 1)
        assert both.rrf == pytest.approx(1 / 62 + 1 / 61)
        assert both.text_share == pytest.approx(1 / 62)
        assert both.vector_share == pytest.approx(1 / 61)
        assert both.vector_similarity == pytest.approx(1.0, abs=1e-4)
        assert (text.text_rank, text.vector_rank, text.vector_similarity) == (1, None, None)
        assert text.rrf == pytest.approx(1 / 61) and text.vector_share == 0.0
        assert (vec.text_rank, vec.vector_rank) == (None, 2)
        assert vec.vector_similarity == pytest.approx(0.95, abs=1e-4)
        assert vec.rrf == pytest.approx(1 / 62) and vec.text_share == 0.0
        for e in ex.values():
            assert e.text_share + e.vector_share == pytest.approx(e.rrf)
            assert e.score == pytest.approx(e.rrf * e.outcome_weight)
        assert (both.kept, text.kept, vec.kept) == (
            "word-match",
            "word-match",
            "meaning-within-margin",
        )

    def test_the_shipped_leg_weights_rank_the_text_only_hit_first(self, legs: World) -> None:
        """The shipped defaults (not the equal weights above): a text-only hit at text rank 1
        outranks a vector-only hit at vector rank 2, and only because of the weights: with
        the two swapped the vector-only hit comes first."""
        text_w = Settings.model_fields["text_weight"].default
        vector_w = Settings.model_fields["vector_weight"].default
        shipped = legs.with_settings(text_weight=text_w, vector_weight=vector_w)
        ids = shipped.ids("prn_p", "alpha")
        assert ids.index("itm_text") < ids.index("itm_vec"), ids
        ex = _explain(shipped, "prn_p", "alpha")
        assert ex["itm_text"].rrf == pytest.approx(text_w / 61)
        assert ex["itm_vec"].rrf == pytest.approx(vector_w / 62)
        swapped = legs.with_settings(text_weight=vector_w, vector_weight=text_w)
        ids = swapped.ids("prn_p", "alpha")
        assert ids.index("itm_vec") < ids.index("itm_text"), ids

    def test_k_is_configurable(self, legs: World) -> None:
        ex = _explain(legs.with_settings(rrf_k=1), "prn_p", "alpha")
        assert ex["itm_both"].rrf == pytest.approx(1 / 3 + 1 / 2)
        assert ex["itm_text"].rrf == pytest.approx(1 / 2)

    def test_explain_only_on_request(self, legs: World) -> None:
        assert all(r.explain is None for r in legs.search("prn_p", "alpha").results)


# DESIGN 3.3, written out: approved and completed first, in-progress a little lower, then
# superseded, then rejected, failed and abandoned (within a step the order is not specified).
LADDER = {
    "approved": 0,
    "completed": 0,
    "in-progress": 1,
    "superseded": 2,
    "rejected": 3,
    "failed": 3,
    "abandoned": 3,
}


class OutcomeRules:
    """DESIGN 3.3: outcome weights are multiplicative; lower outcomes sink but never vanish."""

    @pytest.fixture(scope="class")
    @classmethod
    def outcomes(cls, make_searcher: MakeSearcher) -> World:
        # The rejected item is the better match in both legs; the approved one must still lead.
        rejected = item("itm_rej", "Deploy checklist", "deploy deploy deploy", outcome="rejected")
        approved = item("itm_app", "Deploy notes", "", outcome="approved")
        ladder = [item(f"itm_l_{o}", "Rollout ladder", "rollout step", outcome=o) for o in OUTCOMES]
        emb = KeyedEmbedder(
            [("deploy", axis(0)), (rejected, axis(0)), (approved, blend(0, 1, 0.99))]
        )
        return make_searcher([rejected, approved, *ladder], [principal("prn_p")], embedder=emb)

    def test_approved_ranks_before_a_more_relevant_rejected_item(self, outcomes: World) -> None:
        ex = _explain(outcomes, "prn_p", "deploy")
        assert outcomes.ids("prn_p", "deploy")[:2] == ["itm_app", "itm_rej"]
        assert ex["itm_rej"].rrf > ex["itm_app"].rrf  # it was the better match before weighing
        assert ex["itm_app"].outcome_weight == DEFAULT_OUTCOME_WEIGHTS["approved"]
        assert ex["itm_rej"].outcome_weight == DEFAULT_OUTCOME_WEIGHTS["rejected"]

    def test_equal_matches_follow_the_outcome_ladder_and_none_is_hidden(
        self, outcomes: World
    ) -> None:
        resp = outcomes.search("prn_p", "rollout", explain=True, limit=25)
        got = [r.outcome for r in resp.results if r.id.startswith("itm_l_")]
        assert sorted(got) == sorted(OUTCOMES)  # failed, abandoned, rejected all still there
        assert set(LADDER) == set(OUTCOMES)
        steps = [LADDER[o] for o in got]  # type: ignore[index]
        assert steps == sorted(steps)
        browsed = {r.outcome for r in outcomes.search("prn_p", "", limit=25).results}
        assert {"failed", "abandoned", "rejected"} <= browsed

    def test_weights_are_configurable(self, outcomes: World) -> None:
        flipped = {**DEFAULT_OUTCOME_WEIGHTS, "rejected": 2.0}
        assert (
            outcomes.with_settings(outcome_weights=flipped).ids("prn_p", "deploy")[0] == "itm_rej"
        )


class KeepRules:
    """DESIGN 3.4-3.5: the meaning-only margin and the common-word rule."""

    @pytest.fixture(scope="class")
    @classmethod
    def meaning(cls, make_searcher: MakeSearcher) -> World:
        word = item("itm_word", "Zebra", "")  # the exact word, but a poor vector
        best = item("itm_best", "Striped horse", "savanna grazer")
        near = item("itm_near", "Savanna animal", "wild herd")
        mid = item("itm_mid", "Garden hose", "watering")
        far = item("itm_far", "Tax forms", "filing")
        the_all = item("itm_the", "On the hill", "the view from the hill")
        only_the = item("itm_only_the", "The", "the the")
        deploy = item("itm_deploy", "Deploy runbook", "steps to ship safely")
        emb = KeyedEmbedder(
            [
                ("zebra", axis(0)),
                (word, axis(1)),
                (best, axis(0)),
                (near, blend(0, 2, 0.95)),
                (mid, blend(0, 3, 0.85)),
                (far, blend(0, 4, 0.5)),
                ("the deploy", axis(20)),
                (deploy, axis(20)),
                (only_the, blend(20, 21, 0.95)),
                (the_all, axis(22)),
            ]
        )
        items = [word, best, near, mid, far, the_all, only_the, deploy]
        return make_searcher(items, [principal("prn_p")], embedder=emb)

    def test_meaning_only_matches_must_be_near_the_best(self, meaning: World) -> None:
        narrow = meaning.with_settings(meaning_margin=0.1)
        resp = narrow.search("prn_p", "zebra", explain=True, limit=25)
        kept = {r.id: r.explain.kept for r in resp.results if r.explain}
        assert kept["itm_word"] == "word-match"  # poor vector, kept for its word
        assert kept["itm_best"] == "meaning-within-margin"
        assert kept["itm_near"] == "meaning-within-margin"  # 0.95 >= 1.0 - 0.1
        assert "itm_mid" not in kept and "itm_far" not in kept  # 0.85 and 0.5: too far
        assert resp.total == len(resp.results)

    def test_the_margin_is_configurable(self, meaning: World) -> None:
        ids = set(meaning.with_settings(meaning_margin=0.2).ids("prn_p", "zebra", limit=25))
        assert {"itm_mid", "itm_near", "itm_best", "itm_word"} <= ids and "itm_far" not in ids
        ids = set(meaning.with_settings(meaning_margin=0.6).ids("prn_p", "zebra", limit=25))
        assert "itm_far" in ids

    def test_a_lone_common_word_matches_items_containing_it(self, meaning: World) -> None:
        ex = _explain(meaning, "prn_p", "the")
        assert ex["itm_the"].kept == "word-match"
        assert ex["itm_only_the"].kept == "word-match"
        for other in ("itm_deploy", "itm_best", "itm_word"):
            assert other not in ex or ex[other].kept != "word-match"
        snippets = {r.id: r.snippet for r in meaning.search("prn_p", "the", limit=25).results}
        assert "<mark>the</mark>" in snippets["itm_the"].lower()

    def test_a_common_word_beside_another_word_is_not_a_match(self, meaning: World) -> None:
        ex = _explain(meaning, "prn_p", "the deploy")
        assert ex["itm_deploy"].kept == "word-match"
        # "the" alone does not make a word match: this item is kept only for its meaning ...
        assert ex["itm_only_the"].text_rank is None
        assert ex["itm_only_the"].kept == "meaning-within-margin"
        # ... and an item sharing only "the" and far in meaning is not there at all.
        assert "itm_the" not in ex
