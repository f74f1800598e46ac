"""The backend contract suite against a real OpenSearch (a fresh uuid-named alias per world)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from opensearchpy import OpenSearch

from suli.backends.base import LegQuery
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import Embedder
from suli.models import BoardAcl, Filters, Principal
from suli.visibility import Visibility, visibility_for

from .helpers import (
    WS,
    MakeSearcher,
    World,
    item,
    opensearch_settings,
    opensearch_world,
    principal,
    world_factory,
)
from .suite import BackendContract


class TestOpenSearchContract(BackendContract):
    @pytest.fixture(scope="class")
    @classmethod
    def make_searcher(cls, opensearch_url: str, os_client: OpenSearch) -> Iterator[MakeSearcher]:
        made: list[OpenSearchBackend] = []

        def build(emb: Embedder, overrides: dict[str, Any]) -> World:
            world = opensearch_world(opensearch_settings(opensearch_url, **overrides), emb)
            assert isinstance(world.backend, OpenSearchBackend)
            made.append(world.backend)
            return world

        yield world_factory(build)
        names = [n for b in made for n in (b.current_index(), b.acl_index) if n]
        # Few requests (each index deletion is a cluster-state update), each URL within the
        # node's 4,096-byte request line.
        for start in range(0, len(names), 40):
            os_client.indices.delete(index=",".join(names[start : start + 40]), ignore=[404])
        for backend in made:
            backend.close()


def _bare_world(opensearch_url: str) -> World:
    """A World on an index of its own, nothing loaded yet (its test calls ensure_ready and
    removes the index)."""
    return opensearch_world(opensearch_settings(opensearch_url), ready=False)


def test_equal_scores_come_back_by_id_not_in_storage_order(
    opensearch_url: str, os_client: OpenSearch
) -> None:
    """Lucene returns ties in doc-id order, which any write's segment merges (another
    workspace's too) can renumber; the legs order ties by item id, so the answer is stable."""
    world = _bare_world(opensearch_url)
    try:
        world.backend.ensure_ready()  # type: ignore[attr-defined]
        world.load([item("itm_2", "Quokka notes")], [principal("prn_a")])  # first segment
        world.load([item("itm_1", "Quokka notes")])  # a later segment: a higher doc id
        vis = Visibility(WS, "prn_a", frozenset())
        legs = world.backend.search(
            LegQuery(vis, Filters(), "quokka", [1.0] * world.embedder.dimension, 10)
        )
        assert [h.id for h in legs.text] == [h.id for h in legs.vector] == ["itm_1", "itm_2"]
        for mode in ("text", "hybrid"):
            assert world.ids("prn_a", "quokka notes", mode=mode) == ["itm_1", "itm_2"]
    finally:
        os_client.indices.delete(index=f"{world.settings.index_alias}*", ignore=[404])
        world.backend.close()


def test_a_token_without_a_recorded_workspace_still_opens_its_principals_session(
    opensearch_url: str, os_client: OpenSearch
) -> None:
    """Tokens made before `put_token` recorded the workspace open their principal's session;
    the session carries no ACLs (a search under it reads the visibility document), and a
    search as that principal sees its group's board."""
    from suli.auth import hash_token

    settings = opensearch_settings(opensearch_url)
    name = settings.index_alias
    backend = OpenSearchBackend(settings, 8, "fake")
    try:
        backend.ensure_ready()
        backend.put_principals([Principal("prn_p", "ws_main", "person", ("g",))])
        backend.put_acls([BoardAcl("brd_g", "ws_main", "", (), ("g",))])
        doc = {"doc_type": "token", "principal_id": "prn_p", "admin": False}  # no workspace
        os_client.index(index=settings.acl_index, id="token:old", body=doc, refresh=True)
        session = backend.session("old")
        assert session is not None and session.principal is not None
        assert session.principal.id == "prn_p"
        assert session.acls is None  # not read with the token (a quarter of the service's CPU)
        seen = visibility_for(session.principal, backend.acls("ws_main"))
        assert seen.boards == frozenset({"brd_g"})  # its groups came with the principal
        # The principal is gone: the token is known, its principal is not.
        os_client.delete(index=settings.acl_index, id="principal:prn_p", refresh=True)
        gone = backend.session("old")
        assert gone is not None and gone.principal is None
        assert backend.session(hash_token("anything")) is None
    finally:
        os_client.indices.delete(index=f"{name}*", ignore=[404])
        backend.close()


def test_the_text_leg_continues_after_a_hit_named_by_id(
    opensearch_url: str, os_client: OpenSearch
) -> None:
    """A text window past the first names the hit it continues after by id (never a score,
    #33); the backend finds that hit's sort values again, under the caller's visibility. Gone
    (deleted, invisible), the window starts at its offset, or, past the 10,000 hits an offset
    reaches, the caller is asked to start again."""
    from suli.errors import InvalidInput

    world = _bare_world(opensearch_url)
    try:
        world.backend.ensure_ready()  # type: ignore[attr-defined]
        mine = [item(f"itm_{n}", "Quokka", "quokka " * (1 + n)) for n in range(6)]
        secret = item("itm_secret", "Quokka", "quokka", board="brd_secret")
        world.load([*mine, secret], [principal("prn_a")])
        vis = Visibility(WS, "prn_a", frozenset())
        leg = LegQuery(vis, Filters(), "quokka", None, 2)
        order = [h.id for h in world.backend.search(replace(leg, depth=10)).text]
        assert len(order) == len(mine) and "itm_secret" not in order

        def window(**at: Any) -> list[str]:
            return [h.id for h in world.backend.search(replace(leg, **at)).text]

        assert window(text_offset=2, text_after=order[1]) == order[2:4]
        assert window(text_offset=3, text_after=order[1]) == order[2:4]  # the id decides
        # Gone, or never the caller's to see: from the offset instead.
        assert window(text_offset=3, text_after="itm_secret") == order[3:5]
        assert window(text_offset=3, text_after="itm_nowhere") == order[3:5]
        with pytest.raises(InvalidInput) as deep:
            window(text_offset=9_999, text_after="itm_nowhere")
        assert deep.value.field == "cursor"
    finally:
        os_client.indices.delete(index=f"{world.settings.index_alias}*", ignore=[404])
        world.backend.close()
