"""The corrections a typo word reaches, known ahead of the search that needs them.

A fuzzy clause costs each shard a Levenshtein automaton walked over two fields' term
dictionaries, on every search: a fifth of the legs' node CPU (bench/RESULTS.md section 27).
Once a word's corrections are known, the text leg sends them as `term` clauses instead, each
with the weight the engine's own rewrite gives it (`top_terms_N`: a scoring boolean of the
terms, each scored by its own statistics), so hits, order and scores are the engine's.

Known how: the engine's own rewrite of the very clause the leg would send, read on every shard
(`_validate/query?rewrite=true&all_shards=true`) in the background, after a search that
lacked them; the search itself went with the fuzzy clause.

Never stale (DESIGN 2): corrections can only go missing when a document is written. Every
item write carries `written_at`, the writer's clock (suli.backends.opensearch.writes), and a
search that uses known corrections reads, in its own `_msearch`, the newest stamp of the index
it searches. If anything was written later than SETTLE_MS before the corrections were read
(a document may become searchable up to that long after its stamp: a refresh interval, a
bulk request waiting in a node's queue), the legs are asked again with the fuzzy clauses, and
the index's corrections wait until it has been quiet that long. Removing a term never needs
this: a `term` clause on a term no document holds any more matches nothing, as the fuzzy
clause would not reach it.

Only indices whose mapping has `written_at` (mapping version 5 on) are corrected ahead; an
older one keeps the fuzzy clauses until `suli reindex`.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from suli.lru import Lru

log = logging.getLogger(__name__)

STAMP_FIELD = "written_at"
# How long after its stamp an item may still become searchable, clock skew between writers
# and services included. Past it the newest stamp says nothing of a document still on its way.
SETTLE_MS = 15 * 60 * 1000
# Known corrections are read again after this long in any case (a bound, not the freshness
# rule: that is the stamp check).
KEEP_MS = SETTLE_MS
KNOWN_WORDS = 16384
# More corrections than this for one word (both fields, all shards): the fuzzy clause stays
# (the engine counts every clause of a query against its clause limit).
MAX_TERMS = 256
# Words waiting for their corrections; past it a word waits for a later search.
QUEUE = 1024

# One explanation per shard: the rewritten clause, a boolean of its terms, each
# `field:term` or `(field:term)^boost`, separated by spaces (a term never holds one: both
# typo fields' analyzers split on white space). A word no term is near is printed as the fuzzy
# clause itself, `field:word~edits` (a word is a \w+ run: it never holds a `~`).
_NONE = re.compile(r"MatchNoDocsQuery\(.*\)")
_UNREWRITTEN = re.compile(r"[^ ~]+~[12]")


@dataclass(frozen=True)
class Known:
    """A word's corrections as the engine's rewrite read them from `index` at `read_at_ms`
    (the service's clock, taken before the read was sent): (field, term, weight)."""

    index: str
    read_at_ms: int
    terms: tuple[tuple[str, str, float], ...] | None  # None: the fuzzy clause stays


def now_ms() -> int:
    return int(time.time() * 1000)


def _one(piece: str, field: str) -> tuple[str, float] | None:
    """One clause of a rewrite: `field:term` (weight 1) or `(field:term)^weight`."""
    if piece.startswith("(" + field + ":"):
        body, sep, weight = piece[len(field) + 2 :].rpartition(")^")
        try:
            return (body, float(weight)) if sep and body else None
        except ValueError:
            return None
    if piece.startswith(field + ":") and len(piece) > len(field) + 1:
        return piece[len(field) + 1 :], 1.0
    return None


def parse(explanation: str, field: str) -> dict[str, float] | None:
    """The terms and weights of one shard's rewrite of a fuzzy clause on `field`; None where
    it is anything else (then the fuzzy clause stays). Each piece must render back to
    exactly the text it came from, so no term can pass for syntax."""
    text = explanation.strip()
    if not text or _NONE.fullmatch(text):
        return {}
    if text.startswith(field + ":") and _UNREWRITTEN.fullmatch(text[len(field) + 1 :]):
        return {}
    out: dict[str, float] = {}
    for piece in text.split(" "):
        got = _one(piece, field)
        if got is None:
            return None
        term, weight = got
        boosted = piece.startswith("(")
        again = f"({field}:{term})^{piece.rpartition(')^')[2]}" if boosted else f"{field}:{term}"
        if again != piece or (not boosted and "~" in term):
            # Weight 1 is the word itself (no edit), a \w+ run: a `~` is a fuzzy clause left.
            return None
        out[term] = weight
    return out


def validate_body(word: str, field: str, clause: Mapping[str, Any]) -> dict[str, Any]:
    """The leg's own fuzzy clause on one field, for the engine to rewrite."""
    inner = {**clause, "query": word, "fields": [field]}
    return {"query": {"multi_match": inner}}


def newest_body(since_ms: int) -> dict[str, Any]:
    """The newest write stamp from `since_ms` on (None: nothing written since): a range of the
    stamp's points and the largest of the few documents in it, never a read of every one."""
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"range": {STAMP_FIELD: {"gte": since_ms}}},
        "aggs": {"newest": {"max": {"field": STAMP_FIELD}}},
    }


@dataclass(frozen=True)
class Newest:
    stamp_ms: int | None  # the newest write stamp since the bound asked (None: nothing since)


def newest(response: Mapping[str, Any]) -> Newest | None:
    """What newest_body's search answered; None for a failed one."""
    if "error" in response or (response.get("_shards") or {}).get("failed"):
        return None
    value = ((response.get("aggregations") or {}).get("newest") or {}).get("value")
    return Newest(int(value) if isinstance(value, int | float) else None)


class Corrections:
    """Per alias and word, the corrections known (Known), read in one background thread.

    `read(index, word, field)` asks the engine for one field's rewrite: it returns the
    explanations of `_validate/query` (the caller's client, its permissions); `stamped(index)`
    says whether a concrete index carries write stamps; `newest(alias, since_ms)` reads
    newest_body."""

    def __init__(
        self,
        read: Any,
        stamped: Any,
        newest_of: Any,
        fields: Sequence[str],
        clause: Mapping[str, Any],
    ) -> None:
        self._read = read
        self._stamped = stamped
        self._newest = newest_of
        self.fields = tuple(fields)
        self.clause = dict(clause)
        self._known: Lru[Known] = Lru(KNOWN_WORDS)
        self._quiet_at: dict[str, int] = {}  # alias -> when its corrections may be read again
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue(QUEUE)
        self._asked: set[tuple[str, str]] = set()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()

    def known(self, alias: str, words: Iterable[str]) -> dict[str, Known]:
        """The words' corrections that may be used now (the search then checks the stamp)."""
        t = now_ms()
        out: dict[str, Known] = {}
        with self._lock:
            if self._quiet_at.get(alias, 0) > t:
                return out
            for w in words:
                k = self._known.get((alias, w))
                if k is not None and k.terms is not None and t - k.read_at_ms < KEEP_MS:
                    out[w] = k
        return out

    @staticmethod
    def since(used: Mapping[str, Known]) -> int:
        """The stamp from which a write could be missing from the corrections `used`."""
        return min(k.read_at_ms for k in used.values()) - SETTLE_MS

    def still_good(
        self, alias: str, used: Mapping[str, Known], found: Newest | None, indices: set[str]
    ) -> bool:
        """Whether the corrections `used` held for the search that read `found` (the newest
        stamp since `since(used)`) and got hits from `indices` (the concrete indices: an alias
        moved by `suli reindex` names another). If not, they are dropped and the alias waits
        until its newest write has settled."""
        if not used:
            return True
        good = (
            found is not None
            and found.stamp_ms is None
            and indices == {k.index for k in used.values()}
        )
        if not good:
            with self._lock:
                for w in used:
                    self._known.discard((alias, w))
                if found is not None and found.stamp_ms is not None:
                    self._quiet_at[alias] = found.stamp_ms + SETTLE_MS
        return good

    def want(self, alias: str, words: Iterable[str]) -> None:
        """Read these words' corrections in the background (those not known or asked)."""
        t = now_ms()
        with self._lock:
            if self._quiet_at.get(alias, 0) > t:
                return
            for w in words:
                key = (alias, w)
                k = self._known.get(key)
                if (k is not None and t - k.read_at_ms < KEEP_MS) or key in self._asked:
                    continue
                try:
                    self._queue.put_nowait(key)
                except queue.Full:
                    return
                self._asked.add(key)
                self._idle.clear()
            if self._thread is None and not self._queue.empty():
                self._thread = threading.Thread(
                    target=self._work, name="suli-corrections", daemon=True
                )
                self._thread.start()

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until every word asked is read (tests, benches); False on timeout."""
        return self._idle.wait(timeout)

    def _work(self) -> None:
        while True:
            try:
                alias, word = self._queue.get(timeout=5.0)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        self._idle.set()
                        return
                continue
            try:
                self._fill(alias, word)
            except Exception as e:  # only an optimisation: the fuzzy clause stays a while
                log.info("corrections of a query word not read: %s", type(e).__name__)
                self._remember(alias, word, Known("", now_ms(), None))
            finally:
                with self._lock:
                    self._asked.discard((alias, word))
                    if self._queue.empty() and not self._asked:
                        self._idle.set()

    def _fill(self, alias: str, word: str) -> None:
        t = now_ms()
        terms: list[tuple[str, str, float]] = []
        index: set[str] = set()
        for field in self.fields:
            got: dict[str, float] = {}
            for ex in self._read(alias, validate_body(word, field, self.clause)):
                one = parse(ex.get("explanation") or "", field) if ex.get("valid") else None
                if one is None:
                    self._remember(alias, word, Known("", t, None))
                    return
                index.add(ex.get("index") or "")
                for term, weight in one.items():
                    got[term] = max(weight, got.get(term, 0.0))
            terms += [(field, term, got[term]) for term in sorted(got)]
        if len(index) != 1 or len(terms) > MAX_TERMS or not self._stamped(next(iter(index))):
            self._remember(alias, word, Known("", t, None))
            return
        found = self._newest(alias, t - SETTLE_MS)
        if found is None:
            return
        if found.stamp_ms is not None:
            with self._lock:  # written lately: nothing read now may be used yet
                self._quiet_at[alias] = found.stamp_ms + SETTLE_MS
            return
        self._remember(alias, word, Known(next(iter(index)), t, tuple(terms)))

    def _remember(self, alias: str, word: str, known: Known) -> None:
        with self._lock:
            self._known.put((alias, word), known)
