"""In-memory state of the embedded backend for one store generation: vector matrix and caches.

Every write to the SQLite file moves its generation on (a counter in the meta table, so
writes by other processes count too). Whatever a process derived from the file is kept
for one generation only: the float32 matrix of all vectors, the candidate rows that SQL
found for a visibility + filters WHERE clause, facet counts, the vocabulary's words read for
typo corrections, and a query's words with the corrections its caller's visibility allows.
Exactness never depends on a cache: each entry is what SQL answered for that very snapshot.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from suli.backends.embedded.typos import Vocabulary
from suli.lru import Lru

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
T = TypeVar("T")

CANDIDATE_SETS = 16  # per generation: a principal's repeated searches skip the SQL scan
FACET_SETS = 64
TEXT_SETS = 64  # a query's words and corrections, per caller: the page fetch reads them again
GENERATIONS_KEPT = 2  # the newest and the one before: reads that began just before a write
# Below this share of the stored rows the candidates' vectors are gathered and scored;
# above it scoring every row and picking the candidates' scores is cheaper.
GATHER_SHARE = 0.25
# Up to this many rows numpy's own loop (einsum) scores faster than BLAS, whose threads
# cost more than they save on small matrices when the cores are busy (measured on the
# 2-core dev machine at load 10: 10k x 384 rows 1.8 ms vs 16 ms p50; at 100k BLAS wins,
# 54 vs 76 ms).
EINSUM_MAX_ROWS = 32_768


@dataclass
class Matrix:
    """All stored vectors, one row per item in rowid order, in buffers with room to grow.

    Rows of deleted items may linger (`dead`): they are never scored for a result, because
    the candidates always come from SQL, and they go at the next full load.
    """

    rowids: IntArray  # views of the first rows of the buffers
    vectors: FloatArray
    dead: int = 0
    buffers: tuple[IntArray, FloatArray] | None = field(default=None, repr=False)

    @classmethod
    def from_rows(cls, rows: list[tuple[int, bytes]], dimension: int) -> Matrix:
        n = len(rows)
        ids = np.empty(n + n // 8 + 64, dtype=np.int64)
        vecs = np.empty((len(ids), dimension), dtype=np.float32)
        ids[:n] = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        vecs[:n] = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
            n, dimension
        )
        order = np.argsort(ids[:n], kind="stable")
        if n > 1 and not np.all(order[1:] > order[:-1]):
            ids[:n], vecs[:n] = ids[:n][order], vecs[:n][order]
        return cls(ids[:n], vecs[:n], 0, (ids, vecs))

    def updated(self, changed: list[tuple[int, bytes]], deleted: list[int]) -> Matrix | None:
        """This matrix with the rows written since; None when they cannot simply be added.

        Rewritten rows are overwritten in place (a read of the previous generation that is
        still scoring may see the newer vector of such a row); new rows go after the last
        one, into free room of the buffers, which a reallocation doubles when full.
        """
        assert self.buffers is not None
        new = Matrix.from_rows(changed, self.vectors.shape[1])
        n = len(self.rowids)
        at = np.searchsorted(self.rowids, new.rowids)
        inside = at < n
        present = np.zeros(len(at), dtype=bool)
        present[inside] = self.rowids[at[inside]] == new.rowids[inside]
        added = ~present
        if np.any(added) and n and new.rowids[added][0] <= self.rowids[-1]:
            return None  # a new row below the last one: only a full load keeps the order
        ids, vecs = self.buffers
        vecs[at[present]] = new.vectors[present]
        k = int(np.count_nonzero(added))
        if n + k > len(ids):
            grown = max(2 * len(ids), n + k)
            ids = np.concatenate([ids[:n], np.empty(grown - n, np.int64)])
            vecs = np.concatenate([vecs[:n], np.empty((grown - n, vecs.shape[1]), np.float32)])
        ids[n : n + k] = new.rowids[added]
        vecs[n : n + k] = new.vectors[added]
        return Matrix(ids[: n + k], vecs[: n + k], self.dead + len(deleted), (ids, vecs))

    def positions(self, rowids: IntArray) -> IntArray:
        return np.searchsorted(self.rowids, rowids)

    def top(
        self, cand: IntArray, pos: IntArray, query: FloatArray, k: int
    ) -> tuple[IntArray, FloatArray]:
        """The k candidates nearest to query (exact cosine: vectors are unit length)."""
        if len(cand) < GATHER_SHARE * len(self.rowids):
            scores = _scores(self.vectors[pos], query)
        else:
            scores = _scores(self.vectors, query)[pos]
        k = min(k, len(cand))
        if k < len(cand):
            # The partition leaves an arbitrary few of the candidates tied at the k-th score:
            # take every one of them, so the cut below goes by rowid.
            kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
            top = np.flatnonzero(scores >= kth)
        else:
            top = np.arange(len(cand))
        top = top[np.lexsort((cand[top], -scores[top]))][:k]  # best first; ties by rowid
        return cand[top], scores[top]


def _scores(rows: FloatArray, query: FloatArray) -> FloatArray:
    if len(rows) <= EINSUM_MAX_ROWS:
        scores: FloatArray = np.einsum("ij,j->i", rows, query)
        return scores
    return rows @ query


@dataclass
class Generation:
    """What this process derived from one generation of the file."""

    number: int
    matrix: Matrix | None = None
    candidates: Lru[tuple[IntArray, IntArray]] = field(default_factory=lambda: Lru(CANDIDATE_SETS))
    facets: Lru[Any] = field(default_factory=lambda: Lru(FACET_SETS))
    texts: Lru[Any] = field(default_factory=lambda: Lru(TEXT_SETS))
    vocab: Vocabulary = field(init=False)

    def __post_init__(self) -> None:
        self.vocab = Vocabulary(self.number)


class StoreCache:
    """The current generation's state, shared by the threads of one backend."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._lock = threading.Lock()
        self._gens: OrderedDict[int, Generation] = OrderedDict()
        self._last: tuple[int, Matrix] | None = None  # the newest matrix built, by generation

    def generation(self, number: int) -> Generation:
        """The state for generation `number` (a fresh one when the file moved on)."""
        with self._lock:
            got = self._gens.get(number)
            if got is None:
                got = Generation(number)
                if self._gens and number < min(self._gens):
                    return got  # a read that began long before the last writes: not kept
                self._gens[number] = got
                # The previous generation stays for reads that began just before a write.
                while len(self._gens) > GENERATIONS_KEPT:
                    self._gens.pop(min(self._gens))
            return got

    def matrix(
        self,
        gen: Generation,
        load: Callable[[], list[tuple[int, bytes]]],
        changes: Callable[[int], tuple[list[tuple[int, bytes]], list[int]] | None],
    ) -> Matrix:
        """gen's matrix, built once: from the last one plus what changed since, else in full.

        load and changes read the same snapshot as gen: every (rowid, vector), or the rows
        written and deleted after a generation (None when that is no longer known).
        """
        with self._lock:
            if gen.matrix is None:
                last = self._last
                if last is not None and last[0] < gen.number:
                    got = changes(last[0])
                    # Rewriting most rows: one sequential full read is cheaper.
                    if got is not None and len(got[0]) <= len(last[1].rowids) // 2:
                        gen.matrix = last[1].updated(*got)
                    # Many rows of deleted items: a full load drops them.
                    if gen.matrix is not None and gen.matrix.dead > len(gen.matrix.rowids) // 4:
                        gen.matrix = None
                if gen.matrix is None:
                    gen.matrix = Matrix.from_rows(load(), self.dimension)
                if last is None or last[0] < gen.number:
                    self._last = (gen.number, gen.matrix)
            return gen.matrix

    def candidates(
        self, gen: Generation, key: tuple[Any, ...], matrix: Matrix, find: Callable[[], IntArray]
    ) -> tuple[IntArray, IntArray]:
        """Rowids SQL finds for key (WHERE + params) and their matrix rows, once per generation."""
        with self._lock:
            got = gen.candidates.get(key)
        if got is None:
            cand = find()
            got = (cand, matrix.positions(cand))
            with self._lock:
                gen.candidates.put(key, got)
        return got

    def facets(self, gen: Generation, key: tuple[Any, ...], count: Callable[[], T]) -> T:
        return self._memo(gen.facets, key, count)

    def text(self, gen: Generation, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """What `make` derives from a query's text under key, once per generation."""
        return self._memo(gen.texts, key, make)

    def _memo(self, lru: Lru[Any], key: tuple[Any, ...], make: Callable[[], T]) -> T:
        with self._lock:
            got: T | None = lru.get(key)
        if got is None:
            got = make()
            with self._lock:
                lru.put(key, got)
        return got

    def clear(self) -> None:
        with self._lock:
            self._gens.clear()
            self._last = None
