"""On the real node: a core search is an `_msearch` (both legs) and an `_mget` (the page read by
id with the caller's visibility document), a browse one `_msearch`,
visibility still current in each.

Every request reaching OpenSearch is counted at the connection (a wrapper of each pooled
connection's `perform_request`): nothing stands in for the engine.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from opensearchpy import OpenSearch

from suli.backends.opensearch import OpenSearchBackend, reads
from suli.backends.opensearch.client import Connection
from suli.backends.opensearch.directory import AclDirectory
from suli.backends.opensearch.visdocs import doc_id
from suli.backends.opensearch.visibility import VisibilityUpkeep
from suli.models import Principal
from suli.settings import Settings
from suli.visibility import visibility_for

from .helpers import (
    WS,
    KeyedEmbedder,
    World,
    acl,
    axis,
    blend,
    counting,
    item,
    opensearch_settings,
    opensearch_world,
    principal,
)

SEARCH = ["POST _msearch", "POST _mget"]  # the legs, then the page by id
# A stale visibility document: the legs read the ACLs and search again; the page read by id
# finds the document does not say what the legs used, so the page is searched, reading
# visibility anew (its check, the ACLs, the page) rather than trust the legs' boards.
FALLBACK = ["POST _msearch", "POST _search", "POST _msearch", "POST _mget", "POST _msearch",
            "POST _search", "POST _search"]  # fmt: skip
# Boards known from an earlier search, sent inline, found changed by the check: the legs again.
AGAIN = ["POST _msearch", *SEARCH]
ITEMS = [
    item("itm_a", "Quokka runbook", board="brd_a"),
    item("itm_b", "Quokka budget", board="brd_b"),
    item("itm_w", "Quokka welcome"),
]


@pytest.fixture
def make_world(opensearch_url: str, make_index_name: Callable[[], str]) -> Iterator[Any]:
    made: list[OpenSearchBackend] = []

    def make(name: str | None = None) -> World:
        settings = opensearch_settings(opensearch_url, name or make_index_name())
        w = opensearch_world(settings)
        made.append(backend(w))
        return w

    yield make
    for b in made:
        b.close()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    w = make_world()
    w.load(ITEMS, [principal("prn_a"), principal("prn_g", "grp_x")], [acl("brd_a", ["prn_a"])])
    return w


def backend(w: World) -> OpenSearchBackend:
    assert isinstance(w.backend, OpenSearchBackend)
    return w.backend


def seen(w: World, pid: str, **params: Any) -> tuple[set[str], list[str]]:
    """The ids `pid` finds for "quokka" (hybrid) and the requests that search sent."""
    who = w.who(pid)  # read before counting: the caller holds its principal
    with counting(backend(w).client) as sent:
        resp = w.searcher.search(who, _req(**params))
    assert not resp.degraded  # both legs ran: the k-NN filter takes the lookup too
    return {r.id for r in resp.results}, sent


def _req(**params: Any) -> Any:
    from suli.search_params import search_request

    return search_request(params.pop("query", "quokka"), **params)


def test_core_search_and_browse_are_one_round_trip(world: World) -> None:
    ids, sent = seen(world, "prn_a")
    assert ids == {"itm_a", "itm_w"}
    # The legs (ids and scores only), then the page (items, highlights, replacements), each
    # with the visibility document's check; no count of its own.
    assert sent == SEARCH
    wide = world.with_settings(meaning_floor=-1.0, meaning_margin=2.0)  # every visible item
    ids, sent = seen(wide, "prn_a", mode="vector")  # filtered k-NN alone
    assert ids == {"itm_a", "itm_w"} and sent == SEARCH
    ids, sent = seen(world, "prn_a", query="")  # browse: no words
    assert ids == {"itm_a", "itm_w"}
    assert sent == ["POST _msearch"]  # one request: the page is the answer


def test_each_kind_of_write_applies_to_the_very_next_query(world: World) -> None:
    b = backend(world)
    b.put_acls([acl("brd_b", ["prn_a"])])  # ACL add
    assert seen(world, "prn_a") == ({"itm_a", "itm_b", "itm_w"}, SEARCH)
    b.put_acls([acl("brd_b", [], ["grp_x"])])  # ACL remove (and a group grant)
    # prn_a's boards were known from its last search: sent inline, found changed by the
    # check in the same request, and the legs asked again with the document's.
    assert seen(world, "prn_a") == ({"itm_a", "itm_w"}, AGAIN)
    assert seen(world, "prn_g")[0] == {"itm_b", "itm_w"}
    b.put_principals([principal("prn_g")])  # group change: out of grp_x
    assert seen(world, "prn_g") == ({"itm_w"}, SEARCH)
    assert b.claim_principal(principal("prn_g", "grp_x"))  # the HTTP write path: back in
    assert seen(world, "prn_g") == ({"itm_b", "itm_w"}, SEARCH)
    b.put_principals([principal("prn_g", workspace="ws_elsewhere")])  # moved away
    held = principal("prn_g", "grp_x")  # a caller still holding the principal as it was
    ids, sent = seen_as(world, held)
    assert ids == {"itm_b", "itm_w"}  # the held principal's own rule, as before this change
    # Its document (of another workspace now) is not used: the ACLs are read, as before.
    assert sent == FALLBACK


def seen_as(w: World, who: Principal) -> tuple[set[str], list[str]]:
    with counting(backend(w).client) as sent:
        ids = {r.id for r in w.searcher.search(who, _req()).results}
    return ids, sent


def test_writes_behind_the_documents_back_apply_at_once(
    world: World, os_client: OpenSearch
) -> None:
    """An ACL or principal changed without its visibility document (an older Suli, a hand
    edit, a writer that died half-way) never shows the old boards: the check sees the state
    moved and the search reads the ACLs as before."""
    b = backend(world)
    revoked = {**_acl_doc("brd_a", []), "name": "revoked by hand"}
    os_client.index(index=b.acl_index, id="acl:ws_main/brd_a", body=revoked, refresh=True)
    ids, sent = seen(world, "prn_a")
    assert ids == {"itm_w"}
    assert sent == FALLBACK  # ACLs read, as before
    os_client.delete(index=b.acl_index, id="principal:prn_g", refresh=True)  # principal gone
    ids, sent = seen_as(world, principal("prn_g", "grp_x"))
    # The legs' check refuses the document (its principal is gone) and the ACLs are read; the
    # document still lists exactly those boards, so the page is read by id under them.
    assert sent == FALLBACK[:4]
    assert ids == {"itm_w"}  # brd_b's ACL does not name grp_x
    b.ensure_ready()  # start-up: the gone principal's document goes too
    assert not os_client.exists(index=b.acl_index, id=doc_id("prn_g"))
    assert seen(world, "prn_a") == ({"itm_w"}, SEARCH)  # rebuilt from the hand edit


def _acl_doc(board: str, members: list[str]) -> dict[str, Any]:
    return {
        "doc_type": "acl",
        "board": board,
        "workspace": WS,
        "name": board,
        "members": members,
        "groups": [],
    }


def test_missing_document_falls_back_and_start_up_builds_it(
    world: World, os_client: OpenSearch
) -> None:
    b = backend(world)
    os_client.delete(index=b.acl_index, id=doc_id("prn_a"), refresh=True)
    ids, sent = seen(world, "prn_a")
    assert ids == {"itm_a", "itm_w"}  # neither everything nor nothing: the ACLs, as before
    assert sent == FALLBACK
    b.ensure_ready()  # what every start (and `suli reindex`) runs: builds missing documents
    assert seen(world, "prn_a") == ({"itm_a", "itm_w"}, SEARCH)


def test_concurrent_acl_and_principal_writes_leave_every_document_right(
    world: World, make_world: Callable[..., World]
) -> None:
    """Writers on their own clients race over the same boards and principals; afterwards
    each principal's document is the one the final ACLs give (and is used: one round trip)."""
    name = world.settings.index_alias
    writers = [backend(make_world(name)) for _ in range(6)]
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            for k in range(4):
                w = writers[n]
                if n % 3 == 2:
                    w.put_principals([principal("prn_g", *(["grp_x"] if k % 2 else []))])
                else:
                    members = ["prn_a"] if (n + k) % 2 else []
                    w.put_acls([acl(f"brd_{'ab'[n % 2]}", members, ["grp_x"])])
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    b = backend(world)
    acls = b.acls(WS)
    for pid in ("prn_a", "prn_g"):
        who = b.principal(pid)
        assert who is not None
        want = visibility_for(who, acls).boards
        stored = b.client.get(index=b.acl_index, id=doc_id(pid))["_source"]
        assert set(stored["board"]) == want
        ids, sent = seen(world, pid)
        assert sent == SEARCH  # the document is current, so it is used
        expected = {"itm_w"} | {i.id for i in ITEMS if i.board in want}
        assert ids == expected


class _PausingUpkeep(VisibilityUpkeep):
    """Visibility upkeep that stops once, after reading the ACLs for a recompute, until
    released: the interleaving where another writer's newer state lands in between, made
    certain."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn)
        self.read, self.go = threading.Event(), threading.Event()

    def _acls_with_seq(self, workspaces: set[str]) -> Any:
        got = super()._acls_with_seq(workspaces)
        if not self.read.is_set():
            self.read.set()
            assert self.go.wait(30)
        return got


class _PausingWriter:
    """The directory part alone over its own connection, with the pausing upkeep."""

    def __init__(self, settings: Settings, dimension: int, model: str) -> None:
        self.conn = Connection(settings, dimension, model)
        self.upkeep = _PausingUpkeep(self.conn)
        self.directory = AclDirectory(self.conn, self.upkeep)
        self.read, self.go = self.upkeep.read, self.upkeep.go
        self.failed: list[BaseException] = []

    def put_acls_reporting(self, acls: Any) -> None:
        try:
            self.directory.put_acls(acls)
        except BaseException as e:  # reported by the test
            self.failed.append(e)

    def close(self) -> None:
        self.conn.close()


def test_a_writer_working_from_an_older_state_never_overwrites_a_newer_document(
    world: World,
) -> None:
    """A grants brd_b to prn_a and reads the state; B revokes it and finishes; then A writes.
    A's document (from the older state) must not land: its write conflicts and it works
    again from the state now, so prn_a's next query does not see brd_b (in one round trip)."""
    b = backend(world)
    slow = _PausingWriter(b.settings, b.dimension, b.model)
    writer = threading.Thread(target=slow.put_acls_reporting, args=([acl("brd_b", ["prn_a"])],))
    writer.start()
    assert slow.read.wait(30)
    b.put_acls([acl("brd_b", [])])  # B: the newer state, written and done
    slow.go.set()
    writer.join(30)
    assert not slow.failed and not writer.is_alive()  # A finished: it recomputed, not gave up
    stored = b.client.get(index=b.acl_index, id=doc_id("prn_a"))["_source"]
    assert stored["board"] == ["brd_a"]
    assert seen(world, "prn_a") == ({"itm_a", "itm_w"}, SEARCH)
    slow.close()


def test_replacements_ride_along_and_total_needs_no_count(
    make_world: Callable[..., World],
) -> None:
    """A superseded item's replacement is checked in the page's own request; a text leg cut at
    depth with meaning-only hits answers a lower bound by default, and its exact `total`
    when asked, from the page's own request (which of the vector hits the words match), not
    from a count of its own."""
    emb = KeyedEmbedder()
    w = make_world()
    w.embedder = emb
    w.searcher = w.searcher.__class__(w.backend, emb, w.settings)
    many = [item(f"itm_q{n}", f"Quokka {n}", "quokka notes") for n in range(6)]
    old = item("itm_old", "Quokka plan", "quokka", superseded_by="itm_new", outcome="superseded")
    new = item("itm_new", "Plan", "the new plan")  # no word match: meaning only
    hidden = item("itm_h", "Quokka hidden plan", "quokka", superseded_by="itm_s")
    secret = item("itm_s", "Secret", "x", board="brd_s")
    emb.set("quokka", axis(0))
    for n, it in enumerate((hidden, new, old)):  # the vector leg's 3 nearest, in this order
        emb.set(it, blend(0, 1 + n, 0.99 - n / 100))
    for n, it in enumerate((*many, secret)):
        emb.set(it, blend(0, 10 + n, 0.6))
    w.load([*many, old, new, hidden, secret], [principal("prn_a")], [acl("brd_s", [])])
    shallow = w.with_settings(candidate_depth=3, meaning_floor=0.5, meaning_margin=0.5)
    who = shallow.who("prn_a")
    with counting(backend(w).client) as sent:
        free = shallow.searcher.search(who, _req(limit=25))
    assert sent == SEARCH  # legs, page by id: no count, no replacement lookup of their own
    # What came free: the words' 8 matches, at least ("gte").
    assert (free.total, free.total_relation) == (8, "gte")
    with counting(backend(w).client) as sent:
        resp = shallow.searcher.search(who, _req(limit=25, exact_total=True))
    # legs, then the page searched with the words' check riding along: still no count
    assert sent == ["POST _msearch", "POST _msearch"]
    assert [r.id for r in resp.results] == [r.id for r in free.results]
    got = {r.id: r for r in resp.results}
    # The vector leg holds itm_h, itm_new, itm_old. The words match 8
    # visible items (the text leg holds 3); itm_h and itm_old are word matches further down,
    # itm_new is meaning only: 8 + 1, each counted once ("gte": the cut vector leg's last hit
    # still passes the gates).
    assert {"itm_h", "itm_new", "itm_old"} <= set(got)
    assert (resp.total, resp.total_relation) == (9, "gte")
    assert got["itm_old"].superseded_by == "itm_new"  # visible: named
    assert got["itm_h"].superseded and got["itm_h"].superseded_by is None  # not visible


def test_related_round_trips(world: World) -> None:
    who = world.who("prn_a")
    with counting(backend(world).client) as sent:
        resp = world.searcher.related(who, item_id="itm_a")
    assert "itm_a" not in {r.id for r in resp.results}
    # the item, the items referencing it, then the legs and the page of the search
    assert sent == ["POST _msearch", "POST _msearch", *SEARCH]


def test_a_page_read_refused_on_every_node_is_searched_instead(world: World) -> None:
    """A node leaving (a restart, a rolling upgrade) can refuse the `_mget` on every connection
    the client tries: the page is then searched (with its own pauses and retries), never
    failed while the engine can still answer a search."""
    from opensearchpy import ConnectionError as Refused

    b = backend(world)
    who = world.who("prn_a")
    conns = list(b.client.transport.connection_pool.connections)
    for conn in conns:
        real = conn.perform_request

        def refusing(method: str, url: str, *a: Any, _real: Any = real, **kw: Any) -> Any:
            if url.split("?")[0].endswith("/_mget"):
                raise Refused("N/A", "connection refused (planted)", None)
            return _real(method, url, *a, **kw)

        conn.perform_request = refusing
    try:
        with counting(b.client) as sent:
            resp = world.searcher.search(who, _req())
    finally:
        for conn in conns:
            conn.__dict__.pop("perform_request", None)  # counting's exit took it already
    assert {r.id for r in resp.results} == {"itm_a", "itm_w"}
    assert sent[:2] == SEARCH and "POST _msearch" in sent[2:]  # the page searched after


@contextlib.contextmanager
def lookups(b: OpenSearchBackend) -> Iterator[list[bool]]:
    """Per `_msearch` sent inside the block: whether its legs looked the boards up."""
    real = b.client.msearch
    sent: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        sent.append('"path": "board"' in json.dumps(kwargs.get("body")))
        return real(*args, **kwargs)

    with mock.patch.object(b.client, "msearch", side_effect=spy):
        yield sent


def test_known_boards_go_inline_and_a_change_asks_the_legs_again(world: World) -> None:
    """Once a search has checked a principal's document, the next one sends its boards inline
    (no terms lookup on every shard) and checks the document in the same request: when it
    says other boards now, the legs are asked again with them, never answered from the old."""
    b = backend(world)
    with lookups(b) as looked_up:
        assert seen(world, "prn_a") == ({"itm_a", "itm_w"}, SEARCH)
        assert looked_up == [True]  # not known yet: the engine looks the boards up
        looked_up.clear()
        assert seen(world, "prn_a") == ({"itm_a", "itm_w"}, SEARCH)
        assert looked_up == [False]  # known: inline, checked in the same request
        looked_up.clear()
        b.put_acls([acl("brd_b", ["prn_a"])])  # a grant
        ids, sent = seen(world, "prn_a")
        assert ids == {"itm_a", "itm_b", "itm_w"}
        assert sent == AGAIN  # the legs asked again with the new boards
        assert looked_up == [False, False]
        b.put_acls([acl("brd_a", [])])  # a revoke
        resp = world.searcher.search(world.who("prn_a"), _req(facets=True, exact_total=True))
        assert {r.id for r in resp.results} == {"itm_b", "itm_w"}
        assert resp.total == 2  # counted by the legs asked again, not the old boards'
        assert resp.facets is not None and "brd_a" not in str(resp.facets)
        assert "brd_b" in str(resp.facets)


def test_a_caller_with_more_boards_than_go_inline_is_looked_up(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past INLINE_BOARDS the boards are not kept: the lookup stays, and the service holds no
    long board lists."""
    monkeypatch.setattr(reads, "INLINE_BOARDS", 1)
    b = backend(world)
    b.put_acls([acl("brd_b", ["prn_a"])])  # prn_a sees two boards now
    with lookups(b) as looked_up:
        for _ in range(2):
            assert seen(world, "prn_a") == ({"itm_a", "itm_b", "itm_w"}, SEARCH)
    assert looked_up == [True, True]
