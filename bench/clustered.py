"""Scale-bench items whose vectors behave like real embeddings, generated once into a cache.

    python -m bench.clustered --n 1000000 --kind clustered   # writes ~/.cache/suli/scale-data/...

Real MiniLM vectors of NFCorpus documents (read from the shared vector cache, embedded once if
missing) are the centres. Item i takes the text of its centre document (its title and a window
of its sentences) and a vector near the centre: the centre, pulled part of the way towards a
second centre, plus Gaussian noise, normalised (cosine to its centre about 0.8-0.9). Real
collections look like this: many near-duplicates and topics, not a uniform sphere, and HNSW
finds such neighbourhoods harder to tell apart. `--kind uniform` gives random unit vectors on
the same items, for comparison.

Every item sits on one of BOARDS boards (board = i mod BOARDS), so a principal on the first
b boards sees exactly b / BOARDS of the items: `LEVELS` names the principals used for 30 %,
10 %, 1 % and 0.1 % visibility.

A data set is a folder `<kind>-<n>-s<seed>-c<centres>/` with `vectors.npy` (float32, n x 384,
read as a memory map) and `items.jsonl` (Suli item lines without vectors); a finished folder
has a `done` marker and is reused as is.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.nfcorpus import load_items
from suli.embedding import build_embedder

DIM = 384
BOARDS = 1000
WORKSPACE = "ws_scale"
MODEL = "all-MiniLM-L6-v2-int8"
CACHE_DIR = Path.home() / ".cache" / "suli" / "scale-data"
VECTOR_CACHE = Path.home() / ".cache" / "suli" / "vectors.sqlite"
# principal id -> boards it is a member of (its share of the items)
LEVELS: dict[str, int] = {"prn_v30": 300, "prn_v10": 100, "prn_v1": 10, "prn_v01": 1}
NOISE = 0.6  # norm of the noise added to a unit centre: cosine to the centre ~ 1/sqrt(1.36)
PULL = 0.3  # at most this share of a second centre
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class DataSet:
    path: Path
    n: int

    @property
    def vectors(self) -> np.ndarray:
        return np.load(self.path / "vectors.npy", mmap_mode="r")

    def items(self) -> Iterator[dict]:
        with open(self.path / "items.jsonl", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)

    def boards(self) -> np.ndarray:
        """The board number of every item, in item order."""
        return np.arange(self.n) % BOARDS


def visible_mask(boards: np.ndarray, principal: str) -> np.ndarray:
    return boards < LEVELS[principal]


def centres(count: int) -> tuple[list[tuple[str, list[str]]], np.ndarray]:
    """The first `count` NFCorpus documents: (title, sentences) and their real MiniLM vectors."""
    docs = [d for d in load_items() if d.body][:count]
    embedder = build_embedder("minilm", VECTOR_CACHE)
    vecs = np.asarray(embedder.embed_documents([d.embed_text() for d in docs]), dtype=np.float32)
    texts = [(d.title, _SENTENCE.split(d.body)) for d in docs]
    return texts, vecs


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def clustered_vectors(
    rng: np.random.Generator, base: np.ndarray, picks: np.ndarray, size: int
) -> np.ndarray:
    """Vectors near base[picks]: pulled towards another random centre, plus noise."""
    other = base[rng.integers(len(base), size=size)]
    pull = rng.uniform(0, PULL, size=(size, 1)).astype(np.float32)
    mixed = unit((1 - pull) * base[picks] + pull * other)
    noise = rng.standard_normal((size, DIM)).astype(np.float32) * (NOISE / np.sqrt(DIM))
    return unit(mixed + noise)


def item_line(i: int, title: str, sentences: list[str], rng: np.random.Generator) -> dict:
    take = int(rng.integers(2, 5))
    start = int(rng.integers(0, max(1, len(sentences) - take + 1)))
    return {
        "id": f"itm_{i:07d}",
        "workspace": WORKSPACE,
        "title": title,
        "body": " ".join(sentences[start : start + take]),
        "board": f"brd_{i % BOARDS}",
        "kind": "artifact" if i % 3 else "work-record",
        "outcome": ("approved", "completed", "failed", "abandoned", None)[i % 5],
    }


def generate(n: int, kind: str = "clustered", seed: int = 11, n_centres: int = 3000,
             root: Path = CACHE_DIR) -> DataSet:  # fmt: skip
    """The data set, generated into root unless a finished copy is already there."""
    path = root / f"{kind}-{n}-s{seed}-c{n_centres}"
    if (path / "done").exists():
        return DataSet(path, n)
    path.mkdir(parents=True, exist_ok=True)
    texts, base = centres(n_centres)
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path / "vectors.npy", mode="w+", dtype=np.float32,
                                    shape=(n, DIM))  # fmt: skip
    chunk = 20_000
    with open(path / "items.jsonl", "w", encoding="utf-8") as f:
        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            picks = rng.integers(len(base), size=size)
            if kind == "clustered":
                out[start : start + size] = clustered_vectors(rng, base, picks, size)
            elif kind == "uniform":
                out[start : start + size] = unit(rng.standard_normal((size, DIM)))
            else:
                raise ValueError(f"kind must be clustered or uniform, not {kind!r}")
            for j, c in enumerate(picks):
                title, sentences = texts[c]
                f.write(json.dumps(item_line(start + j, title, sentences, rng)) + "\n")
            print(f"  generated {start + size}/{n}", file=sys.stderr, flush=True)
    out.flush()
    del out
    (path / "done").write_text("ok\n")
    return DataSet(path, n)


def queries(count: int, seed: int = 5) -> tuple[list[str], np.ndarray]:
    """Real NFCorpus questions (the dev split's texts) and their real MiniLM vectors."""
    from bench.nfcorpus import load_qrels, load_queries

    texts = sorted(load_queries(set(load_qrels("dev"))).values())
    rng = np.random.default_rng(seed)
    picked = [texts[i] for i in rng.permutation(len(texts))[:count]]
    embedder = build_embedder("minilm", VECTOR_CACHE)
    return picked, np.asarray(embedder.embed_documents(picked), dtype=np.float32)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--kind", choices=["clustered", "uniform"], default="clustered")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--centres", type=int, default=3000)
    ap.add_argument("--root", type=Path, default=CACHE_DIR)
    args = ap.parse_args(argv)
    ds = generate(args.n, args.kind, args.seed, args.centres, args.root)
    print(ds.path)


if __name__ == "__main__":
    main()
