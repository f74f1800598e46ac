"""DESIGN 3.10 with 3.4, hybrid: a ticked facet's count for each of its values is the total of
the search with that value, meaning-only hits included (each value's search keeps its own,
gated against its own best), and the other facets count what the search itself matched.

Random worlds, filters, depths and gates; the expected sets come from tests/contract/oracle.py
(the raw items, their vectors and the query's, no product code). The vectors owe nothing to
the words, so meaning-only hits are common, and the depth is small, so the vector legs are
often cut (the paths where a value's own leg must be asked)."""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import Sequence
from typing import Any

import hypothesis
import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from suli.models import KINDS, OUTCOMES, BoardAcl, Principal
from suli.search_params import search_request
from suli.validate import parse_item

from . import oracle
from .helpers import T0, MakeSearcher, World

# Words with near misses among them: the typo clause has something to find and to refuse.
VOCAB = ["deploy", "deplyo", "checklist", "cheklist", "rollback", "canary", "canry", "dash"]
QUERIES = ["deploy", "cheklist", "deplo", "canary dash", "rollbakc", "dashboard", "zebra"]
TAGS, AGENTS = ["t0", "t1", "t2"], ["prn-bot0", "prn-bot1"]
STATIONS = [("s0", "Alpha"), ("s1", "Beta")]
DIM = 8  # few dimensions: similarities spread wide, so the gates cut in every direction
EXAMPLES = {"embedded": 150, "opensearch": 40}  # memory runs as "embedded"
SEED = 20261205
_NAMESPACES = itertools.count()
_ID = re.compile(r"itm-[a-z0-9]+-[0-9]+")


def unit(key: str) -> np.ndarray:
    """A seeded random unit vector per key."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


class IdEmbedder:
    """An item's vector is its id's (named in its body), a query's is its text's: the test
    knows every vector without asking the product how it builds the embedded text."""

    dimension, name = DIM, "id-vectors-8"

    def _one(self, text: str) -> np.ndarray:
        found = _ID.search(text)
        return unit(found.group(0) if found else text)

    def embed_documents(self, texts: Sequence[str], *, on_progress: Any = None) -> np.ndarray:
        out = np.stack([self._one(t) for t in texts]) if len(texts) else np.empty((0, DIM))
        if on_progress is not None and len(texts):
            on_progress(len(texts))
        return out.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


FACETS = {  # facet -> (request parameter, the values a request may tick)
    "kind": ("kind", list(KINDS)),
    "outcome": ("outcome", list(OUTCOMES)),
    "board": ("board", ["brd-0", "brd-1"]),
    "agent": ("agent", AGENTS),
    "station": ("station", ["Alpha", "Beta"]),
    "tag": ("tag", TAGS),
}


def build(rnd: random.Random) -> dict[str, Any]:
    ns = f"fm{next(_NAMESPACES)}"
    ws = f"ws-{ns}"

    def some(values: list[Any], lo: int = 0, hi: int = 2) -> list[Any]:
        return rnd.sample(values, rnd.randint(lo, min(hi, len(values))))

    who = Principal(f"prn-{ns}", ws, groups=tuple(some(["g0", "g1"])))
    acls = [
        BoardAcl("brd-0", ws, "", (who.id,), ()),
        BoardAcl("brd-1", ws, "", (), ("g1",)),
    ]
    raw = []
    for n in range(rnd.randint(1, 14)):
        item_id = f"itm-{ns}-{n:02d}"
        data: dict[str, Any] = {
            "id": item_id,
            "workspace": ws,
            "kind": rnd.choice(KINDS),
            "title": " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(1, 2))),
            "body": " ".join([*(rnd.choice(VOCAB) for _ in range(rnd.randint(0, 2))), item_id]),
            "outcome": rnd.choice([*OUTCOMES, None]),
            "tags": sorted(some(TAGS, hi=3)),
            "agent": rnd.choice([*AGENTS, None]),
            "stations": [{"id": s, "name": nm} for s, nm in sorted(some(STATIONS))],
            "last_activity_at": T0,
        }
        scope = rnd.choice(["workspace", "workspace", "board", "personal"])
        if scope == "board":
            data["board"] = rnd.choice(["brd-0", "brd-1", "brd-none"])
        elif scope == "personal":
            data["uploader"] = rnd.choice([who.id, "prn-other"])
        raw.append(data)
    ticked = rnd.sample(sorted(FACETS), rnd.randint(1, 2))
    params: dict[str, Any] = {}
    for name in ticked:
        param, values = FACETS[name]
        params[param] = some(values, lo=1, hi=2)
    return {
        "who": who,
        "acls": acls,
        "raw": raw,
        "params": params,
        "ticked": ticked,
        "mode": rnd.choice(["hybrid", "hybrid", "vector"]),
        "query": rnd.choice(QUERIES),
        "depth": rnd.choice([1, 2, 3, 4, 6, 20]),
        "margin": rnd.choice([0.05, 0.2, 0.5, 2.0]),
        "floor": rnd.choice([-1.0, -0.2, 0.0, 0.3]),
    }


def _ask(params: dict[str, Any]) -> oracle.Ask:
    return oracle.Ask(
        kinds=tuple(params.get("kind", ())),
        outcomes=tuple(params.get("outcome", ())),
        boards=tuple(params.get("board", ())),
        agents=tuple(params.get("agent", ())),
        stations=tuple(params.get("station", ())),
        tags=tuple(params.get("tag", ())),
    )


def check(world: World, sc: dict[str, Any]) -> int:
    """Every ticked facet's counts against the oracle and against the searches with each of
    its values; the other facets and `total` against what the search matched. Returns how
    many values were checked."""
    who, raw, params, mode, query = sc["who"], sc["raw"], sc["params"], sc["mode"], sc["query"]
    w = world.with_settings(
        candidate_depth=sc["depth"], meaning_margin=sc["margin"], meaning_floor=sc["floor"]
    )
    person = oracle.Person(who.id, who.workspace, frozenset(who.groups))
    acls = [
        oracle.Acl(a.board, a.workspace, frozenset(a.members), frozenset(a.groups))
        for a in sc["acls"]
    ]
    vectors = {d["id"]: [float(x) for x in unit(d["id"])] for d in raw}
    qvec = [float(x) for x in unit(query)]

    def meaning(pool: list[dict[str, Any]]) -> set[str]:
        return oracle.meaning_kept(pool, vectors, qvec, sc["depth"], sc["margin"], sc["floor"])

    words = None if mode == "vector" else query

    def matched(p: dict[str, Any]) -> set[str]:
        return oracle.search_matches(person, acls, raw, _ask(p), words, meaning)

    got = w.searcher.facets(who, req=search_request(query, mode=mode, **params))
    by_id = {d["id"]: d for d in raw}
    main = matched(params)
    context = (query, mode, params, sc["depth"], sc["margin"], sc["floor"])
    assert got.total == len(main), context
    want_plain = oracle.facets([by_id[i] for i in main])
    checked = 0
    for name, (param, _) in FACETS.items():
        counts = dict(got.values.get(name, []))
        if name not in sc["ticked"]:
            assert counts == want_plain.get(name, {}), (name, context)
            continue
        # Ticked: each value's count is what the search with that value alone totals.
        lifted = {k: v for k, v in params.items() if k != param}
        pool = oracle.search_matches(person, acls, raw, _ask(lifted), None)
        values = set(oracle.facets([by_id[i] for i in pool]).get(name, {})) | set(counts)
        want = {}
        for value in sorted(values):
            one = {**lifted, param: [value]}
            n = len(matched(one))
            # exact: a default answer may say "at least" where counting would cost
            total = w.search(who, query, mode=mode, exact_total=True, **one).total
            assert total == n, (name, value, "search", context)
            if n:
                want[value] = n
            checked += 1
        assert counts == want, (name, context)
    return checked


def property_settings(n: int) -> Any:
    def wrap(f: Any) -> Any:
        return hypothesis.seed(SEED)(
            settings(
                max_examples=n,
                deadline=None,
                database=None,
                phases=(Phase.explicit, Phase.generate),
                suppress_health_check=list(HealthCheck),
            )(f)
        )

    return wrap


def run(world: World, examples: int) -> None:
    """The property over `examples` random worlds loaded into `world` (a fresh workspace
    each); asserts the cut-leg paths really ran."""
    cut: list[int] = []

    @property_settings(examples)
    @given(st.integers(0, 2**32 - 1))
    def prop(n: int) -> None:
        sc = build(random.Random(n))
        world.load([parse_item(d) for d in sc["raw"]], (), sc["acls"])
        check(world, sc)
        if sc["depth"] < len(sc["raw"]):
            cut.append(n)

    prop()
    assert len(cut) > examples // 4


class FacetMeaningRules:
    def test_a_ticked_facet_counts_each_value_as_its_search_totals(
        self, make_searcher: MakeSearcher
    ) -> None:
        world = make_searcher(embedder=IdEmbedder())
        run(world, EXAMPLES.get(world.settings.backend, 40))
