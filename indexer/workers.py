"""Embedding in worker processes: one model per process, batches answered in submit order.

The main process keeps reading, validating, writing and accounting; only the model runs in the
workers, so each core embeds with its own single-threaded ONNX session (see DEFAULT_THREADS in
suli.embedding: one thread per process beat two threads in one process on this hardware).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from suli.embedding import Embedder, FloatArray, build_embedder
from suli.errors import IndexingError

WORKER_DIED = (
    "an embedding worker process died (killed or out of memory); the run stops here. Lines "
    "already written stay written; re-run the same command to finish (upserts are idempotent, "
    "unchanged items reuse their stored vectors)"
)
_model: Embedder | None = None  # the worker process's own embedder


def _start(name: str, batch_size: int) -> None:
    global _model
    _model = build_embedder(name, batch_size=batch_size)


def _embed(texts: list[str]) -> FloatArray:
    assert _model is not None, "worker not started"
    return np.asarray(_model.embed_documents(texts), dtype=np.float32)


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class EmbedPool:
    """N worker processes, each with the embedder called `name` ("minilm" or "fake")."""

    def __init__(self, name: str, workers: int, batch_size: int = 8) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        # spawn, not fork: the parent may hold threads (progress bar, HTTP pools) and an open
        # store, which a forked child would inherit in an undefined state.
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=(name, batch_size),
        )

    def submit(self, texts: Sequence[str]) -> Future[FloatArray]:
        try:
            return self._pool.submit(_embed, list(texts))
        except BrokenProcessPool as e:  # a worker died while the pool was idle
            raise IndexingError(WORKER_DIED) from e

    @staticmethod
    def result(future: Future[FloatArray]) -> FloatArray:
        """A batch's vectors; a worker that died fails the run loudly (IndexingError)."""
        try:
            return future.result()
        except BrokenProcessPool as e:
            raise IndexingError(WORKER_DIED) from e

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
