"""Property-based contract: random worlds, filters, regexes and modes; zero leaks on every path.

Expected answers come from tests/contract/oracle.py (DESIGN.md written out again, no product
code). The seed is fixed (CI runs the same worlds every time); SULI_PROPERTY_SCALE multiplies
the number of examples for a nightly-style run and SULI_PROPERTY_SEED picks other worlds.

The checks speak JSON (a `Probe`), so the same property runs against the core here and over
HTTP and MCP, token -> principal -> ACL included, in tests/e2e/test_property_edges.py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol

import hypothesis
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from suli.errors import NotFound
from suli.models import KINDS, OUTCOMES, BoardAcl, Principal
from suli.render import facets_json, item_json, response_json
from suli.service import Card
from suli.validate import parse_item

from . import oracle
from .helpers import T0, MakeSearcher, World

VOCAB = ["alpha", "bravo", "charlie", "delta", "echo", "the"]
GROUPS = ["g0", "g1", "g2"]
TAGS = ["t0", "t1", "t2"]
STATIONS = [("s0", "Alpha Station"), ("s1", "Beta Station")]
# Case-insensitive, anchored, alternation, classes, spaces: what a user types as `regex`.
REGEXES = ["alpha", "^bravo", "ch.rlie", "delta|echo", "[ab]lpha", "ECHO", "note itm", "o$"]
MODES = ["browse", "text", "vector", "hybrid"]
# Examples per backend in CI (fixed seed); the embedded store is ~10x cheaper per example.
EXAMPLES = {"embedded": 200, "opensearch": 50}
SCALE = float(os.environ.get("SULI_PROPERTY_SCALE", "1"))
SEED = int(os.environ.get("SULI_PROPERTY_SEED", "20261130"))
_NAMESPACES = itertools.count()  # a fresh namespace per example: earlier ones become other tenants


def examples(backend: str | None) -> int:
    return max(1, round(EXAMPLES.get(backend or "", 50) * SCALE))


@dataclass(frozen=True)
class Scenario:
    principals: list[Principal]
    acls: list[BoardAcl]
    raw: list[dict[str, Any]]  # the items as given to the indexer (the oracle reads these)
    who: Principal
    query: str
    mode: str  # browse = no words
    params: dict[str, Any]  # filters, regex, limit, hidden: as a caller sends them
    card_refs: list[str]
    probe_ids: list[str] = field(default_factory=list)  # ids to `get` (visible and not)

    @property
    def person(self) -> oracle.Person:
        return oracle.Person(self.who.id, self.who.workspace, frozenset(self.who.groups))

    @property
    def oracle_acls(self) -> list[oracle.Acl]:
        return [
            oracle.Acl(a.board, a.workspace, frozenset(a.members), frozenset(a.groups))
            for a in self.acls
        ]

    @property
    def ask(self) -> oracle.Ask:
        p = self.params
        return oracle.Ask(
            kinds=tuple(p.get("kind", ())),
            outcomes=tuple(p.get("outcome", ())),
            boards=tuple(p.get("board", ())),
            agents=tuple(p.get("agent", ())),
            stations=tuple(p.get("station", ())),
            tags=tuple(p.get("tag", ())),
            since=p.get("since"),
            until=p.get("until"),
            hidden=bool(p.get("include_hidden")),
            regex=p.get("regex"),
        )


def build(rnd: random.Random) -> Scenario:
    """Two workspaces sharing board ids, group names and item ids' namespace; random requests.

    Built from one drawn seed with Python's Random: hypothesis' own draws cost ~0.4 s per
    world here, which would be most of the CI budget (and shrinking is off anyway)."""
    ns = f"h{next(_NAMESPACES)}"
    wss = [f"ws-{ns}-a", f"ws-{ns}-b"]

    def some(values: Sequence[Any], lo: int = 0, hi: int | None = None) -> list[Any]:
        k = rnd.randint(lo, len(values) if hi is None else min(hi, len(values)))
        return rnd.sample(list(values), k)

    def maybe(x: Any) -> Any:
        return x if rnd.random() < 0.5 else None

    principals = [
        Principal(
            id=f"prn-{ns}-{j}",
            workspace=rnd.choice(wss),
            groups=tuple(sorted(f"grp-{g}" for g in some(GROUPS))),
        )
        for j in range(rnd.randint(1, 4))
    ]
    pids = [p.id for p in principals]
    boards = [f"brd-{ns}-{b}" for b in range(rnd.choice([0, 1, 2, 2, 3, 3, 4, 4]))]
    acls = []
    for b in boards:
        ws = rnd.choice([*wss, None])  # None: a board nobody has an ACL for
        if ws is None:
            continue
        # Members may be principals of the other workspace, and group names are shared by
        # both workspaces: an ACL only ever grants inside its own workspace.
        members = some([*pids, f"prn-{ns}-stranger"], hi=2)
        groups = [f"grp-{g}" for g in some(GROUPS, hi=2)]
        acls.append(BoardAcl(b, ws, f"Board {b}", tuple(members), tuple(groups)))
    ids = [f"itm-{ns}-{i:02d}" for i in range(rnd.randint(1, 12))]
    raw = []
    for i, item_id in enumerate(ids):
        scopes = (
            ["workspace", "board", "board", "personal"] if boards else ["workspace", "personal"]
        )
        scope = rnd.choice(scopes)
        title = [rnd.choice(VOCAB) for _ in range(rnd.randint(1, 3))]
        body = [rnd.choice(VOCAB) for _ in range(rnd.randint(0, 4))]
        data: dict[str, Any] = {
            "id": item_id,
            "workspace": rnd.choice(wss),
            "kind": rnd.choice(KINDS),
            "title": " ".join(title),
            "body": f"{' '.join(body)} note {item_id}",
            "outcome": maybe(rnd.choice(OUTCOMES)),
            "hidden": rnd.random() < 0.3,
            "tags": sorted(some(TAGS)),
            "agent": maybe(rnd.choice(["prn-bot0", "prn-bot1"])),
            "stations": [{"id": s, "name": n} for s, n in sorted(some(STATIONS))],
            # distinct instants, spread over five UTC days (since/until have something to cut)
            "last_activity_at": T0 - timedelta(days=rnd.randint(0, 4), minutes=i),
            "references": some([*ids, "https://x.example/doc"], hi=3),
        }
        if scope == "board":
            data["board"] = rnd.choice(boards)
        elif scope == "personal":
            data["uploader"] = rnd.choice([*pids, f"prn-{ns}-stranger"])
        sup = maybe(rnd.choice([*ids, f"itm-{ns}-missing"]))
        if sup != item_id:
            data["superseded_by"] = sup
        raw.append(data)

    mode = rnd.choice(MODES)
    query = "" if mode == "browse" else " ".join(some(VOCAB, hi=2))
    params: dict[str, Any] = {"limit": rnd.choice([25, 25, 3, 1])}
    for name, values in (
        ("kind", list(KINDS)),
        ("outcome", list(OUTCOMES)),
        ("board", [*boards, "brd-nowhere"]),
        ("agent", ["prn-bot0", "prn-bot1"]),
        ("station", ["s0", "Beta Station", "s9"]),
        ("tag", TAGS),
    ):
        if rnd.random() < 0.25:  # a filter left out three times in four
            params[name] = some(values, lo=1, hi=2)
    if rnd.random() < 0.25:
        params["since"] = (T0 - timedelta(days=rnd.randint(0, 4))).date()
    if rnd.random() < 0.25:
        params["until"] = (T0 - timedelta(days=rnd.randint(0, 2))).date()
        if params.get("since") and params["since"] > params["until"]:
            del params["since"]
    if rnd.random() < 0.25:
        params["regex"] = rnd.choice(REGEXES)
    params["include_hidden"] = rnd.random() < 0.5
    return Scenario(
        principals=principals,
        acls=acls,
        raw=raw,
        who=rnd.choice(principals),
        query=query,
        mode=mode,
        params=params,
        card_refs=some(ids, hi=3),
        probe_ids=some(ids, hi=4),
    )


def scenarios() -> st.SearchStrategy[Scenario]:
    return st.integers(0, 2**32 - 1).map(lambda n: build(random.Random(n)))


class Probe(Protocol):
    """One edge (core, HTTP, MCP) answering as the scenario's principal, in JSON bodies.

    Facets and get answer None where the edge has no such operation; get and related answer
    NotFound for an unknown id (the edge's 404 / error result)."""

    def search(self, query: str, mode: str, params: dict[str, Any]) -> dict[str, Any]: ...
    def facets(self, params: dict[str, Any]) -> dict[str, Any] | None: ...
    def get(self, item_id: str) -> dict[str, Any] | None: ...
    def related(self, item_id: str | None = None, card: Card | None = None) -> dict[str, Any]: ...


def check_census(probe_for: Callable[[Principal], Probe], sc: Scenario) -> None:
    """Every principal of the world browses everything it may see, hidden items included:
    exactly the oracle's visible set, newest first, with an exact total (one cheap query each)."""
    acls = sc.oracle_acls
    for p in sc.principals:
        who = oracle.Person(p.id, p.workspace, frozenset(p.groups))
        want = oracle.matching(who, acls, sc.raw, oracle.Ask(hidden=True))
        body = probe_for(p).search("", "browse", {"limit": 25, "include_hidden": True})
        assert [r["id"] for r in body["results"]] == want, (p.id, want)
        assert body["total"] == len(want), p.id


def check_scenario(
    probe_for: Callable[[Principal], Probe], sc: Scenario, *, census: bool = True
) -> None:
    """Every answer of one edge against the oracle, for one random world and request.
    census=False: for an edge that cannot ask for hidden items (MCP)."""
    if census:
        check_census(probe_for, sc)
    probe = probe_for(sc.who)
    who, acls = sc.person, sc.oracle_acls
    by_id = {d["id"]: d for d in sc.raw}
    seen = oracle.visible(who, acls, sc.raw)
    invisible = [i for i in by_id if i not in seen]
    ask = sc.ask
    expected = oracle.matching(who, acls, sc.raw, ask)
    limit = sc.params["limit"]

    def leaks(body: Any) -> list[str]:
        text = json.dumps(body, default=str)
        return [i for i in invisible if i in text]

    def check_results(results: list[dict[str, Any]]) -> None:
        for r in results:
            it = by_id[r["id"]]
            want = oracle.replacement(who, acls, by_id, it)
            assert r["superseded_by"] == want, (r["id"], r["superseded_by"], want)
            superseded = bool(it.get("superseded_by")) or it.get("outcome") == "superseded"
            assert r["superseded"] == superseded, r["id"]

    # search (or browse) in the drawn mode, with the drawn filters and regex
    mode = sc.mode
    query = "" if mode == "browse" else sc.query
    body = probe.search(query, mode, sc.params)
    got = [r["id"] for r in body["results"]]
    assert not leaks(body), leaks(body)
    assert len(got) == len(set(got))
    assert set(got) <= set(expected), sorted(set(got) - set(expected))
    check_results(body["results"])
    if not query.split():
        # browse claims completeness: exactly the matching set, newest first, exact total
        assert got == expected[:limit], (got, expected)
        assert body["total"] == len(expected)
        # where the edge says how exact its total is, or whether more follow: they agree
        assert body.get("total_relation", "eq") == "eq"
        assert body.get("has_more", len(expected) > limit) == (len(expected) > limit)
    else:
        assert len(got) == min(limit, body["total"])  # total counts what passed the gates
        assert body["total"] <= len(expected)
        if limit >= len(expected):
            if mode == "vector":  # a wide margin keeps every visible item the k-NN returns
                assert set(got) == set(expected), (got, expected)
            else:  # an exact-word match is always kept
                hits = oracle.word_hits([by_id[i] for i in expected], query)
                assert hits <= set(got), sorted(hits - set(got))

    # facets: values and counts equal a brute force over the matching items (no regex), each
    # facet under every filter but its own (DESIGN 3.10: disjunctive)
    fparams = {k: v for k, v in sc.params.items() if k not in ("limit", "regex")}
    facets = probe.facets(fparams)
    if facets is not None:
        no_regex = oracle.Ask(**{**vars(ask), "regex": None})
        want_ids = oracle.matching(who, acls, sc.raw, no_regex)
        want = oracle.disjunctive_facets(who, acls, sc.raw, no_regex)
        got_f = {k: {v["value"]: v["count"] for v in vs} for k, vs in facets["facets"].items()}
        assert {k: v for k, v in got_f.items() if v} == want
        assert facets["total"] == len(want_ids)
        assert not leaks(facets)

    # get: visible items (hidden too: a direct lookup), never invisible ones
    for item_id in dict.fromkeys([*sc.probe_ids, *invisible[:3]]):
        try:
            item = probe.get(item_id)
        except NotFound:
            assert item_id not in seen, f"{item_id} is visible but get says not found"
            continue
        if item is None:  # the edge has no get
            break
        assert item_id in seen, f"get returned invisible {item_id}"
        it = by_id[item_id]
        refs = [r for r in it["references"] if "://" in r or r in seen]
        assert item["references"] == refs
        assert item["superseded_by"] == oracle.replacement(who, acls, by_id, it)
        assert not leaks(item)

    # related: of a visible item, of an invisible one, and for cards naming random references
    unhidden = {i for i, it in seen.items() if not it.get("hidden")}
    for src in sorted(seen)[:1]:
        rel = probe.related(item_id=src)
        ids = [r["id"] for r in rel["results"]]
        assert set(ids) <= unhidden - {src}
        direct = [r for r in dict.fromkeys(by_id[src]["references"]) if r in unhidden - {src}]
        assert ids[: len(direct)] == direct  # direct references first, in their order
        assert not leaks(rel)
        check_results(rel["results"])
    for src in invisible[:1]:
        with pytest.raises(NotFound):
            probe.related(item_id=src)
    for card in (
        Card(sc.query or "alpha", "bravo", tuple(sc.card_refs)),
        Card("***", "", tuple(sc.card_refs)),
    ):
        rel = probe.related(card=card)
        ids = [r["id"] for r in rel["results"]]
        assert set(ids) <= unhidden
        assert not leaks(rel)
        check_results(rel["results"])


@dataclass
class CoreProbe:
    """The search core, called directly (as the CLI does)."""

    world: World
    who: Principal

    def search(self, query: str, mode: str, params: dict[str, Any]) -> dict[str, Any]:
        # vector mode keeps every meaning match under a wide margin (what check_scenario assumes)
        w = (
            self.world.with_settings(meaning_margin=2.0, meaning_floor=-1.0)
            if mode == "vector"
            else self.world
        )
        m = "hybrid" if mode == "browse" else mode
        return response_json(w.search(self.who, query, mode=m, explain=True, **params))

    def facets(self, params: dict[str, Any]) -> dict[str, Any] | None:
        from suli.search_params import search_request

        return facets_json(self.world.facets(self.who, search_request("", **params).filters))

    def get(self, item_id: str) -> dict[str, Any] | None:
        item, res = self.world.get(self.who, item_id)
        return item_json(item, res)

    def related(self, item_id: str | None = None, card: Card | None = None) -> dict[str, Any]:
        return response_json(
            self.world.related(self.who, item_id, card=card, limit=25, explain=True)
        )


def property_settings(n: int) -> Callable[[Any], Any]:
    """Fixed seed, no example database, no shrinking (each example costs index round trips;
    the failing world is small and printed whole instead)."""

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


def load(world: World, sc: Scenario) -> None:
    """Principals go in as objects (the searcher takes them as given), which spares the store a
    write per principal; ACLs are stored, since visibility is read from them."""
    world.load([parse_item(d) for d in sc.raw], (), sc.acls)


class Scrambled:
    """An embedder whose meanings owe nothing to the words (a seeded random unit vector per
    text), so the vector leg's order is not the text leg's."""

    def __init__(self, like: Any) -> None:
        self.dimension, self.name = like.dimension, like.name

    def _one(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(self.dimension)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str], *, on_progress: Any = None) -> np.ndarray:
        out = (
            np.stack([self._one(t) for t in texts])
            if len(texts)
            else np.empty((0, self.dimension), np.float32)
        )
        if on_progress is not None and len(texts):
            on_progress(len(texts))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


class PropertyRules:
    """Random worlds: no invisible item in results, snippets, facets, totals, get or related."""

    @pytest.fixture(scope="class")
    @classmethod
    def shared(cls, make_searcher: MakeSearcher) -> World:
        return make_searcher()

    def test_no_leaks_on_any_path(self, shared: World) -> None:
        ran = []

        @property_settings(examples(shared.settings.backend))
        @given(sc=scenarios())
        def prop(sc: Scenario) -> None:
            load(shared, sc)
            check_scenario(lambda p: CoreProbe(shared, p), sc)
            ran.append(sc.mode)

        prop()
        # The examples really ran, and every mode had its share.
        assert len(ran) == examples(shared.settings.backend)
        assert set(ran) == set(MODES) or len(ran) < 20

    def test_hybrid_total_past_the_depth_is_the_oracles(self, shared: World) -> None:
        """With the text leg cut at depth 2, a meaning-only hit may be a word match further
        down: `total` is every visible word match under the filters (the oracle's, counted
        from the raw items) plus the kept meaning-only hits that are not one, each once. The
        gates are wide open so the vector leg's two are always kept."""
        shallow = World(
            shared.backend,
            Scrambled(shared.embedder),
            shared.settings.model_copy(
                update={"candidate_depth": 2, "meaning_floor": -1.0, "meaning_margin": 2.0}
            ),
            shared.refresh,
        )
        cut = []

        # Words the oracle counts as it is (no common word: "the" alone searches plain fields).
        some_words = st.lists(st.sampled_from(VOCAB[:5]), min_size=1, max_size=2, unique=True)

        @property_settings(examples(shared.settings.backend))
        @given(drawn=scenarios(), words=some_words)
        def prop(drawn: Scenario, words: list[str]) -> None:
            # Every item in the caller's workspace: boards and personal items still hide some.
            own = [{**d, "workspace": drawn.who.workspace} for d in drawn.raw]
            sc = replace(drawn, raw=own)
            load(shallow, sc)
            query = " ".join(words)
            # Visibility alone narrows (the drawn filters leave most worlds without a match).
            resp = shallow.search(
                sc.who,
                query,
                mode="hybrid",
                explain=True,
                limit=25,
                include_hidden=True,
                exact_total=True,
            )
            ask = oracle.Ask(hidden=True)
            by_id = {d["id"]: d for d in sc.raw}
            visible = oracle.matching(sc.person, sc.oracle_acls, sc.raw, ask)
            matched = oracle.word_hits([by_id[i] for i in visible], query)
            alone = {r.id for r in resp.results if r.explain and r.explain.text_rank is None}
            exact = len(matched) + len(alone - matched)
            assert resp.total == exact, (query, matched, alone)
            # Not asked exact: a true lower bound, never more than there are, never fewer
            # than it shows; "eq" only where it is the exact figure.
            free = shallow.search(sc.who, query, mode="hybrid", limit=25, include_hidden=True)
            assert len(free.results) <= free.total <= exact, (query, free.total, exact)
            assert free.total_relation == "gte" or free.total == exact
            if len(matched) > 2 and alone & matched:
                cut.append(sc)

        prop()
        # Some examples had a meaning-only hit that the words match past the cut.
        assert cut or examples(shared.settings.backend) < 20
