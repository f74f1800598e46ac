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
Writers keep the documents current (`VisibilityUpkeep.rewrite` in visibility.py); the check is
what makes a stale one harmless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


# ---- the token's own copy: a search and its session in one round trip --------------------
#
# Each token document carries the same fields for its principal (`board`, `groups`,
# `seen_count`, `seen_seq_sum`), rewritten by the same writer as `vis:<principal>`. A search
# that holds only the token's hash reads everything from that one document inside its own
# request: the workspace, the principal id (personal uploads) and the boards, each a terms
# lookup. A revoked token has no document, so every lookup finds nothing and the legs match
# nothing; the session part of the same answer says so, and the caller answers 401 before any
# hit is read. A document from another state is not used, as above (the backend reads the ACLs).

TOKEN_FIELDS = ("board", "groups", "seen_count", "seen_seq_sum")


@dataclass(frozen=True)
class TokenBoards(StoredBoards):
    """Workspace, principal id and boards all read by the engine from the token's document
    (`doc`); the Visibility's own workspace and principal id are unknown ("") until then."""


def token_doc_id(token_hash: str) -> str:
    return f"token:{token_hash}"


def by_token(index: str, token_hash: str) -> Visibility:
    """A visibility known only by the token: everything is looked up in the engine."""
    return Visibility(
        "", "", frozenset(), TokenBoards(index, token_doc_id(token_hash), frozenset())
    )


def lookup(vis: Visibility, path: str) -> dict[str, str]:
    """A terms lookup of `path` in the visibility's stored document."""
    assert vis.stored is not None
    return {"index": vis.stored.index, "id": vis.stored.doc, "path": path}


def token_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The visibility part of a `build` document, as kept on a token document."""
    return {k: doc[k] for k in TOKEN_FIELDS}


def token_bodies(vis: Visibility) -> list[dict[str, Any]]:
    """Two searches of the ACL index: the token document with the stamp of the state now
    (its principal's document and its workspace's ACLs, found by lookups on the token), and
    the principal's document (a lookup on the token's `principal_id`)."""

    def of_type(doc_type: str, field: str) -> dict[str, Any]:
        terms = {"terms": {field: lookup(vis, field)}}
        return {"bool": {"filter": [{"term": {"doc_type": doc_type}}, terms]}}

    state = {
        "filter": {
            "bool": {
                "should": [of_type("principal", "principal_id"), of_type("acl", "workspace")],
                "minimum_should_match": 1,
            }
        },
        "aggs": {"seq": {"sum": {"field": "_seq_no"}}},
    }
    assert vis.stored is not None
    check = {
        "size": 1,
        "query": {"ids": {"values": [vis.stored.doc]}},
        "aggs": {"all": {"global": {}, "aggs": {"state": state}}},
    }
    return [check, {"size": 1, "query": of_type("principal", "principal_id")}]


@dataclass(frozen=True)
class TokenAnswer:
    """What the session part of a search by token found: the token document (None: unknown
    or revoked), its principal (None: gone) and, when the token's copy is current, the
    visibility the engine applied (else None: the ACLs must be read)."""

    token: dict[str, Any] | None
    principal: Principal | None
    vis: Visibility | None


def token_resolved(check: dict[str, Any], owner: dict[str, Any]) -> TokenAnswer:
    if not check["hits"]["hits"]:
        return TokenAnswer(None, None, None)
    doc = check["hits"]["hits"][0]["_source"]
    hits = owner["hits"]["hits"]
    if not hits:
        return TokenAnswer(doc, None, None)
    s = hits[0]["_source"]
    who = Principal(
        s["principal_id"], s["workspace"], s.get("kind", "person"), tuple(s.get("groups", ()))
    )
    state = check["aggregations"]["all"]["state"]
    current = (
        doc.get("principal_id") == who.id
        and doc.get("workspace") == who.workspace
        and frozenset(doc.get("groups") or ()) == frozenset(who.groups)
        and doc.get("seen_count") == state["doc_count"]
        and doc.get("seen_seq_sum") == int(state["seq"]["value"] or 0)
    )
    if not current:
        return TokenAnswer(doc, who, None)
    return TokenAnswer(
        doc, who, Visibility(who.workspace, who.id, frozenset(doc.get("board") or ()))
    )
