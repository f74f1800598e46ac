"""Search latency of the embedded SQLite backend on synthetic items, with a visibility mix.

Run from the repo root: .venv/bin/python -m bench.embedded [--sizes 10000 100000] [--queries 200]
Items get seeded random unit vectors (384 dimensions, MiniLM's) and Zipf-distributed words;
a third of them sit on boards (the searching principal is on a fifth of the boards), a tenth
are personal uploads, a tenth belong to another workspace, and 2% are hidden.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from suli.backends.base import LegQuery
from suli.backends.embedded import EmbeddedBackend
from suli.errors import BackendUnavailable
from suli.models import Filters, Item
from suli.text import ENGLISH_STOPWORDS, only_common_words
from suli.visibility import Visibility

DIM = 384
VOCAB = 20_000
BOARDS = 50
BATCH = 2_000
NO_FILTERS = Filters()


def vocabulary(rng: np.random.Generator) -> list[str]:
    """English stop words as the most frequent words (as in real text), then random words."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    made = {"".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(VOCAB * 2)}
    common = sorted(ENGLISH_STOPWORDS)
    return common + sorted(made - ENGLISH_STOPWORDS)[: VOCAB - len(common)]


class Corpus:
    """Seeded synthetic items and queries: word frequencies follow Zipf's law, like real text."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.words = vocabulary(self.rng)
        weights = 1 / np.arange(1, len(self.words) + 1)
        self.cdf = np.cumsum(weights) / weights.sum()

    def text(self, n: int) -> str:
        picks = np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), len(self.words) - 1)
        return " ".join(self.words[i] for i in picks)

    def query(self) -> str:
        """1-3 words as people type them: content words, sometimes with a common word."""
        content = [w for w in self.text(12).split() if w not in ENGLISH_STOPWORDS]
        words = content[: int(self.rng.integers(1, 4))] or [self.words[len(ENGLISH_STOPWORDS)]]
        if self.rng.random() < 0.3:
            words.insert(0, str(self.rng.choice(sorted(ENGLISH_STOPWORDS))))
        return " ".join(words)

    def vectors(self, n: int) -> np.ndarray:
        v = self.rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def item(self, i: int) -> Item:
        r = self.rng.random()
        board = uploader = None
        if r < 0.33:
            board = f"brd_{self.rng.integers(BOARDS)}"
        elif r < 0.43:
            uploader = "prn_me" if self.rng.random() < 0.3 else f"prn_{self.rng.integers(100)}"
        workspace = "ws_other" if self.rng.random() < 0.1 else "ws_main"
        return Item(
            id=f"itm_{i:07d}",
            workspace=workspace,
            title=self.text(6),
            body=self.text(int(self.rng.integers(40, 160))),
            board=board,
            uploader=uploader,
            outcome=str(self.rng.choice(["approved", "completed", "in-progress", "failed"])),
            tags=tuple(self.text(1) for _ in range(int(self.rng.integers(0, 3)))),
            last_activity_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=int(i)),
            hidden=bool(self.rng.random() < 0.02),
        )


def load(backend: EmbeddedBackend, corpus: Corpus, n: int) -> float:
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        vecs = corpus.vectors(size)
        items = [corpus.item(start + j) for j in range(size)]
        backend.upsert(list(zip(items, vecs, strict=True)))
    return time.perf_counter() - t0


def timed(fn: Callable[[], object], repeats: int) -> list[tuple[float, float]]:
    """(wall ms, CPU ms) per call: CPU time shows the work when other jobs share the cores."""
    out = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        out.append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000))
    return out


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    wall, cpu = [w for w, _ in runs], [c for _, c in runs]
    return (
        f"  {name:<28} p50 {statistics.median(wall):7.1f} ms   p99 {_pct(wall, 0.99):7.1f} ms"
        f"   (CPU p50 {statistics.median(cpu):6.1f} ms)"
    )


def open_store(path: Path, corpus: Corpus, n: int) -> EmbeddedBackend:
    """The store of n items: reused when --dir kept one of this seed and format, else loaded."""
    try:
        backend = EmbeddedBackend(path, DIM)
    except BackendUnavailable:  # an older store format: build it again
        for f in path.parent.glob(path.name + "*"):
            f.unlink()
        backend = EmbeddedBackend(path, DIM)
    if backend.count() == n:
        for start in range(0, n, BATCH):  # advance the generator exactly as load() does
            size = min(BATCH, n - start)
            corpus.vectors(size)
            for j in range(size):
                corpus.item(start + j)
        print(f"{n} items: reusing {path} ({path.stat().st_size / 1e6:.0f} MB)")
    else:
        secs = load(backend, corpus, n)
        size_mb = path.stat().st_size / 1e6
        print(f"{n} items: loaded in {secs:.1f} s ({n / secs:.0f} items/s), file {size_mb:.0f} MB")
    return backend


def run(n: int, queries: int, seed: int, workdir: Path) -> None:
    """Load (or reuse) n items, then time each kind of read."""
    corpus = Corpus(seed)
    backend = open_store(workdir / f"bench-{n}-seed{seed}.db", corpus, n)
    boards = frozenset(f"brd_{i}" for i in range(0, BOARDS, 5))
    vis = Visibility("ws_main", "prn_me", boards)
    texts = [corpus.query() for _ in range(queries)]
    qvecs = corpus.vectors(queries)

    def vector_search(v: Visibility, i: int = 0) -> object:
        return backend.search(LegQuery(v, NO_FILTERS, None, qvecs[i], 100))

    print(summary("vector matrix load (cold)", timed(lambda: vector_search(vis), 1)))

    def legs(text: bool, vector: bool, filters: Filters = NO_FILTERS) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for i in range(queries):
            fields = "plain" if only_common_words(texts[i]) else "stemmed"
            q = LegQuery(
                vis,
                filters,
                texts[i] if text else None,
                qvecs[i] if vector else None,
                100,
                text_fields=fields,
            )
            out += timed(lambda q=q: backend.search(q), 1)
        return out

    print(summary("hybrid search (both legs)", legs(True, True)))
    print(summary("text leg only", legs(True, False)))
    print(summary("vector leg only", legs(False, True)))
    tag = corpus.words[len(ENGLISH_STOPWORDS)]
    print(
        summary(
            "hybrid, outcome+tag filter",
            legs(True, True, Filters(outcomes=("approved",), tags=(tag,))),
        )
    )
    # Another principal each time: the candidate rows and facets come from SQL, not a cache.
    others = iter(Visibility("ws_main", f"prn_u{i}", boards) for i in range(10_000))
    print(summary("vector leg, new principal", timed(lambda: vector_search(next(others)), 10)))
    common = LegQuery(vis, NO_FILTERS, "the", qvecs[0], 100, text_fields="plain")
    print(summary("common word only ('the')", timed(lambda: backend.search(common), 10)))
    print(summary("browse (no words)", timed(lambda: backend.browse(vis, NO_FILTERS, 10), 20)))
    print(
        summary("facets, new principal", timed(lambda: backend.facets(next(others), NO_FILTERS), 5))
    )
    print(summary("facets, repeated", timed(lambda: backend.facets(vis, NO_FILTERS), 20)))

    def write_then_search() -> None:
        """One indexer batch (8 items) lands, then a search reads the changed vectors."""
        items = [corpus.item(n + j) for j in range(8)]
        backend.upsert(list(zip(items, corpus.vectors(8), strict=True)))
        t0, c0 = time.perf_counter(), time.process_time()
        vector_search(vis)
        after.append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000))
        # The store stays as --dir keeps it.
        backend.delete(items[0].workspace, [it.id for it in items])

    after: list[tuple[float, float]] = []
    for _ in range(5):
        write_then_search()
    print(summary("vector search after a write", after))
    print(
        f"  load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )
    backend.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path, help="keep the store files here and reuse them next time")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="suli-bench-") as d:
        for n in args.sizes:
            run(n, args.queries, args.seed, args.dir or Path(d))


if __name__ == "__main__":
    main()
