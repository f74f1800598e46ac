"""DESIGN 2 through the Searcher over the in-memory backend: who sees what, on every read path.

The expected sets are written out by hand (the scenario) or computed by `sees` below (the
property), never by suli.visibility: a bug in the product's rule cannot hide in the answer.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract.helpers import OTHER_WS, WS, World, acl, item, memory_world, principal

from suli.errors import NotFound
from suli.models import BoardAcl, Item, Principal
from suli.render import facets_json, item_json, response_json
from suli.service import Card

# Every gate of the meaning-only rule open: a vector-mode search lists every visible item.
OPEN = {"meaning_margin": 2.0, "meaning_floor": -1.0}

CAST = [
    item("itm_ws", "Zebra for everyone"),
    item("itm_member", "Zebra on a member board", board="brd_m", tags=["t-member"]),
    item("itm_group", "Zebra on a group board", board="brd_g", agent="prn_agent_g"),
    item("itm_secret", "Zebra on a secret board", board="brd_s", tags=["t-secret"]),
    item("itm_noacl", "Zebra on a board with no ACL", board="brd_none"),
    item("itm_mine", "Zebra uploaded by ana", uploader="prn_ana"),
    item("itm_theirs", "Zebra uploaded by bob", uploader="prn_bob", tags=["t-bob"]),
    item("itm_far", "Zebra of another workspace", workspace=OTHER_WS, tags=["t-far"]),
]
PEOPLE = [
    principal("prn_ana", "grp_ops"),
    principal("prn_bob"),
    principal("prn_cid", "grp_ops"),
    principal("prn_eve", "grp_other"),
    principal("prn_dan", workspace=OTHER_WS),
]
ACLS = [
    acl("brd_m", members=["prn_ana"]),
    acl("brd_g", groups=["grp_ops"]),
    acl("brd_s", members=["prn_bob"]),
    acl("brd_g", members=["prn_eve"], workspace=OTHER_WS),  # same board id elsewhere
]
SEES = {
    "prn_ana": {"itm_ws", "itm_member", "itm_group", "itm_mine"},  # member, group, own upload
    "prn_bob": {"itm_ws", "itm_secret", "itm_theirs"},
    "prn_cid": {"itm_ws", "itm_group"},  # through the group only
    "prn_eve": {"itm_ws"},  # listed on brd_g of the other workspace: nothing here
    "prn_dan": {"itm_far"},  # the other workspace's only item
}


@pytest.fixture(scope="module")
def cast() -> World:
    return memory_world(CAST, PEOPLE, ACLS, **OPEN)


@pytest.mark.parametrize("pid", sorted(SEES))
@pytest.mark.parametrize("mode", ["hybrid", "text", "vector"])
def test_search_lists_exactly_what_the_caller_may_see(cast: World, pid: str, mode: str) -> None:
    resp = cast.search(pid, "zebra", mode=mode, limit=25)
    assert {r.id for r in resp.results} == SEES[pid]
    assert resp.total == len(SEES[pid])


@pytest.mark.parametrize("pid", sorted(SEES))
def test_browse_get_facets_and_related_follow_the_same_rule(cast: World, pid: str) -> None:
    browsed = cast.search(pid, "", limit=25)
    assert {r.id for r in browsed.results} == SEES[pid] and browsed.total == len(SEES[pid])
    for it in CAST:
        if it.id in SEES[pid]:
            assert cast.get(pid, it.id)[0].id == it.id
        else:
            with pytest.raises(NotFound):
                cast.get(pid, it.id)
    f = cast.facets(pid)
    assert f.total == len(SEES[pid])
    shown_tags = {v for v, _ in f.values["tag"]}
    assert shown_tags == {t for it in CAST if it.id in SEES[pid] for t in it.tags}
    card = cast.related(pid, card=Card("Zebra", "zebra"), limit=25)
    assert {r.id for r in card.results} == SEES[pid]


def test_a_membership_change_applies_on_the_next_query() -> None:
    w = memory_world(CAST, PEOPLE, ACLS, **OPEN)
    assert "itm_secret" not in {r.id for r in w.search("prn_cid", "zebra", limit=25).results}
    w.backend.put_acls([acl("brd_s", members=["prn_bob"], groups=["grp_ops"])])
    assert "itm_secret" in {r.id for r in w.search("prn_cid", "zebra", limit=25).results}
    w.backend.put_principals([principal("prn_cid")])  # leaves the group
    assert {r.id for r in w.search("prn_cid", "zebra", limit=25).results} == {"itm_ws"}


def test_no_invisible_id_tag_or_agent_appears_in_any_rendered_body(cast: World) -> None:
    for pid, seen in SEES.items():
        unseen = [it for it in CAST if it.id not in seen]
        bodies: list[Any] = [
            response_json(cast.search(pid, "zebra", explain=True, facets=True, limit=25)),
            response_json(cast.search(pid, "", facets=True, limit=25)),
            facets_json(cast.facets(pid)),
        ]
        for i in sorted(seen):
            got, res = cast.get(pid, i)
            bodies.append(item_json(got, res))
        text = repr(bodies)
        for it in unseen:
            for s in (it.id, *it.tags, it.agent):
                if s:
                    assert s not in text, (pid, s)


# ---- property: random worlds against an oracle written here ----------------------------------


def sees(p: Principal, it: Item, acls: list[BoardAcl]) -> bool:
    """DESIGN 2, spelled out again for the test."""
    if it.workspace != p.workspace:
        return False
    if it.board is None and it.uploader is None:
        return True
    if it.board is not None:
        return any(
            a.workspace == p.workspace
            and a.board == it.board
            and (p.id in a.members or any(g in a.groups for g in p.groups))
            for a in acls
        )
    return it.uploader == p.id


_WSS = [WS, OTHER_WS]
_BOARDS = ["brd_0", "brd_1", "brd_2"]
_GROUPS = ["grp_0", "grp_1"]
_PIDS = ["prn_0", "prn_1", "prn_2"]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Item], list[Principal], list[BoardAcl]]:
    people = [
        principal(
            pid,
            *draw(st.lists(st.sampled_from(_GROUPS), unique=True)),
            workspace=draw(st.sampled_from(_WSS)),
        )
        for pid in _PIDS
    ]
    acls = [
        acl(
            b,
            members=draw(st.lists(st.sampled_from(_PIDS), unique=True, max_size=2)),
            groups=draw(st.lists(st.sampled_from(_GROUPS), unique=True, max_size=1)),
            workspace=ws,
        )
        for b in _BOARDS
        for ws in _WSS
        if draw(st.booleans())
    ]
    items = []
    for n in range(draw(st.integers(1, 8))):
        scope = draw(st.sampled_from(["workspace", "board", "personal"]))
        fields: dict[str, Any] = {"workspace": draw(st.sampled_from(_WSS)), "tags": [f"tag-{n}"]}
        if scope == "board":
            fields["board"] = draw(st.sampled_from(_BOARDS))
        elif scope == "personal":
            fields["uploader"] = draw(st.sampled_from(_PIDS))
        items.append(item(f"itm_{n}", f"Zebra number {n}", **fields))
    return items, people, acls


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same examples on every run and machine
    suppress_health_check=[HealthCheck.too_slow],
)
@given(world=worlds())
def test_every_read_path_agrees_with_the_oracle(
    world: tuple[list[Item], list[Principal], list[BoardAcl]],
) -> None:
    items, people, acls = world
    w = memory_world(items, people, acls, **OPEN)
    for p in people:
        want = {it.id for it in items if sees(p, it, acls)}
        assert {r.id for r in w.search(p, "", limit=25).results} == want, p
        hits = w.search(p, "zebra", limit=25, facets=True)
        assert {r.id for r in hits.results} == want, p
        assert hits.total == len(want)
        assert hits.facets is not None and hits.facets.total == len(want)
        assert {v for v, _ in hits.facets.values["tag"]} == {
            t for it in items if it.id in want for t in it.tags
        }
        for i in sorted(it.id for it in items):
            if i in want:
                assert w.get(p, i)[0].id == i
            else:
                with pytest.raises(NotFound):
                    w.get(p, i)
