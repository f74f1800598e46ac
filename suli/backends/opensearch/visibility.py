"""Upkeep of the per-principal visibility documents (suli.backends.opensearch.visdocs says what
they hold and why a stale one is harmless): rewritten on every ACL and principal write."""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

from suli.backends.opensearch import visdocs
from suli.backends.opensearch.client import Connection, wrap
from suli.errors import BackendUnavailable
from suli.models import BoardAcl, Principal
from suli.visibility import Visibility, visibility_for

log = logging.getLogger(__name__)

# Rounds of recomputing a visibility document that a concurrent writer changed meanwhile.
VIS_ROUNDS = 20


def acl_of(s: dict[str, Any]) -> BoardAcl:
    return BoardAcl(
        s["board"],
        s["workspace"],
        s.get("name", ""),
        tuple(s.get("members", ())),
        tuple(s.get("groups", ())),
    )


def principal_of(s: dict[str, Any]) -> Principal:
    return Principal(
        s["principal_id"], s["workspace"], s.get("kind", "person"), tuple(s.get("groups", ()))
    )


class VisibilityUpkeep:
    """Reads of the ACL index the documents are made from, and their conflict-safe rewrite."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def of_workspaces(
        self, doc_type: str, workspaces: Iterable[str], *, seq: bool = False
    ) -> list[dict[str, Any]]:
        """The ACL-index hits of one document type in these workspaces (with `_seq_no` when
        `seq`); the index is small."""
        body: dict[str, Any] = {
            "size": 10_000,
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"doc_type": doc_type}},
                        {"terms": {"workspace": sorted(workspaces)}},
                    ]
                }
            },
        }
        if seq:
            body["seq_no_primary_term"] = True
        hits = self.conn.search(body, f"{doc_type} read", index=self.conn.acl_index)["hits"]["hits"]
        return list(hits)

    def acls(self, workspace: str) -> list[BoardAcl]:
        return [acl_of(h["_source"]) for h in self.of_workspaces("acl", [workspace])]

    def listing(self, doc_type: str) -> list[dict[str, Any]]:
        """Every ACL-index document of one type (_id and _source); the index is small."""
        body = {"size": 10_000, "query": {"term": {"doc_type": doc_type}}}
        conn = self.conn
        hits = conn.search(body, f"{doc_type} listing", index=conn.acl_index)["hits"]["hits"]
        return [{**h["_source"], "_id": h["_id"]} for h in hits]

    def _mget(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The ACL-index documents among ids that exist (realtime: every acknowledged write)."""
        conn = self.conn
        got = wrap(
            lambda: conn.client.mget(index=conn.acl_index, body={"ids": list(ids)}), "acl read"
        )
        return {d["_id"]: d for d in got["docs"] if d.get("found")}

    def _acls_with_seq(self, workspaces: set[str]) -> dict[str, list[tuple[BoardAcl, int]]]:
        out: dict[str, list[tuple[BoardAcl, int]]] = {w: [] for w in workspaces}
        if not workspaces:
            return out
        for h in self.of_workspaces("acl", workspaces, seq=True):
            acl = acl_of(h["_source"])
            out[acl.workspace].append((acl, int(h["_seq_no"])))
        return out

    def build(self) -> None:
        """Principals written before visibility documents existed (or by an older Suli) get
        theirs, documents of principals gone are deleted; current ones are left alone."""
        ids = [s["principal_id"] for s in self.listing("principal")]
        ids += [s["principal_id"] for s in self.listing(visdocs.DOC_TYPE)]
        self.rewrite(ids, only_changed=True)

    def _tokens_of(self, principal_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The token documents of these principals, with `_seq_no` (the index is small)."""
        body: dict[str, Any] = {
            "size": 10_000,
            "seq_no_primary_term": True,
            "_source": ["principal_id", *visdocs.TOKEN_FIELDS],
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"doc_type": "token"}},
                        {"terms": {"principal_id": sorted(principal_ids)}},
                    ]
                }
            },
        }
        return list(self.conn.search(body, "token read", index=self.conn.acl_index)["hits"]["hits"])

    def rewrite(self, principal_ids: Iterable[str], *, only_changed: bool = False) -> None:
        """Rewrite these principals' visibility documents, and the copy on each of their
        tokens (opensearch_vis, "the token's own copy"), from the principal and ACLs now.

        Each document is written only over the version read *before* that state
        (`if_seq_no`; `create` when there was none; a token's copy is an update, so a token
        revoked meanwhile is never made again): a writer working from an older state
        than another's can never overwrite the newer document, its write conflicts and it
        works again from the state now. So once every writer has returned, each document is
        the one the last state gives. `only_changed` (start-up's build) leaves current ones.
        """
        pending = list(dict.fromkeys(principal_ids))
        for rounds in range(VIS_ROUNDS):
            if not pending:
                return
            if rounds:  # a conflict: let the racing writers finish before reading again
                time.sleep(random.uniform(0, 0.02) * rounds)
            versions = self._mget([visdocs.doc_id(p) for p in pending])  # first: see above
            tokens = self._tokens_of(pending)  # also before the state
            found = self._mget([visdocs.principal_doc_id(p) for p in pending])
            acls = self._acls_with_seq({d["_source"]["workspace"] for d in found.values()})
            lines: list[dict[str, Any]] = []
            owner: dict[str, str] = {}  # written document id -> its principal
            built: dict[str, dict[str, Any]] = {}
            for pid in pending:
                vid = visdocs.doc_id(pid)
                old = versions.get(vid)
                cond = (
                    {"if_seq_no": old["_seq_no"], "if_primary_term": old["_primary_term"]}
                    if old
                    else {}
                )
                got = found.get(visdocs.principal_doc_id(pid))
                if got is None:  # no such principal (any more): no document either
                    if old:
                        lines.append({"delete": {"_id": vid, **cond}})
                        owner[vid] = pid
                    continue
                who = principal_of(got["_source"])
                doc = visdocs.build(who, int(got["_seq_no"]), acls.get(who.workspace, []))
                built[pid] = doc
                if only_changed and old and old["_source"] == doc:
                    continue
                lines += [{"index": {"_id": vid, **cond}} if old else {"create": {"_id": vid}}, doc]
                owner[vid] = pid
            for t in tokens:
                pid = t["_source"]["principal_id"]
                if pid not in built:  # its principal is gone: the token opens no session
                    continue
                fields = visdocs.token_fields(built[pid])
                if only_changed and all(t["_source"].get(k) == v for k, v in fields.items()):
                    continue
                cond = {"if_seq_no": t["_seq_no"], "if_primary_term": t["_primary_term"]}
                lines += [{"update": {"_id": t["_id"], **cond}}, {"doc": fields}]
                owner[t["_id"]] = pid
            if not lines:
                return
            send = functools.partial(
                self.conn.write_client.bulk, body=lines, index=self.conn.acl_index, refresh=True
            )
            resp = wrap(send, "visibility write")
            again: set[str] = set()
            for entry in resp["items"]:
                kind, op = next(iter(entry.items()))
                status = int(op.get("status") or 500)
                if status == 409:  # written meanwhile: work it out again from the state now
                    again.add(owner[op["_id"]])
                elif status == 404 and kind in ("delete", "update"):
                    continue  # gone meanwhile (a token revoked): nothing to keep current
                elif status >= 300:
                    raise BackendUnavailable(f"visibility write failed: {op.get('error')}")
            pending = sorted(again)
        if pending:
            raise BackendUnavailable(
                "visibility documents kept changing under concurrent writes; write again"
            )

    def token_visibility(self, token_hash: str) -> Visibility | None:
        """Everything read inside the search from the token's document (see opensearch_vis);
        None with per-workspace indices, where the index to search depends on the workspace."""
        if self.conn.isolated:
            return None
        return visdocs.by_token(self.conn.acl_index, token_hash)

    def stored_visibility(self, principal: Principal) -> Visibility:
        return visdocs.stored(self.conn.acl_index, principal)

    def from_acls(self, vis: Visibility) -> Visibility:
        """Today's path when a visibility document cannot be used: read the ACLs."""
        assert vis.stored is not None
        who = Principal(vis.principal_id, vis.workspace, groups=tuple(sorted(vis.stored.groups)))
        log.info("visibility document of %s not current: reading the ACLs", vis.principal_id)
        return visibility_for(who, self.acls(vis.workspace))
