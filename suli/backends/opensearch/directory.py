"""The directory in the ACL index: board ACLs, principals, API tokens and sessions.

`AclDirectory` is OpenSearch's half of the `base.Directory` protocol; the visibility part it
is given keeps each principal's visibility document current as the directory changes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import opensearchpy

from suli.backends.base import Session, TokenInfo
from suli.backends.opensearch import keys
from suli.backends.opensearch.client import Connection, wrap
from suli.backends.opensearch.visibility import VisibilityUpkeep, acl_of, principal_of
from suli.errors import BackendUnavailable, DeadlineExceeded, NotFound
from suli.models import BoardAcl, Principal

log = logging.getLogger(__name__)


def acl_id(workspace: str, board: str) -> str:
    """The ACL-index `_id` of one board's ACL."""
    return f"acl:{keys.key(workspace, board)}"


class AclDirectory:
    """ACLs, principals and tokens; every ACL and principal write updates the visibility
    documents it touches (through `visibility`) before it returns."""

    def __init__(self, conn: Connection, visibility: VisibilityUpkeep) -> None:
        self.conn = conn
        self.visibility = visibility

    def _put(self, doc_id: str, doc: dict[str, Any]) -> None:
        conn = self.conn
        wrap(
            lambda: conn.write_client.index(
                index=conn.acl_index, id=doc_id, body=doc, refresh=True
            ),
            "acl write",
        )

    def _get(self, doc_id: str) -> dict[str, Any] | None:
        params = self.conn.read_params()
        params.pop("timeout", None)  # not a parameter of get
        try:
            source: dict[str, Any] = self.conn.client.get(
                index=self.conn.acl_index, id=doc_id, params=params
            )["_source"]
            return source
        except opensearchpy.NotFoundError:
            return None
        except opensearchpy.ConnectionTimeout as e:  # a ConnectionError too: this one first
            raise DeadlineExceeded("OpenSearch did not answer an ACL read in time") from e
        except opensearchpy.ConnectionError as e:
            raise BackendUnavailable(f"OpenSearch is unreachable: {e}") from e

    # ---- board ACLs --------------------------------------------------------------------

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        """Write the ACLs, then bring their workspaces' visibility documents up to date: the
        call returns (is acknowledged) only once both are searchable."""
        for a in acls:
            self._put(
                acl_id(a.workspace, a.board),
                {
                    "doc_type": "acl",
                    "board": a.board,
                    "workspace": a.workspace,
                    "name": a.name,
                    "members": list(a.members),
                    "groups": list(a.groups),
                },
            )
        if acls:
            self.visibility.rewrite(self._principal_ids({a.workspace for a in acls}))

    def acls(self, workspace: str) -> list[BoardAcl]:
        return self.visibility.acls(workspace)

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        s = self._get(acl_id(workspace, board))
        return None if s is None else acl_of(s)

    def list_acls(self) -> list[BoardAcl]:
        return sorted((acl_of(s) for s in self.visibility.listing("acl")), key=lambda a: a.board)

    def rekey_acls(self) -> None:
        """ACL documents of before per-workspace board keys (`acl:<board>`) move to
        `acl:<workspace>/<board>`; idempotent, and the ACL index is small."""
        body = {"size": 10_000, "query": {"term": {"doc_type": "acl"}}}
        hits = self.conn.search(body, "acl read", index=self.conn.acl_index)["hits"]["hits"]
        old = [
            h for h in hits if h["_id"] != acl_id(h["_source"]["workspace"], h["_source"]["board"])
        ]
        for h in old:
            self._put(acl_id(h["_source"]["workspace"], h["_source"]["board"]), h["_source"])
            with contextlib.suppress(opensearchpy.NotFoundError):
                self.conn.write_client.delete(index=self.conn.acl_index, id=h["_id"], refresh=True)
        if old:
            log.warning("moved %d board ACLs to per-workspace keys", len(old))

    # ---- principals --------------------------------------------------------------------

    def _principal_ids(self, workspaces: Iterable[str]) -> list[str]:
        found = self.visibility.of_workspaces("principal", workspaces)
        return [h["_source"]["principal_id"] for h in found]

    @staticmethod
    def _principal_doc(p: Principal) -> dict[str, Any]:
        return {
            "doc_type": "principal",
            "principal_id": p.id,
            "workspace": p.workspace,
            "kind": p.kind,
            "groups": list(p.groups),
        }

    def put_principals(self, principals: Sequence[Principal]) -> None:
        for p in principals:
            self._put(f"principal:{p.id}", self._principal_doc(p))
        self.visibility.rewrite(p.id for p in principals)

    def claim_principal(self, principal: Principal) -> bool:
        """Create (`op_type=create`) or replace only the version just read (`if_seq_no`):
        two workspaces racing for one id get one winner, never a silent replacement."""
        doc_id, doc = f"principal:{principal.id}", self._principal_doc(principal)
        while True:
            try:
                got = self.conn.client.get(index=self.conn.acl_index, id=doc_id)
            except opensearchpy.NotFoundError:
                got = None
            except opensearchpy.ConnectionError as e:
                raise BackendUnavailable(f"OpenSearch is unreachable: {e}") from e
            if got is not None and got["_source"].get("workspace") != principal.workspace:
                return False
            cond: dict[str, Any] = (
                {"op_type": "create"}
                if got is None
                else {"if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"]}
            )
            write = functools.partial(
                self.conn.write_client.index,
                index=self.conn.acl_index,
                id=doc_id,
                body=doc,
                refresh=True,
                params=cond,
            )
            try:
                wrap(write, "principal write")
            except opensearchpy.ConflictError:
                continue  # written meanwhile: read the new owner and decide again
            self.visibility.rewrite([principal.id])
            return True

    def principal(self, principal_id: str) -> Principal | None:
        s = self._get(f"principal:{principal_id}")
        return None if s is None else principal_of(s)

    def list_principals(self) -> list[Principal]:
        listed = self.visibility.listing("principal")
        return sorted((principal_of(s) for s in listed), key=lambda p: p.id)

    # ---- tokens and sessions -----------------------------------------------------------

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        # The principal's workspace is kept on the token so `session` can read the workspace's
        # ACLs in the same round trip as the token and the principal.
        owner = self.principal(principal_id)
        self._put(
            f"token:{token_hash}",
            {
                "doc_type": "token",
                "principal_id": principal_id,
                "workspace": owner.workspace if owner else None,
                "admin": admin,
                "created_at": datetime.now(UTC).isoformat(),
            },
        )
        # Then the token's copy of its principal's visibility (searches by token read it).
        self.visibility.rewrite([principal_id], only_changed=True)

    def session(self, token_hash: str) -> Session | None:
        """One `_msearch` on the ACL index: the token document and its principal (a terms
        lookup on the token's `principal_id`). Not the workspace's ACLs: a search under the
        session reads the caller's visibility document with its legs (one lookup), where the
        ACLs were up to 10,000 documents read and parsed on every POST's token check (a
        quarter of the service's CPU under load: bench/RESULTS.md 25)."""
        doc = f"token:{token_hash}"
        acl_index = self.conn.acl_index

        def on_token(path: str) -> dict[str, str]:
            return {"index": acl_index, "id": doc, "path": path}

        def of_type(doc_type: str, field: str) -> dict[str, Any]:
            terms = {"terms": {field: on_token(field)}}
            return {"bool": {"filter": [{"term": {"doc_type": doc_type}}, terms]}}

        searches = [
            {"size": 1, "query": {"ids": {"values": [doc]}}},
            {"size": 1, "query": of_type("principal", "principal_id")},
        ]
        lines: list[dict[str, Any]] = []
        for body in searches:
            lines += [{"index": acl_index}, body]
        params = self.conn.read_params()
        params.pop("timeout", None)  # the token lookup is not a search to cut short
        got = wrap(lambda: self.conn.client.msearch(body=lines, params=params), "session read")[
            "responses"
        ]
        for r in got:
            if "error" in r:
                if r.get("status") == 404:  # no ACL index yet: no token exists
                    return None
                raise BackendUnavailable(f"session read failed: {r['error']}")
        tokens, principals = (r["hits"]["hits"] for r in got)
        if not tokens:
            return None
        token = tokens[0]["_source"]
        admin = bool(token.get("admin"))
        if not principals:
            return Session(None, admin)
        return Session(principal_of(principals[0]["_source"]), admin)

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        s = self._get(f"token:{token_hash}")
        return None if s is None else (s["principal_id"], bool(s.get("admin")))

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        doc_id = f"token:{token_hash_or_prefix}"
        try:
            self.conn.write_client.delete(index=self.conn.acl_index, id=doc_id, refresh=True)
        except opensearchpy.NotFoundError:
            raise NotFound("no such token") from None
        return 1

    def list_tokens(self) -> list[TokenInfo]:
        got = [
            TokenInfo(
                s["_id"].removeprefix("token:"),
                s["principal_id"],
                bool(s.get("admin")),
                str(s.get("created_at") or ""),
            )
            for s in self.visibility.listing("token")
        ]
        return sorted(got, key=lambda t: (t.principal_id, t.created_at))
