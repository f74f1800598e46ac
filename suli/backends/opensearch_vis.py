"""Per-principal visibility documents in the ACL index: pure builders and checks.

`vis:<principal id>` holds the boards the principal may see (`board`), the workspace and
groups they were worked out for, and a stamp of the state they come from: how many documents
the rule read (the principal's own and its workspace's board ACLs) and the sum of their
`_seq_no`s. Every write to one of those documents raises the sum (sequence numbers only grow)
or changes the count, so the stamp names that state exactly.

A search reads the boards with a terms lookup inside its own `_msearch`, beside a check that
stamps the state as it is now; a document made from any other state, or for other groups, is
not used (the backend reads the ACLs instead, as before). So a writer that failed half-way,
an older Suli or a hand edit can make a search slower, never show or hide the wrong items.
Writers keep the documents current (OpenSearchBackend._refresh_visibility); the check is what
makes a stale one harmless.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from suli.models import BoardAcl, Principal
from suli.visibility import StoredBoards, Visibility, visibility_for

DOC_TYPE = "visibility"


def doc_id(principal_id: str) -> str:
    return f"vis:{principal_id}"


def principal_doc_id(principal_id: str) -> str:
    return f"principal:{principal_id}"


def stored(index: str, principal: Principal) -> Visibility:
    """The principal's visibility with its boards left to the engine (a terms lookup)."""
    boards = StoredBoards(index, doc_id(principal.id), frozenset(principal.groups))
    return Visibility(principal.workspace, principal.id, frozenset(), boards)


def state_filter(principal_id: str, workspace: str) -> dict[str, Any]:
    """The documents the rule reads for one principal: its own and its workspace's ACLs."""
    acls = {"bool": {"filter": [{"term": {"doc_type": "acl"}}, {"term": {"workspace": workspace}}]}}
    mine = {"ids": {"values": [principal_doc_id(principal_id)]}}
    return {"bool": {"should": [mine, acls], "minimum_should_match": 1}}


def check_body(vis: Visibility) -> dict[str, Any]:
    """The visibility document and the stamp of the state now, in one search of the ACL index."""
    assert vis.stored is not None
    state = {
        "filter": state_filter(vis.principal_id, vis.workspace),
        "aggs": {"seq": {"sum": {"field": "_seq_no"}}},
    }
    return {
        "size": 1,
        "query": {"ids": {"values": [vis.stored.doc]}},
        "aggs": {"all": {"global": {}, "aggs": {"state": state}}},
    }


def resolved(vis: Visibility, response: dict[str, Any]) -> Visibility | None:
    """The boards of a document made for these groups from the state as it is now; None (read
    the ACLs instead) for a failed check or a missing, other or outdated document."""
    assert vis.stored is not None
    if "error" in response or not response["hits"]["hits"]:
        return None
    doc = response["hits"]["hits"][0]["_source"]
    state = response["aggregations"]["all"]["state"]
    if (
        doc.get("workspace") != vis.workspace
        or frozenset(doc.get("groups") or ()) != vis.stored.groups
        or doc.get("seen_count") != state["doc_count"]
        or doc.get("seen_seq_sum") != int(state["seq"]["value"] or 0)
    ):
        return None
    return Visibility(vis.workspace, vis.principal_id, frozenset(doc.get("board") or ()))


def build(
    principal: Principal, principal_seq: int, acls: Sequence[tuple[BoardAcl, int]]
) -> dict[str, Any]:
    """The document for `principal` from its workspace's ACLs (each with its `_seq_no`)."""
    vis = visibility_for(principal, [a for a, _ in acls])
    return {
        "doc_type": DOC_TYPE,
        "principal_id": principal.id,
        "workspace": principal.workspace,
        "groups": sorted(set(principal.groups)),
        "board": sorted(vis.boards),
        "seen_count": 1 + len(acls),
        "seen_seq_sum": principal_seq + sum(seq for _, seq in acls),
    }
