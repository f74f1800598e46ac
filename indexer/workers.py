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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Job:
    """One submitted batch: the input positions of each worker's run, and its future."""

    runs: list[list[int]]
    futures: list[Future[FloatArray]]


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

    def submit(self, texts: Sequence[str]) -> Job:
        """Embed texts, split across the workers (one batch alone would keep only one core
        busy): the texts are sorted by length and cut into one run per worker, so each run
        pads little; `result` puts the vectors back in input order."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        size = -(-len(order) // self.workers)  # ceiling division
        runs = [order[k : k + size] for k in range(0, len(order), size)]
        try:
            futures = [self._pool.submit(_embed, [texts[i] for i in run]) for run in runs]
        except BrokenProcessPool as e:  # a worker died while the pool was idle
            raise IndexingError(WORKER_DIED) from e
        return Job(runs, futures)

    @staticmethod
    def result(job: Job) -> FloatArray:
        """A job's vectors in input order; a worker that died fails the run loudly."""
        try:
            parts = [f.result() for f in job.futures]
        except BrokenProcessPool as e:
            raise IndexingError(WORKER_DIED) from e
        out = np.empty((sum(len(r) for r in job.runs), parts[0].shape[1]), dtype=np.float32)
        for run, part in zip(job.runs, parts, strict=True):
            out[run] = part
        return out

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
