"""Contract rules: each workspace has its own id space.

Ids of items and boards are keys within a workspace: two workspaces using the same id never
touch each other's data, whatever the timing, and no answer tells one workspace about another.
"""

from __future__ import annotations

import threading
from typing import Any

from app.routes_admin import _ingest
from suli.errors import NotFound
from suli.render import response_json
from suli.visibility import Visibility

from .helpers import OTHER_WS, WS, MakeSearcher, World, acl, item, principal

ROUNDS = 25  # the race lost an item in about half the rounds before ids were per workspace


def _raw(item_id: str, workspace: str, title: str, **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "workspace": workspace, "title": title, "body": title, **fields}


def _world(make_searcher: MakeSearcher) -> World:
    return make_searcher(
        [],
        [principal("prn_a_admin"), principal("prn_b_admin", workspace=OTHER_WS)],
    )


class TenantRules:
    def test_two_workspaces_posting_the_same_new_id_at_once_both_keep_their_item(
        self, make_searcher: MakeSearcher
    ) -> None:
        """Both admins get "indexed" and both items exist afterwards, each only in its own
        workspace (the admin route's own code, two threads released together per round)."""
        w = _world(make_searcher)
        admins = {WS: w.who("prn_a_admin"), OTHER_WS: w.who("prn_b_admin")}
        answers: dict[tuple[int, str], dict[str, Any]] = {}
        gate = threading.Barrier(2)

        def post(n: int, ws: str) -> None:
            gate.wait()
            raw = [_raw(f"itm_race_{n}", ws, f"Race {n} of {ws}")]
            answers[(n, ws)] = _ingest(w.searcher, admins[ws], raw, False)

        for n in range(ROUNDS):
            threads = [threading.Thread(target=post, args=(n, ws)) for ws in admins]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        w.refresh()
        refused = sorted(k for k, a in answers.items() if a["indexed"] != 1)
        lost = []
        ids = [f"itm_race_{n}" for n in range(ROUNDS)]
        for ws in admins:
            got = w.backend.get_many(Visibility(ws, "prn_x", frozenset()), ids)
            # Each workspace sees exactly its own item under every id: none lost, none foreign.
            lost += [(ws, i) for i in ids if i not in got]
            assert all(it.workspace == ws and it.title.endswith(ws) for it in got.values())
        assert (refused, lost) == ([], []), (
            f"{len(refused)} refused, {len(lost)} of {2 * ROUNDS} lost: {refused[:3]} {lost[:3]}"
        )
        assert w.backend.count() == 2 * ROUNDS

    def test_the_same_item_id_in_two_workspaces_is_two_items(
        self, make_searcher: MakeSearcher
    ) -> None:
        """Search, get, related and delete resolve an id in the caller's workspace only."""
        w = make_searcher(
            [
                item("itm_twin", "Zebra twin of main", references=["itm_ref"]),
                item("itm_ref", "Zebra reference of main"),
                item("itm_twin", "Zebra twin of other", workspace=OTHER_WS),
                item("itm_ref", "Zebra reference of other", workspace=OTHER_WS),
                # Replaced by an id only the other workspace holds: never named here.
                item("itm_old", "Old zebra", outcome="superseded", superseded_by="itm_repl"),
                item("itm_repl", "Zebra replacement", workspace=OTHER_WS),
            ],
            [principal("prn_a"), principal("prn_b", workspace=OTHER_WS)],
        )
        assert w.get("prn_a", "itm_twin")[0].title == "Zebra twin of main"
        assert w.get("prn_b", "itm_twin")[0].title == "Zebra twin of other"
        got = w.search("prn_a", "zebra", limit=25).results
        assert sorted(r.title for r in got) == [
            "Old zebra", "Zebra reference of main", "Zebra twin of main"
        ]  # fmt: skip
        assert {r.id: r.superseded_by for r in got}["itm_old"] is None
        assert w.get("prn_a", "itm_old")[0].superseded_by is None
        got = w.search("prn_b", "zebra", limit=25).results
        assert sorted(r.title for r in got) == [
            "Zebra reference of other", "Zebra replacement", "Zebra twin of other"
        ]  # fmt: skip
        # Related of main's twin names main's reference (direct) and never the other's.
        rel = w.related("prn_a", "itm_twin", limit=5).results
        assert [r.title for r in rel][:1] == ["Zebra reference of main"]
        assert all("other" not in r.title for r in rel)
        # Delete is per workspace too, and says which ids it did not find.
        out = w.backend.delete(OTHER_WS, ["itm_twin", "itm_nowhere"])
        assert (out.indexed, out.missing) == (("itm_twin",), ("itm_nowhere",))
        w.refresh()
        assert w.get("prn_a", "itm_twin")[0].title == "Zebra twin of main"
        try:
            w.get("prn_b", "itm_twin")
            raise AssertionError("deleted item still found")
        except NotFound:
            pass
        out = w.backend.delete(OTHER_WS, ["itm_twin"])
        assert (out.indexed, out.missing) == ((), ("itm_twin",))
        assert w.get("prn_a", "itm_twin")[0].title == "Zebra twin of main"

    def test_a_board_id_is_per_workspace_and_cannot_be_squatted(
        self, make_searcher: MakeSearcher
    ) -> None:
        """Workspace B's items sit on brd_shared before B writes its ACL; A writing an ACL of
        the same board id first neither locks B out nor lets A's members in."""
        w = make_searcher(
            [
                item("itm_b_board", "Zebra plan on B's board", board="brd_shared",
                     workspace=OTHER_WS),
                item("itm_a_board", "Zebra plan on A's board", board="brd_shared"),
            ],
            [principal("prn_a"), principal("prn_b", workspace=OTHER_WS),
             principal("prn_b2", workspace=OTHER_WS)],
        )  # fmt: skip
        w.backend.put_acls([acl("brd_shared", members=["prn_a", "prn_b"])])  # A's, first
        w.backend.put_acls([acl("brd_shared", members=["prn_b2"], workspace=OTHER_WS)])
        assert w.backend.acl(WS, "brd_shared") == acl("brd_shared", members=["prn_a", "prn_b"])
        assert w.backend.acl(OTHER_WS, "brd_shared") == acl(
            "brd_shared", members=["prn_b2"], workspace=OTHER_WS
        )
        assert w.backend.acl(OTHER_WS, "brd_absent") is None
        assert w.ids("prn_a", "zebra") == ["itm_a_board"]
        assert w.ids("prn_b2", "zebra") == ["itm_b_board"]
        assert w.ids("prn_b", "zebra") == []  # A's ACL naming prn_b gives B's member nothing
        assert {a.board for a in w.backend.acls(OTHER_WS)} == {"brd_shared"}

    def test_two_workspaces_claiming_one_principal_id_at_once_get_one_owner(
        self, make_searcher: MakeSearcher
    ) -> None:
        """Principal ids stay global (a token names its principal by id): the ownership check
        and the write are one step, so exactly one workspace wins and nothing is moved."""
        w = _world(make_searcher)
        gate = threading.Barrier(2)
        won: dict[tuple[int, str], bool] = {}

        def claim(n: int, ws: str) -> None:
            gate.wait()
            won[(n, ws)] = w.backend.claim_principal(principal(f"prn_race_{n}", ws, workspace=ws))

        for n in range(ROUNDS):
            threads = [threading.Thread(target=claim, args=(n, ws)) for ws in (WS, OTHER_WS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for n in range(ROUNDS):
            winners = [ws for ws in (WS, OTHER_WS) if won[(n, ws)]]
            assert len(winners) == 1, (n, winners)
            assert w.backend.principal(f"prn_race_{n}") == principal(
                f"prn_race_{n}", winners[0], workspace=winners[0]
            )
        # The owner may still change its own principal; the other still may not.
        owner = w.backend.principal("prn_race_0")
        assert owner is not None
        assert w.backend.claim_principal(
            principal("prn_race_0", "g_new", workspace=owner.workspace)
        )
        other = OTHER_WS if owner.workspace == WS else WS
        assert not w.backend.claim_principal(principal("prn_race_0", workspace=other))
        assert w.backend.principal("prn_race_0") == principal(
            "prn_race_0", "g_new", workspace=owner.workspace
        )


class ExplainRules:
    """Explain shows ranks, shares, weights and gates, never a raw text
    (BM25) score, which is made of corpus statistics over items the caller cannot see."""

    def test_text_explain_is_the_same_whatever_other_workspaces_hold(
        self, make_searcher: MakeSearcher
    ) -> None:
        # Equal lengths, different term counts: the order cannot depend on corpus statistics.
        w = make_searcher(
            [
                item("itm_three", "Quokka quokka quokka notes", "filler words here"),
                item("itm_one", "Quokka field notes", "filler words here"),
            ],
            [principal("prn_a")],
        )

        def explained() -> list[dict[str, Any]]:
            body = response_json(w.search("prn_a", "quokka", mode="text", explain=True))
            return [{k: r[k] for k in ("id", "score", "snippet", "explain")}
                    for r in body["results"]]  # fmt: skip

        before = explained()
        assert [r["id"] for r in before] == ["itm_three", "itm_one"]
        for r in before:
            assert set(r["explain"]) == EXPLAIN_FIELDS, r["explain"]  # no raw text score
            assert r["explain"]["vector_similarity"] is None  # text mode: no vector leg
        # Another workspace adds many items with the word: invisible, and without effect here.
        w.load(
            [item(f"itm_b{n}", f"Quokka census {n}", "quokka " * (n % 5), workspace=OTHER_WS)
             for n in range(30)]
        )  # fmt: skip
        assert explained() == before


# The explain block: ranks, fusion shares, outcome weight, the gate that kept the result, and
# the vector leg's cosine (query against item: no corpus statistics in it).
EXPLAIN_FIELDS = {
    "text_rank", "vector_rank", "vector_similarity", "rrf", "text_share", "vector_share",
    "outcome_weight", "score", "kept",
}  # fmt: skip
