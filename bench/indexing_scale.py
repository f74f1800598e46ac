"""Indexing at the model's limit: per-core profile, worker processes, vector reuse.

    python -m bench.indexing_scale profile --passages 96
    python -m bench.indexing_scale workers --passages 192 --workers 1 2
    python -m bench.indexing_scale reupsert --url http://127.0.0.1:9200 --items 10000 --rounds 2

profile   where one core's time goes: tokenising, the bare ONNX session on pre-tokenised
          length-sorted batches (the model's floor), and the whole `embed_documents`.
workers   `index_items` with an EmbedPool of N processes into a fresh embedded store, against
          the single-process raw encode rate of the same texts (measured in the same run).
reupsert  a second `index_items` pass over unchanged items (every vector reused: the model is
          never called, asserted) against `helpers.bulk` of the same documents with their
          vectors into a fresh index of the same mapping; sides alternate round by round.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from opensearchpy import OpenSearch, helpers

from bench.nfcorpus import DATA
from indexer.pipeline import index_items
from indexer.workers import EmbedPool
from suli.backends.embedded import EmbeddedBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.bodies import item_to_doc
from suli.embedding import FloatArray, MiniLMEmbedder, embed_hash
from suli.models import Item
from suli.settings import Settings


def passages(n: int, salt: str) -> list[str]:
    """n NFCorpus passages (title + text), salted so no cache anywhere has seen them."""
    out: list[str] = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(f"{d.get('title', '')} {d.get('text', '')} {salt}")
            if len(out) == n:
                break
    return out


def profile(args: argparse.Namespace) -> None:
    texts = passages(args.passages, "p")
    model = MiniLMEmbedder(batch_size=8, threads=1)
    model.embed_documents(texts[:8])  # warm up
    t0, c0 = time.perf_counter(), time.process_time()
    enc = model._tokenizer.encode_batch(texts)
    tok_s, tok_cpu = time.perf_counter() - t0, time.process_time() - c0
    order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
    batches = [[enc[i].ids for i in order[k : k + 8]] for k in range(0, len(order), 8)]
    feeds = []
    for ids in batches:
        width = max(map(len, ids))
        x = np.zeros((len(ids), width), dtype=np.int64)
        m = np.zeros_like(x)
        for r, row in enumerate(ids):
            x[r, : len(row)], m[r, : len(row)] = row, 1
        feed = {"input_ids": x, "attention_mask": m}
        if model._with_token_types:
            feed["token_type_ids"] = np.zeros_like(x)
        feeds.append(feed)
    t0, c0 = time.perf_counter(), time.process_time()
    for feed in feeds:
        model._session.run([model._output], feed)
    run_s, run_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    model.embed_documents(texts)
    all_s, all_cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(texts)
    tokens = sum(len(e.ids) for e in enc)
    print(f"passages {n}, mean tokens {tokens / n:.0f}, batch 8, 1 intra-op thread")
    print(f"tokenise          {tok_s:7.3f} s wall {tok_cpu:7.3f} s cpu")
    print(
        f"session (floor)   {run_s:7.3f} s wall {run_cpu:7.3f} s cpu  {n / run_s:6.1f} passages/s"
    )
    print(
        f"embed_documents   {all_s:7.3f} s wall {all_cpu:7.3f} s cpu  {n / all_s:6.1f} passages/s"
    )
    print(f"embed_documents / floor: {all_s / run_s:.3f}")


def workers(args: argparse.Namespace) -> None:
    texts = passages(args.passages, f"w{uuid.uuid4().hex[:6]}")
    items = [Item(f"itm_{k}", "ws", t[:80], body=t[80:]) for k, t in enumerate(texts)]
    model = MiniLMEmbedder(batch_size=8, threads=1)
    model.embed_documents(texts[:8])
    t0 = time.perf_counter()
    model.embed_documents([it.embed_text() for it in items])  # what the indexer embeds
    raw_rate = len(texts) / (time.perf_counter() - t0)
    print(f"raw encode, one process, 1 thread: {raw_rate:.2f} passages/s ({len(texts)} passages)")
    rates = {}
    for n in args.workers:
        pool = EmbedPool("minilm", n)
        try:
            pool.result(pool.submit(["warm up"] * n))  # start the processes and load the model
            with tempfile.TemporaryDirectory() as tmp:
                store = EmbeddedBackend(Path(tmp) / "suli.db", 384, model="all-MiniLM-L6-v2-int8")
                t0 = time.perf_counter()
                s = index_items(enumerate(items), store, model, pool=pool)
                took = time.perf_counter() - t0
                store.close()
        finally:
            pool.close()
        assert s.indexed == len(items) and s.embedded == len(items), s
        rates[n] = len(items) / took
        print(f"index_items --workers {n}: {rates[n]:.2f} items/s "
              f"({rates[n] / (n * raw_rate):.3f} x {n} x raw)")  # fmt: skip
    if 1 in rates:
        for n, r in rates.items():
            print(f"workers {n} / workers 1: {r / rates[1]:.3f}")


class Precomputed:
    """An embedder that returns given vectors and counts every call (must stay at 0)."""

    name = "all-MiniLM-L6-v2-int8"
    dimension = 384

    def __init__(self, texts: Sequence[str], vectors: FloatArray) -> None:
        self.rows = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors
        self.calls = 0

    def embed_documents(self, texts: Sequence[str], *, on_progress: Any = None) -> FloatArray:
        self.calls += len(texts)
        return self.vectors[[self.rows[t] for t in texts]]

    def embed_query(self, text: str) -> FloatArray:
        raise AssertionError("not used")


def reupsert(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    items = [Item(f"itm_{k}", "ws", f"item {k} title", body=f"body of item {k} " * 20)
             for k in range(args.items)]  # fmt: skip
    vectors = rng.normal(size=(len(items), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    emb = Precomputed([it.embed_text() for it in items], vectors)
    client = OpenSearch(args.url, timeout=120)
    alias = f"bench-reuse-{uuid.uuid4().hex[:8]}"
    backend = OpenSearchBackend(
        Settings(opensearch_url=args.url, index_alias=alias, acl_index=f"{alias}-acl"),
        384,
        emb.name,
    )
    backend.ensure_ready()
    first = index_items(enumerate(items), backend, emb)
    assert first.indexed == len(items), first
    backend.refresh()
    times: dict[str, list[float]] = {"suli_reupsert": [], "helpers_bulk": []}
    try:
        for r in range(args.rounds):
            raw_index = backend.create_physical()
            docs = [
                {"_index": raw_index, "_id": f"ws/{it.id}",
                 "_source": item_to_doc(it, vectors[i], embed_hash(emb.name, it.embed_text()))}
                for i, it in enumerate(items)
            ]  # fmt: skip
            sides = ["suli_reupsert", "helpers_bulk"]
            for side in sides if r % 2 == 0 else sides[::-1]:
                t0 = time.perf_counter()
                if side == "helpers_bulk":
                    ok, errors = helpers.bulk(client, docs, chunk_size=500, max_retries=0)
                    assert ok == len(items) and not errors
                else:
                    emb.calls = 0
                    s = index_items(enumerate(items), backend, emb)
                    assert s.indexed == len(items) and s.reused == len(items), s
                    assert emb.calls == 0, "the model was called for an unchanged item"
                times[side].append(time.perf_counter() - t0)
            client.indices.delete(index=raw_index)
    finally:
        for name in client.indices.get(index=f"{alias}*"):
            client.indices.delete(index=name)
    best = {k: min(v) for k, v in times.items()}
    print(f"{len(items)} unchanged items, {args.rounds} rounds, best of each side")
    for k, v in times.items():
        print(
            f"{k:15s} "
            + " ".join(f"{x:.2f}" for x in v)
            + f"  s; {len(items) / best[k]:.0f} items/s"
        )
    print(
        f"suli re-upsert / helpers.bulk throughput: {best['helpers_bulk'] / best['suli_reupsert']:.3f}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--passages", type=int, default=96)
    w = sub.add_parser("workers")
    w.add_argument("--passages", type=int, default=192)
    w.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    r = sub.add_parser("reupsert")
    r.add_argument("--url", default="http://127.0.0.1:9200")
    r.add_argument("--items", type=int, default=10_000)
    r.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    {"profile": profile, "workers": workers, "reupsert": reupsert}[args.what](args)


if __name__ == "__main__":
    main()
