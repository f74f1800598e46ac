"""The directory of the embedded store: board ACLs, principals, API tokens and sessions.

`EmbeddedDirectory` is the embedded half of the `base.Directory` protocol (named apart from it),
over the `StoreFile` it is given; it reads and writes the `acls`, `principals` and `tokens`
tables and nothing of the items.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from suli.backends.base import Session, TokenInfo
from suli.backends.embedded.db import StoreFile
from suli.errors import NotFound
from suli.models import BoardAcl, Principal
from suli.visibility import Visibility


class EmbeddedDirectory:
    """ACLs, principals and token hashes in the store file."""

    def __init__(self, db: StoreFile) -> None:
        self.db = db

    def token_visibility(self, token_hash: str) -> Visibility | None:
        return None  # no round trips to save: the session is read first

    def stored_visibility(self, principal: Principal) -> Visibility | None:
        return None  # SQLite is in-process: reading the ACLs costs no round trip

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        with self.db.tx(write=True) as c:
            c.executemany(
                "INSERT OR REPLACE INTO acls VALUES (?, ?, ?, ?, ?)",
                [(a.board, a.workspace, a.name, json.dumps(list(a.members)), json.dumps(list(a.groups)))
                 for a in acls],
            )  # fmt: skip

    def acls(self, workspace: str) -> list[BoardAcl]:
        with self.db.tx() as c:
            rows = c.execute(
                "SELECT board, workspace, name, members, groups_ FROM acls WHERE workspace = ? ORDER BY board",
                (workspace,),
            ).fetchall()
        return [
            BoardAcl(b, w, n, tuple(json.loads(m)), tuple(json.loads(g))) for b, w, n, m, g in rows
        ]

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        with self.db.tx() as c:
            row = c.execute(
                "SELECT board, workspace, name, members, groups_ FROM acls "
                "WHERE workspace = ? AND board = ?",
                (workspace, board),
            ).fetchone()
        if row is None:
            return None
        b, w, n, m, g = row
        return BoardAcl(b, w, n, tuple(json.loads(m)), tuple(json.loads(g)))

    def put_principals(self, principals: Sequence[Principal]) -> None:
        with self.db.tx(write=True) as c:
            c.executemany(
                "INSERT OR REPLACE INTO principals VALUES (?, ?, ?, ?)",
                [(p.id, p.workspace, p.kind, json.dumps(list(p.groups))) for p in principals],
            )

    def claim_principal(self, principal: Principal) -> bool:
        """One statement: the row is written only when absent or of the same workspace."""
        p = principal
        with self.db.tx(write=True) as c:
            n = c.execute(
                "INSERT INTO principals VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "kind = excluded.kind, groups_ = excluded.groups_ "
                "WHERE principals.workspace = excluded.workspace",
                (p.id, p.workspace, p.kind, json.dumps(list(p.groups))),
            ).rowcount
        return n == 1

    def principal(self, principal_id: str) -> Principal | None:
        with self.db.tx() as c:
            row = c.execute(
                "SELECT id, workspace, kind, groups_ FROM principals WHERE id = ?", (principal_id,)
            ).fetchone()
        return None if row is None else Principal(row[0], row[1], row[2], tuple(json.loads(row[3])))

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        with self.db.tx(write=True) as c:
            c.execute(
                "INSERT OR REPLACE INTO tokens VALUES (?, ?, ?, ?)",
                (token_hash, principal_id, int(admin), datetime.now(UTC).isoformat()),
            )

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        with self.db.tx() as c:
            row = c.execute(
                "SELECT principal_id, admin FROM tokens WHERE hash = ?", (token_hash,)
            ).fetchone()
        return None if row is None else (row[0], bool(row[1]))

    def session(self, token_hash: str) -> Session | None:
        found = self.token(token_hash)
        if found is None:
            return None
        principal = self.principal(found[0])
        acls = tuple(self.acls(principal.workspace)) if principal else ()
        return Session(principal, found[1], acls)

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        """Revoke by the exact hash (as the OpenSearch backend does)."""
        with self.db.tx(write=True) as c:
            n = c.execute("DELETE FROM tokens WHERE hash = ?", (token_hash_or_prefix,)).rowcount
        if not n:
            raise NotFound("no such token")
        return int(n)

    def list_principals(self) -> list[Principal]:
        with self.db.tx() as c:
            rows = c.execute("SELECT id, workspace, kind, groups_ FROM principals ORDER BY id")
            return [Principal(i, w, k, tuple(json.loads(g))) for i, w, k, g in rows.fetchall()]

    def list_acls(self) -> list[BoardAcl]:
        with self.db.tx() as c:
            rows = c.execute(
                "SELECT board, workspace, name, members, groups_ FROM acls ORDER BY board"
            ).fetchall()
        return [
            BoardAcl(b, w, n, tuple(json.loads(m)), tuple(json.loads(g))) for b, w, n, m, g in rows
        ]

    def list_tokens(self) -> list[TokenInfo]:
        with self.db.tx() as c:
            rows = c.execute(
                "SELECT hash, principal_id, admin, created_at FROM tokens "
                "ORDER BY principal_id, created_at"
            ).fetchall()
        return [TokenInfo(h, p, bool(a), str(t)) for h, p, a, t in rows]
