"""Embedded `Searcher.search` latency by query length, before vs after, measured in one run.

    python -m bench.embedded_long --against /tmp/suli-base \\
        [--nfcorpus-db ~/.cache/suli/bench-nfcorpus.db] [--synthetic 100000 --dir D] \\
        [--per-bucket 60] [--rounds 1] [--cold] [--out bench/results/embedded_long_X.txt]

Two workers (bench.embedded_ab_worker) each run the suli of one source tree, `--against`
("before": e.g. a copy of this checkout with the embedded backend's files of the commit to
compare against) and `--tree` ("after", this checkout by default), on the same store file; every
query goes to both, the order of the two alternating and the query order shuffled per round,
so a busy machine slows both sides alike. Each search is a user's first page (limit 10,
hybrid); its time is taken inside the worker. Reported per query-length bucket: p50 / p99 of
each side, after/before ratios, each side's p50 against its 1-3-word bucket, and how many
answers (ids, snippets, totals) the two sides gave alike. A later round repeats the queries
(and finds what a process keeps per store generation); `--cold` moves the store's
generation on before every query, as any write does, so each search starts with every
per-generation cache empty (the vector matrix is then refreshed with nothing to add).

Workloads:
- nfcorpus: the store bench.quality uses (never re-embedded here). The
  NFCorpus queries whose vectors the vector cache holds, sampled per bucket of words (1-3,
  4-8, 9-20), and "sentences": the first 15 words of a sentence of a sampled document, as a
  claim-like long query; its vector is the document's own (a stand-in for the model's, which
  only the vector leg reads: no text is embedded).
- synthetic (--synthetic N): bench.embedded's seeded store of N items and its visibility mix
  (the principal is on a fifth of the boards), 1-3-word queries as bench.embedded makes them
  and 15 Zipf words; random unit query vectors, so the meaning floor is off (-1).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.embedded import BOARDS, Corpus, open_store
from bench.nfcorpus import DATA, WORKSPACE, load_items
from bench.quality import CACHE
from suli.backends.embedded import EmbeddedBackend
from suli.backends.embedded import sql as embedded_sql
from suli.embedding import MiniLMEmbedder
from suli.models import BoardAcl, Principal
from suli.text import words
from suli.vector_cache import VectorCache, query_key
from suli.visibility import visibility_for

ROOT = Path(__file__).resolve().parents[1]
BUCKETS = ((1, 3), (4, 8), (9, 20))
SENTENCE_WORDS = 15
SHORT = "1-3 words"
SENTENCES = f"sentences ({SENTENCE_WORDS} words)"


def bucket_of(text: str) -> str | None:
    """The length bucket of a query by its word count (suli.text.words); None past the last."""
    n = len(words(text))
    for lo, hi in BUCKETS:
        if lo <= n <= hi:
            return f"{lo}-{hi} words"
    return None


def first_words(body: str, n: int = SENTENCE_WORDS) -> str | None:
    """The first n words of the body's first sentence that has at least n, or None."""
    for sentence in re.split(r"(?<=[.!?])\s+", body):
        ws = sentence.split()
        if len(ws) >= n:
            return " ".join(ws[:n])
    return None


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100), nearest rank: a value that was measured."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass
class Workload:
    """Queries (with their buckets and vectors) against one store, as one principal."""

    name: str
    db: Path
    principal: str
    workspace: str
    meaning_floor: float
    texts: list[str]
    buckets: list[str]
    vectors: np.ndarray

    def files(self, into: Path) -> Path:
        """The workload as the workers read it (JSON, and the vectors as .npy)."""
        vec_path = into / f"{self.name}-vectors.npy"
        np.save(vec_path, self.vectors.astype(np.float32))
        path = into / f"{self.name}.json"
        warm = [self.buckets.index(b) for b in dict.fromkeys(self.buckets)]
        path.write_text(
            json.dumps(
                {
                    "db": str(self.db),
                    "principal": self.principal,
                    "workspace": self.workspace,
                    "meaning_floor": self.meaning_floor,
                    "texts": self.texts,
                    "vectors": str(vec_path),
                    "warm": warm,
                }
            )
        )
        return path


def _add(out: dict[str, tuple[str, np.ndarray]], text: str, vec: np.ndarray) -> None:
    out.setdefault(text, (text, vec))  # one vector per text: the worker looks them up by text


def nfcorpus_workload(db: Path, per_bucket: int, seed: int) -> Workload:
    """NFCorpus queries with cached vectors by length bucket, and 15-word sentence queries."""
    rnd = random.Random(seed)
    cache = VectorCache(CACHE)
    # The query vectors' key space of suli.vector_cache.CachedEmbedder (model name, NUL, query).
    space = f"{MiniLMEmbedder.name}\0query"
    by_bucket: dict[str, list[tuple[str, np.ndarray]]] = {}
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            bucket = bucket_of(text)
            vec = cache.get_query(space, query_key(text)) if bucket else None
            if bucket and vec is not None:
                by_bucket.setdefault(bucket, []).append((query_key(text), vec))
    cache.close()
    chosen: dict[str, tuple[str, np.ndarray]] = {}
    labels: dict[str, str] = {}
    for lo, hi in BUCKETS:
        name = f"{lo}-{hi} words"
        got = by_bucket.get(name, [])
        for text, vec in rnd.sample(got, min(per_bucket, len(got))):
            _add(chosen, text, vec)
            labels.setdefault(text, name)
    backend = EmbeddedBackend(db, 384)
    try:
        items = load_items()
        rnd.shuffle(items)
        vis = visibility_for(Principal("prn_bench", WORKSPACE), [])
        sentences: list[tuple[str, str]] = []
        for it in items:
            text = first_words(it.body)
            if text and text not in labels:
                sentences.append((text, it.id))
            if len(sentences) == per_bucket:
                break
        vecs = backend.vectors(vis, [i for _, i in sentences])
        for text, item_id in sentences:
            _add(chosen, text, np.asarray(vecs[item_id], dtype=np.float32))
            labels.setdefault(text, SENTENCES)
    finally:
        backend.close()
    texts = list(chosen)
    return Workload(
        "nfcorpus", db, "prn_bench", WORKSPACE, 0.33, texts, [labels[t] for t in texts],
        np.stack([chosen[t][1] for t in texts]),
    )  # fmt: skip


def synthetic_workload(n: int, seed: int, workdir: Path, per_bucket: int) -> Workload:
    """bench.embedded's store of n items (loaded once into workdir), its principal's ACLs, and
    short and 15-word queries from the same vocabulary."""
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / f"bench-{n}-seed{seed}.db"
    backend = open_store(db, Corpus(seed), n)
    # bench.embedded searches with these boards; the service reads them from the ACLs.
    backend.put_acls(
        [BoardAcl(f"brd_{i}", "ws_main", f"board {i}", ("prn_me",)) for i in range(0, BOARDS, 5)]
    )
    backend.close()
    words_of = Corpus(seed)  # the store's vocabulary, drawn from a generator of its own
    words_of.rng = np.random.default_rng(seed + 1)
    chosen: dict[str, str] = {}
    while len(chosen) < per_bucket:
        chosen.setdefault(words_of.query(), SHORT)
    while len(chosen) < 2 * per_bucket:
        chosen.setdefault(words_of.text(SENTENCE_WORDS), f"{SENTENCE_WORDS} Zipf words")
    texts = list(chosen)
    return Workload(
        f"synthetic-{n}", db, "prn_me", "ws_main", -1.0, texts, [chosen[t] for t in texts],
        words_of.vectors(len(texts)),
    )  # fmt: skip


class Worker:
    """A bench.embedded_ab_worker process running one tree's suli."""

    def __init__(self, tree: Path, workload: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.embedded_ab_worker", "--tree", str(tree),
             "--workload", str(workload)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.loaded_from = self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.proc.wait()}")
        got: dict[str, Any] = json.loads(line)
        return got

    def ask(self, i: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{i}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def next_generation(db: Path) -> None:
    """Move the store's generation on, as a write does (nothing else changes)."""
    backend = EmbeddedBackend(db, 384)
    try:
        with backend.db.tx(write=True) as c:
            embedded_sql.next_generation(c)
    finally:
        backend.close()


def run_ab(
    workload: Workload,
    sides: dict[str, Path],
    rounds: int,
    seed: int,
    tmp: Path,
    cold: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Every query on every side, `rounds` times, interleaved (see the module docstring)."""
    path = workload.files(tmp)
    workers = {name: Worker(tree, path) for name, tree in sides.items()}
    try:
        rnd = random.Random(seed)
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        names = list(sides)
        for _ in range(rounds):
            order = list(range(len(workload.texts)))
            rnd.shuffle(order)
            for k, i in enumerate(order):
                turn = names[k % len(names) :] + names[: k % len(names)]
                for name in turn:
                    if cold:
                        next_generation(workload.db)
                    out[name].append(workers[name].ask(i))
        return out
    finally:
        for w in workers.values():
            w.close()


def _phase(runs: list[dict[str, Any]], phase: str) -> float:
    return statistics.median(r["phases"].get(phase, 0.0) for r in runs)


def report(workload: Workload, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """p50/p99 per bucket and side, the ratios, and the answers compared across sides."""
    sides = list(runs)
    buckets = list(dict.fromkeys(workload.buckets))
    table: dict[str, dict[str, Any]] = {}
    for b in buckets:
        row: dict[str, Any] = {"queries": workload.buckets.count(b)}
        for s in sides:
            mine = [r for r in runs[s] if workload.buckets[r["i"]] == b]
            ms = [r["ms"] for r in mine]
            row[s] = {
                "p50": round(statistics.median(ms), 2),
                "p99": round(pct(ms, 99), 2),
                "cpu_p50": round(statistics.median(r["cpu_ms"] for r in mine), 2),
                "phases_p50": {p: round(_phase(mine, p), 2)
                               for p in ("search", "text_took", "vector_took", "count", "fetch")},
            }  # fmt: skip
        table[b] = row
    for s in sides:  # each bucket against the shortest, per side
        base = table[buckets[0]][s]["p50"]
        for b in buckets:
            table[b][s]["vs_shortest_p50"] = round(table[b][s]["p50"] / base, 2)
    out: dict[str, Any] = {"workload": workload.name, "db": str(workload.db), "buckets": table}
    if len(sides) == 2:
        a, b_ = sides
        for b in buckets:
            table[b]["ratio_p50"] = round(table[b][b_]["p50"] / table[b][a]["p50"], 3)
            table[b]["ratio_p99"] = round(table[b][b_]["p99"] / table[b][a]["p99"], 3)
        pairs = list(zip(runs[a], runs[b_], strict=True))
        assert all(x["i"] == y["i"] for x, y in pairs)
        out["answers"] = {
            "compared": len(pairs),
            "same ids": sum(x["ids"] == y["ids"] for x, y in pairs),
            "same snippets": sum(x["snippets"] == y["snippets"] for x, y in pairs),
            "same total": sum(x["total"] == y["total"] for x, y in pairs),
        }
    return out


def render(got: dict[str, Any], sides: list[str]) -> list[str]:
    lines = [f"workload {got['workload']} ({got['db']})"]
    for b, row in got["buckets"].items():
        parts = [f"  {b:<22} n={row['queries']:<4}"]
        for s in sides:
            r = row[s]
            parts.append(f"{s} p50 {r['p50']:8.2f} p99 {r['p99']:8.2f} ms "
                         f"(x{r['vs_shortest_p50']:.2f} of shortest)")  # fmt: skip
        if "ratio_p50" in row:
            parts.append(
                f"{sides[1]}/{sides[0]} p50 {row['ratio_p50']:.3f} p99 {row['ratio_p99']:.3f}"
            )
        lines.append("  ".join(parts))
        for s in sides:
            ph = row[s]["phases_p50"]
            lines.append(f"      {s} phases p50: " + ", ".join(f"{k} {v}" for k, v in ph.items())
                         + f"; CPU p50 {row[s]['cpu_p50']} ms")  # fmt: skip
    if "answers" in got:
        a = got["answers"]
        lines.append(f"  answers alike over {a['compared']} searches: ids {a['same ids']}, "
                     f"snippets {a['same snippets']}, totals {a['same total']}")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tree", type=Path, default=ROOT, help='the "after" source tree')
    ap.add_argument("--against", type=Path, help='the "before" source tree (omit: one side)')
    ap.add_argument("--nfcorpus-db", type=Path,
                    default=Path.home() / ".cache" / "suli" / "bench-nfcorpus.db")  # fmt: skip
    ap.add_argument("--no-nfcorpus", action="store_true")
    ap.add_argument("--synthetic", type=int, default=0, help="items of a synthetic store (0: none)")
    ap.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "suli" / "bench-embedded")
    ap.add_argument("--per-bucket", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cold", action="store_true", help="a new store generation per search")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    sides = {"after": args.tree} if args.against is None else {"before": args.against,
                                                               "after": args.tree}  # fmt: skip
    lines = [
        "$ python -m bench.embedded_long " + shlex.join(argv if argv is not None else sys.argv[1:]),
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"on {os.cpu_count()} cores",
    ]
    print("\n".join(lines), flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="suli-long-") as d:
        loads: list[Workload] = []
        if not args.no_nfcorpus:
            loads.append(nfcorpus_workload(args.nfcorpus_db, args.per_bucket, args.seed))
        if args.synthetic:
            loads.append(synthetic_workload(args.synthetic, 7, args.dir, args.per_bucket))
        for w in loads:
            got = report(w, run_ab(w, sides, args.rounds, args.seed, Path(d), args.cold))
            results.append(got)
            text = render(got, list(sides))
            print("\n".join(text), flush=True)
            lines += text
    tail = f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    print(tail)
    lines.append(tail)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    summary = {"sides": {k: str(v) for k, v in sides.items()}, "results": results}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
