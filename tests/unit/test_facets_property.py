"""Property: facets combine disjunctively (DESIGN 3.10) over random worlds, filters and word
queries with typos (3.12), on the in-memory backend. For each facet the counts equal a brute
force (tests/contract/oracle.py, which reads the raw items) over the visible items that match
the query and pass every other facet's filters but not its own; `total` applies them all."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the contract package

from contract import oracle
from contract.helpers import T0, memory_world

from suli.models import KINDS, OUTCOMES, BoardAcl, Principal
from suli.search_params import search_request
from suli.validate import parse_item

# Words with near misses among them: the typo clause has something to find and to refuse.
VOCAB = ["deploy", "deplyo", "checklist", "cheklist", "rollback", "canary", "canry", "dash"]
QUERIES = ["", "deploy", "cheklist", "deplo", "canary dash", "rollbakc", "dashboard", "can"]
TAGS, AGENTS = ["t0", "t1", "t2"], ["prn-bot0", "prn-bot1"]
STATIONS = [("s0", "Alpha"), ("s1", "Beta")]
EXAMPLES = 300


def build(rnd: random.Random) -> tuple[list[dict[str, Any]], list[BoardAcl], Principal, dict]:
    def some(values: list[Any], lo: int = 0, hi: int = 2) -> list[Any]:
        return rnd.sample(values, rnd.randint(lo, min(hi, len(values))))

    who = Principal("prn-me", "ws-a", tuple(some(["g0", "g1"])))
    acls = [
        BoardAcl("brd-0", "ws-a", "", ("prn-me",), ()),
        BoardAcl("brd-1", "ws-a", "", (), ("g1",)),
        BoardAcl("brd-2", "ws-b", "", ("prn-me",), ()),  # another workspace: grants nothing here
    ]
    raw = []
    for n in range(rnd.randint(0, 14)):
        data: dict[str, Any] = {
            "id": f"itm-{n:02d}",
            "workspace": rnd.choice(["ws-a", "ws-a", "ws-b"]),
            "kind": rnd.choice(KINDS),
            "title": " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(1, 2))),
            "body": " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(0, 3))),
            "outcome": rnd.choice([*OUTCOMES, None]),
            "tags": sorted(some(TAGS)),
            "agent": rnd.choice([*AGENTS, None]),
            "stations": [{"id": s, "name": nm} for s, nm in sorted(some(STATIONS))],
            "last_activity_at": T0,
        }
        scope = rnd.choice(["workspace", "board", "personal"])
        if scope == "board":
            data["board"] = rnd.choice(["brd-0", "brd-1", "brd-2", "brd-none"])
        elif scope == "personal":
            data["uploader"] = rnd.choice(["prn-me", "prn-other"])
        raw.append(data)
    params: dict[str, Any] = {}
    for name, values in (
        ("kind", list(KINDS)),
        ("outcome", list(OUTCOMES)),
        ("board", ["brd-0", "brd-1", "brd-2"]),
        ("agent", AGENTS),
        ("station", ["s0", "Beta", "s9"]),
        ("tag", TAGS),
    ):
        if rnd.random() < 0.4:
            params[name] = some(values, lo=1)
    params["query"] = rnd.choice(QUERIES)
    return raw, acls, who, params


@seed(20261201)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
@given(st.integers(0, 2**32 - 1))
def test_each_facet_counts_under_every_filter_but_its_own(n: int) -> None:
    raw, acls, who, params = build(random.Random(n))
    query = params.pop("query")
    world = memory_world([parse_item(d) for d in raw], [who], acls)
    req = search_request(query, mode="text", **params)
    got = world.searcher.facets(who, req=req)

    person = oracle.Person(who.id, who.workspace, frozenset(who.groups))
    o_acls = [
        oracle.Acl(a.board, a.workspace, frozenset(a.members), frozenset(a.groups)) for a in acls
    ]
    ask = oracle.Ask(
        kinds=tuple(params.get("kind", ())),
        outcomes=tuple(params.get("outcome", ())),
        boards=tuple(params.get("board", ())),
        agents=tuple(params.get("agent", ())),
        stations=tuple(params.get("station", ())),
        tags=tuple(params.get("tag", ())),
    )

    def matches(it: dict[str, Any]) -> bool:
        if not query:
            return True
        return it["id"] in oracle.word_hits([it], query) | oracle.typo_hits([it], query)

    want = oracle.disjunctive_facets(person, o_acls, raw, ask, matches)
    assert {k: dict(v) for k, v in got.values.items() if v} == want, (query, params)
    every = [it for it in raw if oracle.sees(person, o_acls, it) and oracle.passes(it, ask)]
    assert got.total == len([it for it in every if matches(it)])
    invisible = {it["id"] for it in raw if not oracle.sees(person, o_acls, it)}
    shown = {r.id for r in world.search(who, query, mode="text", limit=25, **params).results}
    assert not shown & invisible
