"""One side of bench.embedded_long's A/B run: `Searcher.search` over a workload, with the
`suli` package of a given source tree.

    python -m bench.embedded_ab_worker --tree DIR --workload W.json

The workload file names the store, the principal, the settings and the queries (texts and
their vectors); the parent writes a query number a line on stdin and reads one JSON line back:
the wall and CPU time of that one search and its answer (ids, snippets, total). Suli is
imported only after DIR is put first on sys.path, so two workers run two versions of the code
against the same store file in the same run (the parent interleaves them query by query).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


class Lookup:
    """Serves the workload's precomputed query vectors: the run measures search, not a model."""

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self.vectors = dict(zip(texts, vectors, strict=True))
        self.name = "bench-lookup"
        self.dimension = int(vectors.shape[1])

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]

    def embed_documents(self, texts: list[str], *, on_progress: Any = None) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True, help="the source tree whose suli runs")
    ap.add_argument("--workload", type=Path, required=True)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.tree.resolve()))
    # Imported here, after the tree is on the path: which suli runs is the point.
    import suli
    from suli.backends.embedded import EmbeddedBackend
    from suli.models import Principal, SearchRequest
    from suli.service import Searcher
    from suli.settings import Settings

    assert Path(suli.__file__).resolve().is_relative_to(args.tree.resolve()), suli.__file__
    work = json.loads(args.workload.read_text())
    texts: list[str] = work["texts"]
    vectors = np.load(work["vectors"]).astype(np.float32)
    embedder = Lookup(texts, vectors)
    settings = Settings(
        backend="embedded", embedded_path=Path(work["db"]), meaning_floor=work["meaning_floor"]
    )
    backend = EmbeddedBackend(Path(work["db"]), embedder.dimension)
    searcher = Searcher(backend, embedder, settings)  # type: ignore[arg-type]
    who = Principal(work["principal"], work["workspace"])

    def one(i: int) -> dict[str, Any]:
        req = SearchRequest(query=texts[i], limit=10)
        t0, c0 = time.perf_counter(), time.process_time()
        resp = searcher.search(who, req)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return {
            "i": i,
            "ms": round(wall * 1000, 3),
            "cpu_ms": round(cpu * 1000, 3),
            "ids": [r.id for r in resp.results],
            "snippets": [r.snippet for r in resp.results],
            "total": resp.total,
            "phases": resp.timings_ms,
        }

    for i in work.get("warm", []):  # the vector matrix and SQLite's pages, before timing
        one(i)
    print(json.dumps({"ready": suli.__file__}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        print(json.dumps(one(int(line))), flush=True)
    backend.close()


if __name__ == "__main__":
    main()
