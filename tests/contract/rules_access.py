"""`suli access` (suli.access): the verdict and its rule, on every backend, and the property
that it says "visible" exactly when a search for the item's title shows it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from suli.access import Access, audience, explain
from suli.errors import NotFound
from suli.models import Principal

from . import oracle
from .helpers import OTHER_WS, WS, MakeSearcher, World, acl, item, principal
from .rules_property import SEED, build, load

ANA = principal("prn_ana", "grp_ops")
BEN = principal("prn_ben", "grp_eng")
CHO = principal("prn_cho")
EVE = principal("prn_eve", "grp_ops", workspace=OTHER_WS)


def _world(make_searcher: MakeSearcher) -> World:
    return make_searcher(
        [
            item("itm_wide", "Workspace handbook"),
            item("itm_pay", "Payments runbook", board="brd_payments"),
            item("itm_legal", "Legal review", board="brd_legal"),
            item("itm_mine", "Cho's notes", uploader="prn_cho"),
            item("itm_draft", "Hidden draft", hidden=True),
            item("itm_old", "Old payments runbook", board="brd_payments", superseded_by="itm_pay"),
            item("itm_gone", "Old legal memo", superseded_by="itm_legal"),
            item("itm_orphan", "Orphan board item", board="brd_noacl"),
            item("itm_elsewhere", "Elsewhere", workspace=OTHER_WS),
        ],
        [ANA, BEN, CHO, EVE],
        [
            acl("brd_payments", ["prn_cho"], ["grp_ops"]),
            acl("brd_legal", ["prn_cho"], ["grp_legal"]),
            acl("brd_payments", [], ["grp_ops"], workspace=OTHER_WS),
        ],
    )


class AccessRules:
    @pytest.fixture(scope="class")
    @classmethod
    def access_world(cls, make_searcher: MakeSearcher) -> World:
        return _world(make_searcher)

    def _why(self, w: World, item_id: str, who: Principal, ws: str = WS) -> Access:
        return explain(w.searcher, ws, item_id, who)

    def test_each_rule_that_grants_is_named(self, access_world: World) -> None:
        w = access_world
        a = self._why(w, "itm_pay", ANA)
        assert (a.verdict.visible, a.verdict.rule, a.verdict.groups) == (
            True,
            "board-group",
            ("grp_ops",),
        )
        assert a.verdict.reason == "board brd_payments lists group grp_ops, which prn_ana holds"
        assert a.verdict.search == "shown"
        c = self._why(w, "itm_pay", CHO).verdict
        assert (c.rule, c.reason) == ("board-member", "board brd_payments lists prn_cho")
        assert self._why(w, "itm_wide", BEN).verdict.rule == "workspace-wide"
        assert self._why(w, "itm_mine", CHO).verdict.rule == "uploader"

    def test_each_refusal_is_named(self, access_world: World) -> None:
        w = access_world
        b = self._why(w, "itm_legal", BEN).verdict
        assert (b.visible, b.rule, b.search) == (False, "board-not-listed", "never")
        assert b.reason == "board brd_legal lists neither prn_ben nor any of their groups (grp_eng)"
        m = self._why(w, "itm_mine", ANA).verdict
        assert (m.visible, m.reason) == (False, "personal upload of prn_cho")
        o = self._why(w, "itm_orphan", ANA).verdict
        assert (o.visible, o.rule) == (False, "board-without-acl")
        # A principal of another workspace, asked about this workspace's item.
        e = self._why(w, "itm_pay", EVE).verdict
        assert (e.visible, e.rule) == (False, "another-workspace")

    def test_reads_that_name_the_item_need_no_walk_over_the_store(
        self, access_world: World, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Lookups by id find board, workspace-wide and personal items (the uploader's read);
        only an item nobody may see is looked for by walking every item."""

        def walk() -> Any:
            raise AssertionError("walked the whole store")

        monkeypatch.setattr(access_world.backend, "all_items", walk)
        for item_id in ("itm_mine", "itm_legal", "itm_wide"):
            assert self._why(access_world, item_id, ANA).item.id == item_id
        assert audience(access_world.searcher, WS, "itm_mine").verdicts[0].principal == "prn_cho"
        with pytest.raises(AssertionError, match="walked"):
            self._why(access_world, "itm_orphan", ANA)

    def test_hidden_and_superseded_say_what_a_search_shows(self, access_world: World) -> None:
        w = access_world
        h = self._why(w, "itm_draft", BEN)
        assert (h.verdict.visible, h.verdict.search) == (True, "hidden")
        old = self._why(w, "itm_old", ANA)  # its replacement itm_pay: ana sees it
        assert old.replacement_visible is True
        gone = self._why(w, "itm_gone", ANA)  # its replacement itm_legal: ana does not
        assert (gone.verdict.visible, gone.replacement_visible) == (True, False)
        assert self._why(w, "itm_pay", ANA).replacement_visible is None  # not superseded

    def test_a_missing_id_and_another_workspaces_item_are_the_same_not_found(
        self, access_world: World
    ) -> None:
        w = access_world
        with pytest.raises(NotFound) as missing:
            self._why(w, "itm_nobody", ANA)
        with pytest.raises(NotFound) as elsewhere:
            self._why(w, "itm_elsewhere", ANA)
        assert str(missing.value).replace("itm_nobody", "X") == str(elsewhere.value).replace(
            "itm_elsewhere", "X"
        )
        with pytest.raises(NotFound):
            audience(w.searcher, WS, "itm_elsewhere")

    def test_the_audience_is_every_principal_who_may_see_it_by_rule(
        self, access_world: World
    ) -> None:
        w = access_world
        pay = audience(w.searcher, WS, "itm_pay")
        assert [(v.rule, v.principal, v.groups) for v in pay.verdicts] == [
            ("board-member", "prn_cho", ()),
            ("board-group", "prn_ana", ("grp_ops",)),
        ]  # never prn_eve: her group grp_ops is another workspace's
        wide = audience(w.searcher, WS, "itm_wide")
        assert {v.principal for v in wide.verdicts} == {"prn_ana", "prn_ben", "prn_cho"}
        assert {v.rule for v in wide.verdicts} == {"workspace-wide"}
        mine = audience(w.searcher, WS, "itm_mine")
        assert [(v.rule, v.principal) for v in mine.verdicts] == [("uploader", "prn_cho")]
        orphan = audience(w.searcher, WS, "itm_orphan")
        assert orphan.verdicts == () and "has no ACL" in orphan.notes[0]

    def test_access_says_visible_exactly_when_a_title_search_shows_it(
        self, make_searcher: MakeSearcher
    ) -> None:
        """Random worlds (the leak property's): for every item and every principal, `access`
        agrees with the oracle, with a text search for the item's title (hidden items asked
        for), and with one not asking for hidden items (`search` == "shown")."""
        shared = make_searcher()
        checked = []

        def run(seed: int) -> None:
            sc = build(random.Random(seed))
            load(shared, sc)
            shared.backend.put_principals(sc.principals)
            acls = sc.oracle_acls
            for raw in sc.raw:
                for who in sc.principals:
                    a = explain(shared.searcher, raw["workspace"], raw["id"], who)
                    person = oracle.Person(who.id, who.workspace, frozenset(who.groups))
                    expect = oracle.sees(person, acls, raw)
                    assert a.verdict.visible is expect, (raw, who, a)
                    found = _title_hits(shared, who, raw["title"], hidden=True)
                    assert (raw["id"] in found) is a.verdict.visible, (raw, who, a)
                    shown = _title_hits(shared, who, raw["title"], hidden=False)
                    assert (raw["id"] in shown) is (a.verdict.search == "shown"), (raw, who, a)
                    checked.append(a.verdict.visible)
                ws = raw["workspace"]
                everyone = {v.principal for v in audience(shared.searcher, ws, raw["id"]).verdicts}
                assert everyone == {
                    p.id
                    for p in sc.principals
                    if oracle.sees(oracle.Person(p.id, p.workspace, frozenset(p.groups)), acls, raw)
                }

        # Fixed seeds (the same worlds every run); the in-memory and embedded stores are cheap.
        for n in range(25 if shared.settings.backend == "embedded" else 4):
            run(SEED + n)
        assert True in checked and False in checked  # both answers were exercised


def _title_hits(w: World, who: Principal, title: str, hidden: bool) -> set[str]:
    params: dict[str, Any] = {"mode": "text", "limit": 25, "include_hidden": hidden}
    return set(w.ids(who, title, **params))
