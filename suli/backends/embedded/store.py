"""EmbeddedBackend: the store the core and the edges hold, composed of the package's parts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

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
from suli.backends.embedded.db import StoreFile
from suli.backends.embedded.directory import EmbeddedDirectory
from suli.backends.embedded.items import ItemStore
from suli.models import BoardAcl, Filters, Item, Principal
from suli.visibility import Visibility


class EmbeddedBackend:
    """Items, vectors, ACLs, principals and token hashes in one SQLite file (WAL mode).

    The item index (`items`) and the directory (`directory`) each hold the one `StoreFile`
    (`db`: the connections, the transaction helper, the schema); every method below is
    answered by the part that owns it.
    """

    def __init__(
        self, path: str | Path, dimension: int, *, model: str = "", check_model: bool = True
    ) -> None:
        """model: the embedder's; the store records it and refuses another (unless
        check_model is off: `suli reindex` re-embeds, then record_model)."""
        self.db = StoreFile(path, dimension, model=model, check_model=check_model)
        self.items = ItemStore(self.db)
        self.directory = EmbeddedDirectory(self.db)

    # ---- what callers read of the file -------------------------------------------------

    @property
    def path(self) -> Path:
        return self.db.path

    @property
    def dimension(self) -> int:
        return self.db.dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self.db.dimension = value

    @property
    def model(self) -> str:
        return self.db.model

    @model.setter
    def model(self, value: str) -> None:
        self.db.model = value

    @property
    def check_model(self) -> bool:
        return self.db.check_model

    @property
    def stored_model(self) -> str:
        """The model the store's vectors come from (`suli reindex` reports it)."""
        return self.db.stored_model

    def record_model(self) -> None:
        self.db.record_model()

    # ---- the item index ----------------------------------------------------------------

    def refresh(self) -> None:
        self.items.refresh()

    def search(self, query: LegQuery) -> LegResults:
        return self.items.search(query)

    def page(self, query: PageQuery) -> Page:
        return self.items.page(query)

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
        return self.items.browse(vis, filters, limit, timeout_s, regex, offset=offset, after=after)

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        return self.items.get_many(vis, ids)

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        return self.items.vectors(vis, ids)

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        return self.items.facets(vis, filters, match, cap, timeout_s)

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        return self.items.referencing(vis, item_id, limit)

    def count(self) -> int:
        return self.items.count()

    def all_items(self) -> Iterator[Item]:
        return self.items.all_items()

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        return self.items.upsert(items)

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        return self.items.stored_hashes(keys)

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        return self.items.delete(workspace, ids)

    def ping(self) -> dict[str, object]:
        return self.items.ping()

    def close(self) -> None:
        self.items.close()

    # ---- the directory -----------------------------------------------------------------

    def token_visibility(self, token_hash: str) -> Visibility | None:
        return self.directory.token_visibility(token_hash)

    def stored_visibility(self, principal: Principal) -> Visibility | None:
        return self.directory.stored_visibility(principal)

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

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        return self.directory.token(token_hash)

    def session(self, token_hash: str) -> Session | None:
        return self.directory.session(token_hash)

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        return self.directory.revoke_token(token_hash_or_prefix)

    def list_tokens(self) -> list[TokenInfo]:
        return self.directory.list_tokens()
