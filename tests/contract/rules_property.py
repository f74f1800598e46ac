"""Property-based contract: random workspaces, boards, groups and items; zero leaks on every path."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from suli.errors import NotFound
from suli.models import KINDS, OUTCOMES, BoardAcl, Filters, Item, Principal
from suli.render import facets_json, item_json, response_json
from suli.service import Card
from suli.text import ENGLISH_STOPWORDS, words
from suli.validate import parse_item, search_request
from suli.visibility import can_see, visibility_for

from .helpers import T0, MakeSearcher, World, expected_facets, facet_dict

VOCAB = ["alpha", "bravo", "charlie", "delta", "echo", "the"]
GROUPS = ["g0", "g1", "g2"]
TAGS = ["t0", "t1", "t2"]
STATIONS = [("s0", "Alpha Station"), ("s1", "Beta Station")]
_EXAMPLES = (
    itertools.count()
)  # a fresh namespace per example: earlier examples become other tenants


@dataclass(frozen=True)
class Scenario:
    principals: list[Principal]
    acls: list[BoardAcl]
    items: list[Item]
    who: Principal
    query: str
    mode: str
    include_hidden: bool
    card_refs: list[str]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A small random world of two workspaces; every id carries the example's namespace."""
    ns = f"h{next(_EXAMPLES)}"
    wss = [f"ws-{ns}-a", f"ws-{ns}-b"]
    n_p = draw(st.integers(1, 5))
    principals = [
        Principal(
            id=f"prn-{ns}-{j}",
            workspace=draw(st.sampled_from(wss)),
            groups=tuple(f"grp-{ns}-{g}" for g in draw(st.sets(st.sampled_from(GROUPS)))),
        )
        for j in range(n_p)
    ]
    pids = [p.id for p in principals]
    n_b = draw(st.integers(0, 4))
    boards = [f"brd-{ns}-{b}" for b in range(n_b)]
    acls = []
    for b in boards:
        ws = draw(st.sampled_from([*wss, None]))  # None: a board nobody has an ACL for
        if ws is None:
            continue
        members = draw(
            st.lists(st.sampled_from([*pids, f"prn-{ns}-stranger"]), max_size=3, unique=True)
        )
        groups = [f"grp-{ns}-{g}" for g in draw(st.sets(st.sampled_from(GROUPS), max_size=2))]
        acls.append(BoardAcl(b, ws, f"Board {b}", tuple(members), tuple(groups)))
    n_i = draw(st.integers(1, 12))
    ids = [f"itm-{ns}-{i:02d}" for i in range(n_i)]
    items = []
    for i, item_id in enumerate(ids):
        scope = draw(
            st.sampled_from(
                ["workspace", "board", "personal"] if boards else ["workspace", "personal"]
            )
        )
        text = draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3))
        data: dict[str, Any] = {
            "id": item_id,
            "workspace": draw(st.sampled_from(wss)),
            "kind": draw(st.sampled_from(KINDS)),
            "title": " ".join(text),
            "body": f"{' '.join(draw(st.lists(st.sampled_from(VOCAB), max_size=4)))} note {item_id}",
            "outcome": draw(st.none() | st.sampled_from(OUTCOMES)),
            "hidden": draw(st.sampled_from([False, False, True])),
            "tags": sorted(draw(st.sets(st.sampled_from(TAGS)))),
            "agent": draw(st.none() | st.sampled_from(["prn-bot0", "prn-bot1"])),
            "stations": [{"id": s, "name": n} for s, n in draw(st.sets(st.sampled_from(STATIONS)))],
            "last_activity_at": T0 - timedelta(minutes=i),
            "references": draw(
                st.lists(st.sampled_from([*ids, "https://x.example/doc"]), max_size=3, unique=True)
            ),
        }
        if scope == "board":
            data["board"] = draw(st.sampled_from(boards))
        elif scope == "personal":
            data["uploader"] = draw(st.sampled_from([*pids, f"prn-{ns}-stranger"]))
        sup = draw(st.none() | st.sampled_from([*ids, f"itm-{ns}-missing"]))
        if sup != item_id:
            data["superseded_by"] = sup
        items.append(parse_item(data))
    query = " ".join(draw(st.lists(st.sampled_from(VOCAB), max_size=2)))
    return Scenario(
        principals=principals,
        acls=acls,
        items=items,
        who=draw(st.sampled_from(principals)),
        query=query,
        mode=draw(st.sampled_from(["hybrid", "text", "vector"])),
        include_hidden=draw(st.booleans()),
        card_refs=draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)),
    )


def _word_hits(items: list[Item], query: str) -> set[str]:
    """Items sharing a non-common query word (the text leg must find each of them)."""
    q = {w for w in words(query) if w not in ENGLISH_STOPWORDS}
    return {it.id for it in items if q & set(words(f"{it.title} {it.body}"))}


class PropertyRules:
    """Random worlds: no invisible item in results, snippets, facets, totals, get or related."""

    @pytest.fixture(scope="class")
    @classmethod
    def shared(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher()

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        # Each example costs real index round trips, so shrinking could run for minutes; the
        # failing world is small and printed whole instead.
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        # differing_executors: the method is inherited by one subclass per backend, on purpose.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.differing_executors,
        ],
    )
    @given(data=st.data())
    def test_no_leaks_on_any_path(self, shared: World, data: st.DataObject) -> None:
        sc = data.draw(scenarios())
        # Principals go in as objects (the searcher takes them as given), which spares the
        # store a write per principal; ACLs are stored, since visibility is read from them.
        shared.load(sc.items, (), sc.acls)
        who = sc.who
        vis = visibility_for(who, sc.acls)
        visible = {it.id for it in sc.items if can_see(vis, it)}
        by_id = {it.id: it for it in sc.items}
        shown = {i for i in visible if sc.include_hidden or not by_id[i].hidden}
        unhidden = {i for i in visible if not by_id[i].hidden}
        invisible = [it.id for it in sc.items if it.id not in visible]

        def leaks(body: Any) -> list[str]:
            text = json.dumps(body, default=str)
            return [i for i in invisible if i in text]

        def check_superseded(results: Any) -> None:
            for r in results:
                it = by_id[r.id]
                want = it.superseded_by if it.superseded_by in visible else None
                assert r.superseded_by == want, r.id
                assert r.superseded == (bool(it.superseded_by) or it.outcome == "superseded"), r.id

        # search, in the drawn mode (vector mode keeps every meaning match: margin 2, no floor)
        searcher = (
            shared.with_settings(meaning_margin=2.0, meaning_floor=-1.0)
            if sc.mode == "vector"
            else shared
        )
        resp = searcher.search(
            who, sc.query, mode=sc.mode, include_hidden=sc.include_hidden, explain=True, limit=25
        )
        got = {r.id for r in resp.results}
        assert got <= shown
        assert resp.total <= len(shown)
        if words(sc.query) and sc.mode == "vector":
            assert got == shown  # margin 2 keeps every visible item the k-NN returns
        if sc.mode != "vector":
            assert _word_hits([by_id[i] for i in shown], sc.query) <= got
        assert not leaks(response_json(resp))
        check_superseded(resp.results)
        # total, and facets over the search, count exactly the results (all on one page here)
        if words(sc.query):
            assert not resp.has_more and resp.next is None
            assert (resp.total, resp.total_relation) == (len(got), "eq")
            req = search_request(sc.query, mode=sc.mode, include_hidden=sc.include_hidden)
            over = searcher.searcher.facets(who, req=req)
            assert facet_dict(over) == expected_facets(by_id[i] for i in got)
            assert over.total == len(got)
            assert not leaks(facets_json(over))

        # browse: exactly the shown items, newest first
        browse = shared.search(who, "", include_hidden=sc.include_hidden, limit=25)
        assert [r.id for r in browse.results] == sorted(
            shown, key=lambda i: by_id[i].last_activity_at, reverse=True
        )
        assert browse.total == len(shown)
        assert not leaks(response_json(browse))
        check_superseded(browse.results)

        # facets: values and counts equal a brute force over the shown items
        facets = shared.facets(who, Filters(include_hidden=sc.include_hidden))
        assert facet_dict(facets) == expected_facets(by_id[i] for i in shown)
        assert facets.total == len(shown)
        assert not leaks(facets_json(facets))

        # get: visible items (hidden too: a direct lookup), never invisible ones; a few
        # visible ones suffice, every invisible one is tried
        sampled = set(sorted(visible)[:3])
        for it in sc.items:
            if it.id in sampled:
                item, res = shared.get(who, it.id)
                assert item.references == tuple(
                    r for r in it.references if "://" in r or r in visible
                )
                check_superseded([res])
                assert not leaks(item_json(item, res.superseded_by))
            elif it.id not in visible:
                with pytest.raises(NotFound):
                    shared.get(who, it.id)

        # related: for an item and for a card naming random references
        for src in sorted(visible)[:1]:
            rel = shared.related(who, src, limit=25, explain=True)
            assert {r.id for r in rel.results} <= unhidden - {src}
            assert rel.total <= len(unhidden - {src})
            assert not leaks(response_json(rel))
            check_superseded(rel.results)
        for src in invisible[:1]:
            with pytest.raises(NotFound):
                shared.related(who, src)
        for card in (
            Card(sc.query or "alpha", "bravo", tuple(sc.card_refs)),
            Card("***", "", tuple(sc.card_refs)),
        ):
            rel = shared.related(who, card=card, limit=25)
            assert {r.id for r in rel.results} <= unhidden
            assert not leaks(response_json(rel))
            check_superseded(rel.results)
