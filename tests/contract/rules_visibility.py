"""Contract rules of DESIGN.md section 2: one visibility rule on every read path."""

from __future__ import annotations

import json

import pytest

from suli.backends.base import LegQuery
from suli.errors import NotFound
from suli.models import Filters, Item
from suli.render import facets_json, item_json, response_json, result_json
from suli.service import Card
from suli.visibility import can_see, visibility_for

from .helpers import (
    OTHER_WS,
    WS,
    MakeSearcher,
    World,
    acl,
    axis,
    blend,
    expected_facets,
    facet_dict,
    item,
    principal,
)

Q = "zebra"  # every item of the cast mentions it, so only visibility decides what comes back


def _it(item_id: str, n: int, **fields: object) -> Item:
    """A cast member whose agent, station and tag are its own, so a facet leak names it."""
    return item(
        item_id,
        f"Zebra plan {item_id}",
        f"Field notes about the zebra herd, written for {item_id}.",
        agent=f"prn_agent_{item_id}",
        stations=[{"id": f"st_{item_id}", "name": f"Station {item_id}"}],
        tags=[f"tag_{item_id}"],
        **fields,
    )


CAST = [
    _it("itm_ws", 0, outcome="approved"),
    _it("itm_team", 1, board="brd_team", outcome="completed"),
    _it("itm_ops", 2, board="brd_ops", outcome="in-progress"),
    _it("itm_secret", 3, board="brd_secret", outcome="abandoned"),
    _it("itm_noacl", 4, board="brd_noacl"),  # a board without an ACL: nobody sees it
    _it("itm_up_alice", 5, uploader="prn_alice", outcome="rejected"),
    _it("itm_up_bob", 6, uploader="prn_bob", outcome="failed"),
    _it("itm_other", 7, workspace=OTHER_WS, outcome="superseded"),
    _it("itm_other_up_carol", 8, workspace=OTHER_WS, uploader="prn_carol"),
    _it("itm_hidden", 9, hidden=True),
    # supersession: a visible replacement, an invisible one, a missing one
    _it("itm_old_a", 10, superseded_by="itm_ws", outcome="superseded"),
    _it("itm_old_b", 11, superseded_by="itm_secret", outcome="superseded"),
    _it("itm_old_c", 12, superseded_by="itm_gone"),
    # references: visible to some, invisible to others, and a URL
    _it("itm_refs", 13, references=["itm_team", "itm_secret", "itm_ws", "https://example.com/doc"]),
]
PRINCIPALS = [
    principal("prn_alice", "g_eng"),
    principal("prn_bob", "g_ops"),
    principal("prn_carol", "g_none"),
    principal("prn_dave"),
    principal("prn_olga", "g_ops", workspace=OTHER_WS),
]
ACLS = [
    acl("brd_team", members=["prn_alice"]),
    acl("brd_ops", groups=["g_ops"]),
    # Lists a principal of another workspace: must not open the board to her.
    acl("brd_secret", members=["prn_dave", "prn_olga"]),
]
WS_WIDE = {"itm_ws", "itm_old_a", "itm_old_b", "itm_old_c", "itm_refs"}
# Written out by hand (not derived from suli.visibility) so the rule is checked independently.
EXPECTED = {
    "prn_alice": WS_WIDE | {"itm_team", "itm_up_alice"},
    "prn_bob": WS_WIDE | {"itm_ops", "itm_up_bob"},
    "prn_carol": set(WS_WIDE),
    "prn_dave": WS_WIDE | {"itm_secret"},
    "prn_olga": {"itm_other"},
}
HIDDEN_SEEN_BY = {"prn_alice", "prn_bob", "prn_carol", "prn_dave"}  # itm_hidden is workspace-wide
# Items nobody in the main workspace may see sit exactly on the query's meaning (similarity 1);
# the others a little off it (0.97). A post-filtered k-NN would fill its k with the former.
NEAREST = {"itm_secret", "itm_noacl", "itm_other", "itm_other_up_carol"}
BY_ID = {it.id: it for it in CAST}


def _invisible_strings(pid: str, include_hidden: bool = False) -> list[str]:
    """Ids, agents, stations and tags of the items pid may not see."""
    seen = EXPECTED[pid] | ({"itm_hidden"} if include_hidden and pid in HIDDEN_SEEN_BY else set())
    out: list[str] = []
    for it in CAST:
        if it.id not in seen:
            out += [it.id, it.agent or "", *(s.name for s in it.stations), *it.tags]
    return [s for s in out if s]


def _dump(obj: object) -> str:
    return json.dumps(obj, default=str)


class VisibilityRules:
    """DESIGN 2: who sees what, applied inside both legs and on every read path."""

    @pytest.fixture(scope="class")
    @classmethod
    def cast(cls, make_searcher: MakeSearcher) -> World:
        from .helpers import KeyedEmbedder

        emb = KeyedEmbedder([(Q, axis(0))])
        for n, it in enumerate(CAST, start=1):
            emb.set(it, axis(0) if it.id in NEAREST else blend(0, n, 0.97))
        return make_searcher(CAST, PRINCIPALS, ACLS, embedder=emb)

    def test_the_hand_written_table_is_the_rule(self) -> None:
        """Guards the test itself: EXPECTED agrees with suli.visibility.can_see."""
        for p in PRINCIPALS:
            vis = visibility_for(p, ACLS)
            got = {it.id for it in CAST if can_see(vis, it) and not it.hidden}
            assert got == EXPECTED[p.id], p.id

    @pytest.mark.parametrize("mode", ["hybrid", "text", "vector"])
    def test_search_returns_exactly_the_visible_items(self, cast: World, mode: str) -> None:
        for pid, expected in EXPECTED.items():
            resp = cast.search(pid, Q, mode=mode, limit=25)
            assert {r.id for r in resp.results} == expected, (pid, mode)
            assert resp.total == len(expected), (pid, mode)

    def test_vector_leg_filters_inside_knn(self, cast: World) -> None:
        """k = number of visible items while invisible items are nearer: all k are visible."""
        for pid, expected in EXPECTED.items():
            vis = visibility_for(cast.who(pid), cast.backend.acls(cast.who(pid).workspace))
            q = LegQuery(vis, Filters(), None, [float(x) for x in axis(0)], depth=len(expected))
            hits = cast.backend.search(q).vector
            assert {h.id for h in hits} == expected, pid
            narrow = cast.with_settings(candidate_depth=len(expected), meaning_margin=2.0)
            assert set(narrow.ids(pid, Q, mode="vector", limit=25)) == expected, pid

    def test_browse_returns_exactly_the_visible_items(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            resp = cast.search(pid, "", limit=25)
            assert {r.id for r in resp.results} == expected, pid
            assert resp.total == len(expected), pid

    def test_hidden_items_only_on_request_and_only_when_visible(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            want = expected | ({"itm_hidden"} if pid in HIDDEN_SEEN_BY else set())
            assert set(cast.ids(pid, Q, include_hidden=True, limit=25)) == want, pid
            assert set(cast.ids(pid, "", include_hidden=True, limit=25)) == want, pid

    def test_facet_values_and_counts_come_from_visible_items_only(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            f = cast.facets(pid)
            assert facet_dict(f) == expected_facets(BY_ID[i] for i in expected), pid
            assert f.total == len(expected), pid

    def test_get_finds_visible_items_and_not_invisible_ones(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            readable = expected | ({"itm_hidden"} if pid in HIDDEN_SEEN_BY else set())
            for it in CAST:
                if it.id in readable:
                    got, res = cast.get(pid, it.id)
                    assert got.id == res.id == it.id
                else:
                    with pytest.raises(NotFound):
                        cast.get(pid, it.id)
            with pytest.raises(NotFound):
                cast.get(pid, "itm_never_stored")

    def test_get_lists_only_visible_references(self, cast: World) -> None:
        got, _ = cast.get("prn_carol", "itm_refs")
        assert got.references == ("itm_ws", "https://example.com/doc")
        got, _ = cast.get("prn_alice", "itm_refs")
        assert got.references == ("itm_team", "itm_ws", "https://example.com/doc")
        got, _ = cast.get("prn_dave", "itm_refs")
        assert got.references == ("itm_secret", "itm_ws", "https://example.com/doc")

    def test_superseded_by_names_only_a_visible_replacement(self, cast: World) -> None:
        for pid in ("prn_carol", "prn_dave"):
            shown = {r.id: r for r in cast.search(pid, Q, limit=25).results}
            browsed = {r.id: r for r in cast.search(pid, "", limit=25).results}
            gets = {i: cast.get(pid, i)[1] for i in ("itm_old_a", "itm_old_b", "itm_old_c")}
            for results in (shown, browsed, gets):
                assert results["itm_old_a"].superseded_by == "itm_ws"
                assert results["itm_old_a"].superseded is True
                want_b = "itm_secret" if pid == "prn_dave" else None
                assert results["itm_old_b"].superseded_by == want_b, pid
                assert results["itm_old_b"].superseded is True
                assert results["itm_old_c"].superseded_by is None  # replacement never stored
                assert results["itm_old_c"].superseded is True
        got, res = cast.get("prn_carol", "itm_old_b")
        assert got.superseded_by is None
        assert "itm_secret" not in _dump(item_json(got, res))

    def test_related_returns_only_visible_items(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            src = sorted(expected)[0]
            resp = cast.related(pid, src, limit=25)
            assert {r.id for r in resp.results} <= expected - {src}, pid
            assert bool(resp.results) == (len(expected) > 1), pid  # the rest of the cast is related
            assert resp.total <= len(expected) - 1, pid
            card = cast.related(
                pid, card=Card("Zebra plan", "Field notes about the zebra herd"), limit=25
            )
            assert {r.id for r in card.results} == expected, pid
            assert card.total == len(expected), pid

    def test_related_of_an_invisible_item_is_not_found(self, cast: World) -> None:
        for pid, expected in EXPECTED.items():
            for it in CAST:
                if it.id not in expected and it.id != "itm_hidden":
                    with pytest.raises(NotFound):
                        cast.related(pid, it.id)

    def test_a_card_never_pulls_in_invisible_references(self, cast: World) -> None:
        card = Card("Zebra plan", "zebra", references=("itm_secret", "itm_team", "itm_ws"))
        resp = cast.related("prn_carol", card=card, limit=25)
        ids = [r.id for r in resp.results]
        assert ids[0] == "itm_ws"  # the one visible direct reference comes first
        assert "itm_secret" not in ids and "itm_team" not in ids

    def test_no_invisible_item_appears_in_any_form(self, cast: World) -> None:
        """Rendered bodies of every read path carry no id, agent, station or tag of an invisible item."""
        for pid, expected in EXPECTED.items():
            bodies = [
                response_json(cast.search(pid, Q, explain=True, limit=25)),
                response_json(cast.search(pid, Q, mode="vector", explain=True, limit=25)),
                response_json(cast.search(pid, "", limit=25)),
                facets_json(cast.facets(pid)),
                response_json(cast.related(pid, card=Card("Zebra plan", "zebra herd"), limit=25)),
            ]
            for i in sorted(expected):
                got, res = cast.get(pid, i)
                bodies.append(item_json(got, res))
                bodies.append(result_json(res))
            for i in ("itm_refs", "itm_old_b", sorted(expected)[0]):  # references, a replacement
                if i in expected:
                    bodies.append(response_json(cast.related(pid, i, explain=True, limit=25)))
            text = _dump(bodies)
            leaks = [s for s in _invisible_strings(pid) if s in text]
            assert not leaks, (pid, leaks)


class AclChangeRules:
    """DESIGN 2: the filter is built per query from the current ACLs; no reindexing needed."""

    def test_membership_changes_apply_on_the_next_query(self, make_searcher: MakeSearcher) -> None:
        w = make_searcher(
            [
                item("itm_board", "Quarterly zebra census", board="brd_x"),
                item("itm_open", "Zebra open notes"),
            ],
            [principal("prn_p", "g_one")],
            [acl("brd_x", members=["prn_q"])],
        )
        count = w.backend.count()

        def sees() -> tuple[bool, bool, bool, bool]:
            in_search = "itm_board" in w.ids("prn_p", "zebra")
            in_browse = "itm_board" in w.ids("prn_p")
            in_facets = "brd_x" in facet_dict(w.facets("prn_p")).get("board", {})
            try:
                w.get("prn_p", "itm_board")
                in_get = True
            except NotFound:
                in_get = False
            return in_search, in_browse, in_facets, in_get

        # No refresh between the ACL writes and the queries: the next query must see them.
        assert sees() == (False,) * 4
        assert w.backend.acl(WS, "brd_x") == acl("brd_x", members=["prn_q"])
        assert w.backend.acl(WS, "brd_absent") is None
        assert w.backend.acl(OTHER_WS, "brd_x") is None  # a board id is per workspace
        w.backend.put_acls([acl("brd_x", members=["prn_q", "prn_p"])])
        assert sees() == (True,) * 4
        w.backend.put_acls([acl("brd_x", members=["prn_q"], groups=["g_one"])])
        assert sees() == (True,) * 4
        w.backend.put_acls([acl("brd_x", members=["prn_q"], groups=["g_two"])])
        assert sees() == (False,) * 4
        w.backend.put_principals([principal("prn_p", "g_two")])
        assert sees() == (True,) * 4
        w.backend.put_acls([acl("brd_x")])
        assert sees() == (False,) * 4
        assert w.backend.count() == count  # nothing was reindexed

    def test_a_delete_is_gone_from_every_read_once_it_is_answered(
        self, make_searcher: MakeSearcher
    ) -> None:
        """A delete is often a takedown (#33): once answered, no search, browse, get, count or
        facet finds the item, with no refresh in between."""
        w = make_searcher(
            [
                item("itm_gone", "Zebra takedown notice", tags=["takedown"]),
                item("itm_stays", "Zebra field notes"),
            ],
            [principal("prn_p")],
        )
        assert "itm_gone" in w.ids("prn_p", "zebra")
        out = w.backend.delete(WS, ["itm_gone"])
        assert out.indexed == ("itm_gone",)
        # No refresh: every read below runs right after the delete is answered.
        for mode in ("text", "hybrid", "vector"):
            resp = w.search("prn_p", "zebra takedown", mode=mode, limit=25)
            assert "itm_gone" not in [r.id for r in resp.results], mode
        assert w.search("prn_p", "zebra", mode="text").total == 1
        assert w.ids("prn_p") == ["itm_stays"]  # browse
        assert "tag" not in facet_dict(w.facets("prn_p"))
        with pytest.raises(NotFound):
            w.get("prn_p", "itm_gone")

    def test_a_session_reads_the_tokens_principal_and_current_acls(
        self, make_searcher: MakeSearcher
    ) -> None:
        from suli.auth import create_token, hash_token, revoke_token

        w = make_searcher(
            [], [principal("prn_p", "g_one"), principal("prn_o", workspace=OTHER_WS)],
            [acl("brd_x", members=["prn_p"]), acl("brd_o", workspace=OTHER_WS)],
        )  # fmt: skip
        token = create_token(w.backend, "prn_p", admin=True)
        w.refresh()
        session = w.backend.session(hash_token(token))
        assert session is not None and session.admin
        assert session.principal == principal("prn_p", "g_one")
        # Where the store reads the ACLs with the token: its workspace's only, and current.
        read = session.acls is not None
        assert not read or set(session.acls or ()) == {acl("brd_x", members=["prn_p"])}
        w.backend.put_acls([acl("brd_y", groups=["g_one"])])
        w.backend.put_principals([principal("prn_p", "g_two")])
        session = w.backend.session(hash_token(token))
        assert session is not None and session.principal == principal("prn_p", "g_two")
        assert not read or {a.board for a in session.acls or ()} == {"brd_x", "brd_y"}
        assert (session.acls is not None) == read  # no refresh needed
        assert w.backend.session(hash_token("suli_not_a_token")) is None
        revoke_token(w.backend, token)
        assert w.backend.session(hash_token(token)) is None
