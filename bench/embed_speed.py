"""Embedding speed of the bundled MiniLM model: documents/s by batch size and threads, query p50.

Run from the repo root: .venv/bin/python -m bench.embed_speed [--docs 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from pathlib import Path

from suli.embedding import MiniLMEmbedder

CORPUS = Path("/work/shared/data/nfcorpus/corpus.jsonl.gz")
BATCH_SIZES = (1, 4, 8, 16, 32)
THREADS = (1, 2)
QUERY = "does vitamin d help with depression"


def passages(n: int) -> list[str]:
    """The first n NFCorpus documents as title + " " + text (what Suli indexes)."""
    out = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            out.append(f"{doc['title']} {doc['text']}")
            if len(out) == n:
                break
    return out


def docs_per_second(model: MiniLMEmbedder, texts: list[str], repeats: int) -> float:
    """Best of repeats: the machine's speed drifts, and the best run is the least disturbed."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        model.embed_documents(texts)
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def query_p50_ms(model: MiniLMEmbedder, n: int = 200) -> float:
    """Median latency of one short query."""
    for _ in range(10):  # warm-up: first runs allocate buffers
        model.embed_query(QUERY)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        model.embed_query(QUERY)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    texts = passages(args.docs)
    print(f"{len(texts)} NFCorpus passages, cpus={os.cpu_count()}, best of {args.repeats} runs")
    models = {t: MiniLMEmbedder(threads=t) for t in THREADS}
    tokens = [len(e.ids) for e in models[1]._tokenizer.encode_batch(texts)]
    print(f"tokens per passage (truncated at 256): mean {statistics.mean(tokens):.0f}")
    models[1].embed_documents(texts[:8])  # warm-up
    models[2].embed_documents(texts[:8])

    header = "threads | " + " | ".join(f"batch {b:>2}" for b in BATCH_SIZES) + " | query p50"
    print(header)
    print("-" * len(header))
    for threads, model in models.items():
        cells = []
        for batch in BATCH_SIZES:
            model.batch_size = batch
            cells.append(f"{docs_per_second(model, texts, args.repeats):6.1f}/s")
        print(f"{threads:>7} | " + " | ".join(cells) + f" | {query_p50_ms(model):6.2f} ms")


if __name__ == "__main__":
    main()
