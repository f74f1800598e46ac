"""The vector cache: document vectors by exact text and query vectors by normalised query
text, in one SQLite file (mode 0600), and the embedders that read it first.

A repeated query never loads the model: LazyEmbedder defers loading it (about a second of
onnxruntime start-up) until a text is not in the cache. suli.embedding re-exports all of this.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from suli.files import create_private

if TYPE_CHECKING:  # at run time suli.embedding imports this module, not the other way round
    from suli.embedding import Embedder, FloatArray, ProgressFn


def _text_list(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too; embedding it character by character is always a bug.
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of texts, not one str")
    return list(texts)


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
# How long a write waits for another process's: long for document vectors (an indexer must not
# fail on "locked"), short for a query's, which a search is waiting on.
WRITE_WAIT_MS = 30_000
QUERY_WRITE_WAIT_MS = 200
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
        self._conn = sqlite3.connect(path, timeout=WRITE_WAIT_MS / 1000, check_same_thread=False)
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
        with self._lock:
            # A search waits for this write: when another process holds the file's write lock
            # (an indexer storing a batch) it gives up soon ("database is locked") rather than
            # eat the search's embedding budget; the vector is only not kept.
            self._conn.execute(f"PRAGMA busy_timeout = {QUERY_WRITE_WAIT_MS}")
            try:
                with self._conn:
                    self._conn.execute(
                        "INSERT OR REPLACE INTO query_vectors VALUES (?, ?, ?, ?)",
                        (embedder, _text_key(text), blob, time.time()),
                    )
                    self._conn.execute(
                        "DELETE FROM query_vectors WHERE used_at < (SELECT used_at FROM"
                        " query_vectors ORDER BY used_at DESC LIMIT 1 OFFSET ?)",
                        (cap - 1,),
                    )
            finally:
                self._conn.execute(f"PRAGMA busy_timeout = {WRITE_WAIT_MS}")

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
