"""An in-memory ItemIndex + Directory in plain Python, for unit tests of the search core.

Not a product backend (no setting selects it): nothing persists, scoring is naive (a weighted
word count, an exact cosine), and every read walks every item. What it keeps exactly is the
contract the core relies on: the one visibility rule (suli.visibility.can_see over the spec
the core built), the filters, browse order, facet counts over a MatchSet, and per-item write
outcomes.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from rapidfuzz.distance import OSA

from suli import filtering
from suli.backends.base import (
    FACET_CAP,
    KEEP_GONE,
    BrowseKey,
    BulkOutcome,
    Facets,
    Hit,
    LegQuery,
    LegResults,
    MatchSet,
    Page,
    PageQuery,
    Session,
    TextFields,
    TokenInfo,
)
from suli.backends.embedded.sql import compile_regex  # RE2: linear time, as the store's
from suli.counting import disjunctive
from suli.embedding import embed_hash
from suli.errors import NotFound
from suli.models import BoardAcl, Filters, Item, Principal
from suli.text import (
    ENGLISH_STOPWORDS,
    FIELD_WEIGHTS,
    PREFIX_LENGTH,
    TYPO_WEIGHT,
    max_edits,
    prefix_word,
    similarity,
    typo_words,
    words,
)
from suli.visibility import Visibility, can_see

Key = tuple[str, str]  # (workspace, id): ids are unique within a workspace only
_OLDEST = datetime.min.replace(tzinfo=UTC)  # items without activity sort last in browse


@dataclass(frozen=True)
class _Stored:
    item: Item
    vector: tuple[float, ...]
    ehash: str


def _query_words(text: str, fields: TextFields) -> list[str]:
    """The words a text leg matches on: common words drop out under "stemmed" (DESIGN 3.5)."""
    ws = words(text)
    if fields == "stemmed":
        ws = [w for w in ws if w not in ENGLISH_STOPWORDS]
    return list(dict.fromkeys(ws))


def _field_words(item: Item) -> dict[str, list[str]]:
    """The searchable text per field; a binary's body is not text (DESIGN 1)."""
    return {
        "title": words(item.title),
        "body": [] if item.is_binary else words(item.body),
        "caption": words(item.caption),
        "path": words(item.path),
        "tags": [w for t in item.tags for w in words(t)],
    }


Idf = Callable[[str], float]


def _flat(_: str) -> float:
    return 1.0


def _text_score(item: Item, qwords: Sequence[str], idf: Idf = _flat) -> float:
    """Weighted count of the query's words in each field (title boosted), each word weighed by
    its rarity (`idf`); 0: no match."""
    if not qwords:
        return 0.0
    score = 0.0
    for name, ws in _field_words(item).items():
        counts = Counter(ws)
        score += FIELD_WEIGHTS[name] * sum(idf(w) * _saturated(counts[w]) for w in qwords)
    return score


def _saturated(tf: int, k1: float = 1.2) -> float:
    """A term's count as BM25 weighs it (no length norm): each repeat adds less."""
    return tf * (k1 + 1) / (tf + k1)


def _typo_score(item: Item, text: str, fields: TextFields, idf: Idf = _flat) -> float:
    """The corrections (DESIGN 3.12), simply: for each query word that may carry a typo and
    that the item lacks, the item's words within max_edits of it (first letter kept, never a
    common word), each weighed as the word would be (its rarity) times its similarity
    (1 - edits / length) and TYPO_WEIGHT, as the engines weigh them."""
    if fields == "plain":
        return 0.0
    have = _field_words(item)
    everything = {w for ws in have.values() for w in ws}
    score = 0.0
    for q in typo_words(text):
        if q in everything:
            continue
        for name, ws in have.items():
            for w in ws:
                if w in ENGLISH_STOPWORDS or w[:PREFIX_LENGTH] != q[:PREFIX_LENGTH]:
                    continue
                d = OSA.distance(w, q)
                if 0 < d <= max_edits(q):
                    score += FIELD_WEIGHTS[name] * TYPO_WEIGHT * similarity(q, w) * idf(w)
    return score


def _prefix_score(item: Item, text: str, fields: TextFields) -> float:
    """The last word as a prefix: a small score under any word or correction match."""
    last = prefix_word(text) if fields != "plain" else None
    if last is None:
        return 0.0
    n = sum(1 for ws in _field_words(item).values() for w in ws if w.startswith(last))
    return 1e-3 * n / (1 + n)


def _match_score(item: Item, text: str, fields: TextFields, idf: Idf = _flat) -> float:
    """The text leg's score: exact words and corrections, else the last word's prefix; 0: no
    match."""
    found = _text_score(item, _query_words(text, fields), idf) + _typo_score(
        item, text, fields, idf
    )
    return found if found > 0 else _prefix_score(item, text, fields)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def passes(item: Item, filters: Filters, regex: str | None = None) -> bool:
    """Every filter of a request (DESIGN 3.7), as the other backends apply them."""
    if not filtering.passes(item, filters):
        return False
    if regex:
        rx = compile_regex(regex)
        return bool(rx.search(item.title) or rx.search(item.body))
    return True


class MemoryBackend:
    """Items, vectors, ACLs, principals and token hashes in dicts; one lock for writes."""

    def __init__(self, dimension: int, model: str = "") -> None:
        self.dimension = dimension
        self.model = model
        self._lock = threading.RLock()
        self._items: dict[Key, _Stored] = {}
        self._acls: dict[Key, BoardAcl] = {}  # (workspace, board)
        self._principals: dict[str, Principal] = {}
        self._tokens: dict[str, TokenInfo] = {}

    # ---- item index: reads ---------------------------------------------------------------

    def _visible(self, vis: Visibility, filters: Filters, regex: str | None = None) -> list[Item]:
        with self._lock:
            stored = [s.item for s in self._items.values()]
        return [it for it in stored if can_see(vis, it) and passes(it, filters, regex)]

    def _idf(self) -> Idf:
        """Each word's rarity over every stored item (every workspace, as an engine's term
        statistics are): Lucene's idf, log(1 + (N - n + 0.5) / (n + 0.5))."""
        with self._lock:
            stored = [s.item for s in self._items.values()]
        df: Counter[str] = Counter()
        for it in stored:
            df.update({w for ws in _field_words(it).values() for w in ws})
        n = len(stored)
        return lambda w: math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))

    def search(self, query: LegQuery) -> LegResults:
        if query.regex:
            compile_regex(query.regex)  # a bad pattern is the caller's error, not a failed leg
        pool = self._visible(query.vis, query.filters, query.regex)
        text: tuple[Hit, ...] = ()
        total: int | None = None
        if query.text is not None:
            idf = self._idf()
            scored = [(_match_score(it, query.text, query.text_fields, idf), it) for it in pool]
            matched = sorted(((s, it) for s, it in scored if s > 0), key=lambda p: (-p[0], p[1].id))
            total = len(matched)
            start = query.text_offset
            text = tuple(_hit(it, s) for s, it in matched[start : start + query.depth])
        vector: tuple[Hit, ...] = ()
        errors: dict[str, str] = {}
        words: frozenset[str] | None = None
        if query.vector is not None:
            if len(query.vector) != self.dimension:
                errors["vector"] = f"invalid query vector: {len(query.vector)} dimensions"
            else:
                with self._lock:
                    vecs = {k: s.vector for k, s in self._items.items()}
                sims = [(_cosine(query.vector, vecs[(it.workspace, it.id)]), it) for it in pool]
                sims.sort(key=lambda p: (-p[0], p[1].id))
                top = sims[: query.depth]
                vector = tuple(_hit(it, s) for s, it in top)
                if query.text is not None:
                    # The text leg's own match (typos included): what `total` counts.
                    words = frozenset(
                        it.id
                        for _, it in top
                        if _match_score(it, query.text, query.text_fields) > 0
                    )
        return LegResults(text, vector, errors, {}, total, word_matches=words)

    def page(self, query: PageQuery) -> Page:
        by_id = {it.id: it for it in self._visible(query.vis, query.filters, query.regex)}
        items = {i: by_id[i] for i in dict.fromkeys(query.ids) if i in by_id}
        seen = self.get_many(query.vis, query.replacements)
        return Page(items, frozenset(seen))

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
        found = self._visible(vis, filters, regex)
        found.sort(key=_browse_order)
        if after is not None:
            mark = _browse_order_of(after)
            rest = [it for it in found if _browse_order(it) > mark]
            return rest[:limit], len(found)
        return found[offset : offset + limit], len(found)

    def get_many(self, vis: Visibility, ids: Sequence[str]) -> dict[str, Item]:
        # Hidden items too: a direct lookup may name them (the other backends do the same).
        with self._lock:
            found = [self._items.get((vis.workspace, i)) for i in dict.fromkeys(ids)]
        return {s.item.id: s.item for s in found if s is not None and can_see(vis, s.item)}

    def vectors(self, vis: Visibility, ids: Sequence[str]) -> dict[str, list[float]]:
        seen = self.get_many(vis, ids)
        with self._lock:
            return {i: list(self._items[(vis.workspace, i)].vector) for i in seen}

    def stored_hashes(self, keys: Sequence[Key]) -> dict[Key, str]:
        with self._lock:
            return {k: self._items[k].ehash for k in keys if k in self._items}

    def facets(
        self,
        vis: Visibility,
        filters: Filters,
        match: MatchSet | None = None,
        cap: int = FACET_CAP,
        timeout_s: float | None = None,
    ) -> Facets:
        return disjunctive(filters, cap, match, lambda f, m: self._facet_counts(vis, f, m, cap))

    def _facet_counts(
        self, vis: Visibility, filters: Filters, match: MatchSet | None, cap: int
    ) -> Facets:
        found = self._visible(vis, filters, match.regex if match else None)
        if match is not None and not match.every:
            text, fields = match.text, match.text_fields
            ids = set(match.ids)
            found = [
                it
                for it in found
                if it.id in ids or (text is not None and _match_score(it, text, fields) > 0)
            ]
        if not cap:
            return Facets(total=len(found), values={})
        counts: dict[str, Counter[str]] = {
            n: Counter() for n in ("kind", "outcome", "board", "agent", "station", "tag")
        }
        for it in found:
            for name, values in (
                ("kind", {it.kind}),
                ("outcome", {it.outcome}),
                ("board", {it.board}),
                ("agent", {it.agent}),
                ("station", {s.name for s in it.stations}),
                ("tag", set(it.tags)),
            ):
                counts[name].update(v for v in values if v is not None)
        ordered = {n: sorted(c.items(), key=lambda kv: (-kv[1], kv[0])) for n, c in counts.items()}
        return Facets(
            total=len(found),
            values={n: vs[:cap] for n, vs in ordered.items()},
            more={n: len(vs) > cap for n, vs in ordered.items()},
        )

    def referencing(self, vis: Visibility, item_id: str, limit: int) -> list[Item]:
        found = [it for it in self._visible(vis, Filters()) if item_id in it.references]
        found.sort(key=_browse_order)
        return found[:limit]

    def count(self) -> int:
        with self._lock:
            return len(self._items)

    def refresh(self) -> None:
        """Every write is searchable as soon as it returns."""

    def all_items(self) -> Iterator[Item]:
        with self._lock:
            keys = sorted(self._items)
            stored = [self._items[k].item for k in keys]
        yield from stored

    # ---- item index: writes ----------------------------------------------------------------

    def upsert(self, items: Sequence[tuple[Item, Sequence[float] | None]]) -> BulkOutcome:
        indexed: list[str] = []
        rejected: dict[str, str] = {}
        with self._lock:
            for item, vec in items:
                key = (item.workspace, item.id)
                ehash = embed_hash(self.model, item.embed_text())
                if vec is None:  # keep the stored vector, if it is still this text's
                    old = self._items.get(key)
                    if old is None or old.ehash != ehash:
                        rejected[item.id] = KEEP_GONE
                        continue
                    vector = old.vector
                elif len(vec) != self.dimension:
                    rejected[item.id] = f"vector: expected {self.dimension} dimensions"
                    continue
                elif not all(math.isfinite(x) for x in vec):
                    rejected[item.id] = "invalid vector: NaN or infinite values"
                    continue
                else:
                    vector = tuple(float(x) for x in vec)
                # Binaries keep no body, as in the other stores (DESIGN 1: not text).
                kept = replace(item, body="") if item.is_binary else item
                self._items[key] = _Stored(kept, vector, ehash)
                indexed.append(item.id)
        return BulkOutcome(indexed=tuple(indexed), rejected=rejected)

    def delete(self, workspace: str, ids: Sequence[str]) -> BulkOutcome:
        unique = list(dict.fromkeys(ids))
        with self._lock:
            gone = [i for i in unique if self._items.pop((workspace, i), None) is not None]
        return BulkOutcome(indexed=tuple(gone), missing=tuple(i for i in unique if i not in gone))

    # ---- directory ---------------------------------------------------------------------------

    def token_visibility(self, token_hash: str) -> Visibility | None:
        return None  # no round trips to save: the session is read first

    def stored_visibility(self, principal: Principal) -> Visibility | None:
        return None  # in process: the core reads the ACLs and builds the spec itself

    def put_acls(self, acls: Sequence[BoardAcl]) -> None:
        with self._lock:
            self._acls.update({(a.workspace, a.board): a for a in acls})

    def acls(self, workspace: str) -> list[BoardAcl]:
        with self._lock:
            return sorted((a for a in self._acls.values() if a.workspace == workspace), key=_board)

    def acl(self, workspace: str, board: str) -> BoardAcl | None:
        with self._lock:
            return self._acls.get((workspace, board))

    def put_principals(self, principals: Sequence[Principal]) -> None:
        with self._lock:
            self._principals.update({p.id: p for p in principals})

    def claim_principal(self, principal: Principal) -> bool:
        with self._lock:
            old = self._principals.get(principal.id)
            if old is not None and old.workspace != principal.workspace:
                return False
            self._principals[principal.id] = principal
            return True

    def principal(self, principal_id: str) -> Principal | None:
        with self._lock:
            return self._principals.get(principal_id)

    def put_token(self, token_hash: str, principal_id: str, admin: bool) -> None:
        made = datetime.now(UTC).isoformat()
        with self._lock:
            self._tokens[token_hash] = TokenInfo(token_hash, principal_id, admin, made)

    def token(self, token_hash: str) -> tuple[str, bool] | None:
        with self._lock:
            t = self._tokens.get(token_hash)
        return None if t is None else (t.principal_id, t.admin)

    def session(self, token_hash: str) -> Session | None:
        with self._lock:
            found = self.token(token_hash)
            if found is None:
                return None
            p = self.principal(found[0])
            return Session(p, found[1], tuple(self.acls(p.workspace)) if p else ())

    def revoke_token(self, token_hash_or_prefix: str) -> int:
        """By the exact hash, as the other backends do."""
        with self._lock:
            if self._tokens.pop(token_hash_or_prefix, None) is None:
                raise NotFound("no such token")
        return 1

    def list_principals(self) -> list[Principal]:
        with self._lock:
            return sorted(self._principals.values(), key=lambda p: p.id)

    def list_acls(self) -> list[BoardAcl]:
        with self._lock:
            return sorted(self._acls.values(), key=_board)

    def list_tokens(self) -> list[TokenInfo]:
        with self._lock:
            return sorted(self._tokens.values(), key=lambda t: (t.principal_id, t.created_at))

    # ---- operations ----------------------------------------------------------------------------

    def ping(self) -> dict[str, object]:
        return {"backend": "memory", "items": self.count()}

    def close(self) -> None:
        """Nothing to release."""


def _hit(it: Item, score: float) -> Hit:
    return Hit(it.id, score, it.outcome, it.superseded_by)


def _browse_order_of(key: BrowseKey) -> tuple[bool, float, str]:
    """Browse order as one ascending key: newest first, items without activity last, by id."""
    when, item_id = key
    return (when is None, -(when or _OLDEST).timestamp(), item_id)


def _browse_order(it: Item) -> tuple[bool, float, str]:
    return _browse_order_of((it.last_activity_at, it.id))


def _board(a: BoardAcl) -> tuple[str, str]:
    return (a.board, a.workspace)
