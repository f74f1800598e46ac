"""The backend protocols: the item index (ranked lists per leg, plain item storage) and the
directory (ACLs, principals, tokens). No fusion inside either, and the one visibility rule is
suli.visibility's (a backend may store its result, never its own rule).

`Backend` is both together; each real backend implements both, and code that needs only one
side (auth: the directory) takes only that side. What only operators' tools ask (counts,
listings, export, health) is `Admin`, apart; `Store` is all of it, as the edges open a store."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, cast, runtime_checkable

from suli.models import BoardAcl, FacetCounts, Filters, Item, Principal
from suli.visibility import Visibility

TextFields = Literal["stemmed", "plain"]


@dataclass(frozen=True)
class LegQuery:
    """Both legs of one search, sent together (one round trip where the backend allows)."""

    vis: Visibility
    filters: Filters
    text: str | None  # None: no text leg
    vector: Sequence[float] | None  # None: no vector leg
    depth: int
    # "stemmed": English-analysed fields, common words dropped; "plain": every word counts
    # (used only when the query has nothing but common words; DESIGN 3.5).
    text_fields: TextFields = "stemmed"
    regex: str | None = None  # regex mode: replaces the text leg
    timeout_s: float | None = None
    # Where the text leg starts in its own (score, id) order, for text-mode pages past the
    # first `depth` matches: skip `text_offset` hits; or, on a backend that continues after sort
    # values, start after the hit whose item id is `text_after` (the previous window's last
    # hit), whose sort values the backend finds again itself. The caller never holds a score:
    # BM25 moves with every tenant's documents, so a score in a cursor would count them.
    text_offset: int = 0
    text_after: str | None = None
    # Count the text leg's matches up to this many (None: all of them, exactly). Past it the
    # count is a lower bound (LegResults.text_total_exact False) and the engine may skip
    # documents that cannot reach the top `depth`, as Elasticsearch's track_total_hits does.
    count_to: int | None = None


class Hit:
    """One ranked hit of one leg: only what fusion, the gates, explain and the page read.

    score: BM25 for text, cosine similarity for vector. `index`: the physical index the hit
    was found in, where the backend has several (the page is then read from it by id), else
    None.
    """

    __slots__ = ("id", "index", "outcome", "score", "superseded_by")

    def __init__(
        self,
        item_id: str,
        score: float,
        outcome: str | None = None,
        superseded_by: str | None = None,
        index: str | None = None,
    ) -> None:
        self.id, self.score, self.outcome = item_id, score, outcome
        self.superseded_by, self.index = superseded_by, index

    def __repr__(self) -> str:
        return f"Hit({self.id!r}, {self.score!r})"


@dataclass(frozen=True)
class LegResults:
    text: tuple[Hit, ...] = ()
    vector: tuple[Hit, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)  # leg -> reason, for degraded mode
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Exact count of the text leg's matches under the query's filters (all of them, not
    # just the `depth` returned); None when the backend could not count.
    text_total: int | None = None
    text_total_exact: bool = True  # False: text_total is a lower bound (LegQuery.count_to)
    # The boards the engine read for a query whose visibility was stored (explicit from here
    # on: the request's later reads need not look them up again); None otherwise.
    vis: Visibility | None = None
    # The vector hits that the text leg's query also matches under the same filters (so
    # `total` needs no second count); None when the backend did not check (then the page
    # fetch may: PageQuery.words_of).
    word_matches: frozenset[str] | None = None
    # A query whose visibility was known only by a token (Directory.token_visibility): what
    # the token stands for, read in the same request (None there: unknown or revoked token,
    # and no hit was read). None for every other query.
    session: Session | None = None


@dataclass(frozen=True)
class PageQuery:
    """The page of a search, fetched after fusion: the items (in `ids`, ranked) the caller
    may still see under the search's filters (the core makes their snippets from them,
    suli.snippets) and the replacements named
    by superseded items that the caller may see, in one request where the backend allows."""

    vis: Visibility
    ids: tuple[str, ...]
    filters: Filters = field(default_factory=Filters)
    regex: str | None = None
    text: str | None = None  # the text leg's words (for the words' check: `words_of`)
    text_fields: TextFields = "stemmed"
    replacements: tuple[str, ...] = ()  # superseded_by ids to check for visibility
    # Meaning-only hits (found under the search's visibility and filters) to check against
    # the text leg's words (Page.word_matches), for an exact `total` without a count of its
    # own; only asked when the legs did not say (LegResults.word_matches None). A backend may
    # ignore it, and `total` is then counted apart.
    words_of: tuple[str, ...] = ()
    # Where the legs found the page (Hit.index, when they all name one) and the visibility
    # they were answered under, its boards known: a backend may then read the page by id and
    # check it in the core (suli.visibility.can_see, suli.filtering.passes), provided the
    # caller's visibility is read in the same request.
    index: str | None = None
    checked: Visibility | None = None


@dataclass(frozen=True)
class Page:
    items: dict[str, Item] = field(default_factory=dict)  # visible ones among PageQuery.ids
    replacements: frozenset[str] = frozenset()  # the visible ones among PageQuery.replacements
    # The ones among PageQuery.words_of the words match; None when not checked.
    word_matches: frozenset[str] | None = None


@dataclass(frozen=True)
class BulkOutcome:
    """Per-item outcome of a write: every id ends as indexed or rejected with a reason
    (a delete: `indexed` names the ids removed, `missing` those its workspace did not hold)."""

    indexed: tuple[str, ...] = ()
    rejected: dict[str, str] = field(default_factory=dict)
    retries: int = 0
    missing: tuple[str, ...] = ()


# Where browse continues: (last_activity_at, id) of the last item shown. Browse's order is
# last_activity_at descending (items without one last), then id: unique within a workspace.
BrowseKey = tuple[datetime | None, str]

Facets = FacetCounts  # the core's type: a search response carries them too

FACET_CAP = 50  # values per facet; `more` says when a facet has others


@dataclass(frozen=True)
class MatchSet:
    """The items a search matched, for counting and facets: the text leg's words under its
    filters, plus the kept meaning-only hits by id (both under the same visibility)."""

    text: str | None = None  # None: no word part
    text_fields: TextFields = "stemmed"
    regex: str | None = None  # applies to both parts, like a filter
    ids: tuple[str, ...] = ()  # kept meaning-only hits, counted whether or not words match
    every: bool = False  # browse: every item passing the filters and regex
    # A ticked facet's own meaning-only hits (suli.counting.lifted_meaning): its values are
    # counted over the words and these ids instead of `ids`, which were found under that
    # facet's own filter. (facet, ids) pairs; a facet not named counts over `ids`.
    lifted: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def for_facet(self, name: str) -> MatchSet:
        """The match that counts facet `name` (its lifted ids in place of `ids`, if any)."""
        for facet, ids in self.lifted:
            if facet == name:
                return MatchSet(self.text, self.text_fields, self.regex, ids, self.every)
        return self


@dataclass(frozen=True)
class Session:
    """What a bearer token stands for, read together: its principal (None when that principal
    no longer exists), its admin flag, and the board ACLs of the principal's workspace where
    the store reads them with the token cheaply (None: not read; a search under this session
    then reads the caller's visibility itself, as the core's own searches do)."""

    principal: Principal | None
    admin: bool
    acls: tuple[BoardAcl, ...] | None = None


@dataclass(frozen=True)
class TokenInfo:
    """A stored token as `suli token list` shows it: its hash (never the token), whose, when."""

    hash: str
    principal_id: str
    admin: bool
    created_at: str


# Why an upsert that keeps the stored vector (None) fails: the item is gone or its text
# changed since the indexer read its hash (a concurrent delete or write). Nothing is written.
KEEP_GONE = "changed or deleted while being re-indexed: run the same line again"


class ItemIndex(Protocol):
    """The items: both search legs, browse, lookups, facets and writes."""

    dimension: int
    model: str  # the embedding model the store's vectors come from ("" when unknown)

    def search(self, query: LegQuery) -> LegResults: ...

    def page(self, query: PageQuery) -> Page:
        """The page's items and visible replacements (see PageQuery)."""
        ...

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
        """Visible items matching filters, newest last_activity_at first (ties by id), and
        their count: `limit` of them after skipping `offset`, or after the item at `after`."""
        ...

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        """The visible items among ids (invisible and missing ids are simply absent)."""
        ...

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]: ...

    def stored_hashes(self, keys: Sequence[tuple[str, str]]) -> Mapping[tuple[str, str], str]:
        """The embed hash of the stored items among (workspace, id) keys (suli.embedding.
        embed_hash); items stored without one are absent. An upsert of an item whose hash is
        unchanged passes None as its vector: the stored vector is kept, not sent again."""
        ...

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        """Exact count of the visible items passing filters (and `match`, when given) and,
        unless cap is 0, up to `cap` values per facet with counts."""
        ...

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        """Visible items whose references name item_id."""
        ...

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        """Write items with their vectors; None keeps the stored vector (see stored_hashes)."""
        ...

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        """Remove the items of `workspace` with these ids; another workspace's are never touched."""
        ...

    def refresh(self) -> None:
        """Make every acknowledged write visible to searches."""
        ...

    def close(self) -> None: ...


class Directory(Protocol):
    """Who may see what: board ACLs, principals, token hashes and the sessions they open."""

    def stored_visibility(self, principal: Principal) -> Visibility | None:
        """`principal`'s visibility with its boards left to the engine, read inside each
        request from a document the ACL and principal writes keep current (one round trip
        less); None when this backend needs them worked out from `acls` (suli.visibility)."""
        ...

    def token_visibility(self, token_hash: str) -> Visibility | None:
        """A visibility known only by a token's hash: the engine reads the token, its
        principal and the boards inside the search itself, which then answers the session
        too (LegResults.session); None when this backend cannot (read `session` first)."""
        ...

    def put_acls(self, acls: Sequence[BoardAcl]) -> None: ...

    def acls(self, workspace: str) -> list[BoardAcl]: ...

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        """One board's ACL; a board id is a key within its workspace."""
        ...

    def put_principals(self, principals: Sequence[Principal]) -> None:
        """Create or replace principals, whatever their workspace (operator loads)."""
        ...

    def claim_principal(self, principal: Principal) -> bool:
        """Create or replace `principal` unless its id belongs to another workspace's principal,
        checked and written as one atomic step (False: nothing written). Principal ids stay
        global because a token names its principal by id alone."""
        ...

    def principal(self, principal_id: str) -> Principal | None: ...

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None: ...

    def token(self, token_hash: str) -> tuple[str, bool] | None: ...

    def session(self, token_hash: str) -> Session | None:
        """token + principal + the workspace's ACLs in one go (None: unknown token)."""
        ...


class Backend(ItemIndex, Directory, Protocol):
    """What the search core needs from a store: its item index and its directory."""


@runtime_checkable
class Admin(Protocol):
    """What only operators' tools ask of a store (the CLI's admin and ops commands, the
    service's health, `suli access`): never part of a search, so not of the protocols above."""

    def count(self) -> int:
        """All stored items (admin/ops view; never shown to a principal)."""
        ...

    def all_items(self) -> Iterator[Item]:
        """Every stored item, whatever its visibility, by id (`suli export`, an admin tool)."""
        ...

    def ping(self) -> dict[str, object]: ...

    def revoke_token(self, token_hash_or_prefix: str) -> int: ...

    # Listings for the admin CLI (`suli principal|acl|token list`), sorted by id.
    def list_principals(self) -> list[Principal]: ...

    def list_acls(self) -> list[BoardAcl]: ...

    def list_tokens(self) -> list[TokenInfo]: ...


class Store(Backend, Admin, Protocol):
    """A whole store as the edges open it (suli.core): the search core's protocols and the
    operators' (every real backend, and the in-memory one, implement all of it)."""


def as_store(backend: Backend | Directory) -> Store:
    """The same store with its operators' methods, for an admin tool holding it as a Backend
    (a Searcher's); TypeError for one without them."""
    if not isinstance(backend, Admin):
        raise TypeError(f"{type(backend).__name__} has no operators' methods (Admin)")
    return cast(Store, backend)
