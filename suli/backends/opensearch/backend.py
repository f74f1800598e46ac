"""OpenSearchBackend: the store the core and the edges hold, composed of the package's parts."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any, Self

from opensearchpy import OpenSearch

from suli.backends.base import (
    FACET_CAP,
    BrowseKey,
    BulkOutcome,
    Facets,
    LegQuery,
    LegResults,
    MatchSet,
    Page,
    PageQuery,
    Session,
    TokenInfo,
)
from suli.backends.opensearch.client import Connection
from suli.backends.opensearch.directory import AclDirectory
from suli.backends.opensearch.indices import Indices
from suli.backends.opensearch.reads import Reads
from suli.backends.opensearch.visibility import VisibilityUpkeep
from suli.backends.opensearch.workspaces import Workspaces
from suli.backends.opensearch.writes import Writes
from suli.models import BoardAcl, Filters, Item, Principal
from suli.settings import Settings
from suli.visibility import Visibility


class OpenSearchBackend:
    """Items behind the alias `settings.index_alias`; ACLs, principals and tokens in `acl_index`.

    Each part holds the one `Connection` (settings, both clients, the time budget) and the
    parts it asks, given here; every method below is answered by the part that owns it.
    """

    def __init__(self, settings: Settings, dimension: int, model: str = "") -> None:
        self._compose(Connection(settings, dimension, model))

    def _compose(self, conn: Connection) -> None:
        self.conn = conn
        self.visibility = VisibilityUpkeep(conn)
        self.directory = AclDirectory(conn, self.visibility)
        self.indices = Indices(conn)
        self.workspaces = Workspaces(conn)
        self.reads = Reads(conn, self.visibility, self.indices, self.workspaces)
        self.writes = Writes(conn, self.indices, self.workspaces)

    def for_workspace(self, workspace: str) -> Self:
        """This backend on one workspace's alias alone, as if it were the shared one (what
        `suli reindex` and its rollback work on); clients are shared, not copied."""
        view = copy.copy(self)
        view._compose(self.workspaces.view(workspace))
        return view

    def workspace_views(self) -> list[Self]:
        return [self.for_workspace(w) for w in self.workspaces.workspace_aliases().values()]

    # ---- what callers read of the connection -------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.conn.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        """Every part reads the connection's settings (a test or bench swaps `ef_search`)."""
        self.conn.settings = settings

    @property
    def dimension(self) -> int:
        return self.conn.dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self.conn.dimension = value

    @property
    def model(self) -> str:
        return self.conn.model

    @model.setter
    def model(self, value: str) -> None:
        self.conn.model = value

    @property
    def client(self) -> OpenSearch:
        return self.conn.client

    @property
    def write_client(self) -> OpenSearch:
        return self.conn.write_client

    @property
    def alias(self) -> str:
        return self.conn.alias

    @property
    def acl_index(self) -> str:
        return self.conn.acl_index

    @property
    def isolated(self) -> bool:
        return self.conn.isolated

    # ---- indices -----------------------------------------------------------------------

    def ensure_ready(self) -> None:
        """Create what is missing (items index + alias, ACL index), migrate what an older
        Suli left (ACL fields and keys), and give every principal its visibility document."""
        self.indices.ensure_ready()
        self.directory.rekey_acls()
        self.visibility.build()

    def physical_name(self) -> str:
        return self.indices.physical_name()

    def index_body(self, shards: int | None = None, replicas: int | None = None) -> dict[str, Any]:
        return self.indices.index_body(shards, replicas)

    def create_physical(self, shards: int | None = None, replicas: int | None = None) -> str:
        return self.indices.create_physical(shards, replicas)

    def current_index(self) -> str | None:
        return self.indices.current_index()

    def live_model(self) -> str:
        return self.indices.live_model()

    def ping(self) -> dict[str, object]:
        return self.indices.ping()

    def workspace_aliases(self) -> dict[str, str]:
        return self.workspaces.workspace_aliases()

    def refresh(self) -> None:
        self.workspaces.refresh()

    def close(self) -> None:
        self.conn.close()

    # ---- reads -------------------------------------------------------------------------

    def search(self, query: LegQuery) -> LegResults:
        return self.reads.search(query)

    def page(self, query: PageQuery) -> Page:
        return self.reads.page(query)

    def browse(
        self,
        vis: Visibility,
        filters: Filters,
        limit: int,
        timeout_s: float | None = None,
        regex: str | None = None,
        *,
        offset: int = 0,
        after: BrowseKey | None = None,
    ) -> tuple[list[Item], int]:
        return self.reads.browse(vis, filters, limit, timeout_s, regex, offset=offset, after=after)

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        return self.reads.get_many(vis, ids)

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        return self.reads.vectors(vis, ids)

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        return self.reads.facets(vis, filters, match, cap, timeout_s)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        return self.reads.referencing(vis, item_id, limit)

    def count(self) -> int:
        return self.reads.count()

    def all_items(self) -> Iterator[Item]:
        return self.reads.all_items()

    # ---- writes ------------------------------------------------------------------------

    def upsert(
        self, items: Sequence[tuple[Item, Sequence[float] | None]], index: str | None = None
    ) -> BulkOutcome:
        return self.writes.upsert(items, index)

    def stored_hashes(self, keyed: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return self.writes.stored_hashes(keyed)

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        return self.writes.delete(workspace, ids)

    # ---- the directory -----------------------------------------------------------------

    def stored_visibility(self, principal: Principal) -> Visibility:
        return self.visibility.stored_visibility(principal)

    def token_visibility(self, token_hash: str) -> Visibility | None:
        return self.visibility.token_visibility(token_hash)

    def build_visibility(self) -> None:
        self.visibility.build()

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        self.directory.put_acls(acls)

    def acls(self, workspace: str) -> list[BoardAcl]:
        return self.directory.acls(workspace)

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        return self.directory.acl(workspace, board)

    def list_acls(self) -> list[BoardAcl]:
        return self.directory.list_acls()

    def put_principals(self, principals: Sequence[Principal]) -> None:
        self.directory.put_principals(principals)

    def claim_principal(self, principal: Principal) -> bool:
        return self.directory.claim_principal(principal)

    def principal(self, principal_id: str) -> Principal | None:
        return self.directory.principal(principal_id)

    def list_principals(self) -> list[Principal]:
        return self.directory.list_principals()

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        self.directory.put_token(token_hash, principal_id, admin)

    def session(self, token_hash: str) -> Session | None:
        return self.directory.session(token_hash)

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        return self.directory.token(token_hash)

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        return self.directory.revoke_token(token_hash_or_prefix)

    def list_tokens(self) -> list[TokenInfo]:
        return self.directory.list_tokens()
