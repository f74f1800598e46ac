"""Builds the core's heavy objects once (backend, embedder, searcher) from Settings."""

from __future__ import annotations

from suli.backends.base import Store
from suli.embedding import Embedder, build_embedder
from suli.errors import ModelMismatch
from suli.service import Searcher
from suli.settings import Settings


def open_embedder(settings: Settings, *, lazy_model: bool = False) -> Embedder:
    """lazy_model: load the model only when a text is not in the vector cache (a one-shot
    command with a known query vector never waits for it; the service loads it at start, so
    its first query is not the slow one)."""
    return build_embedder(
        settings.embedder,
        settings.vector_cache_path,
        batch_size=settings.embed_batch_size,
        lazy=lazy_model,
    )


def open_backend(settings: Settings, embedder: Embedder) -> Store:
    """The configured backend, with its indices/tables created if missing."""
    if settings.backend == "opensearch":
        from suli.backends.opensearch import OpenSearchBackend

        os_backend = OpenSearchBackend(settings, embedder.dimension, embedder.name)
        os_backend.ensure_ready()
        stored = os_backend.live_model()
        if stored and stored != embedder.name:  # the live index's mapping records its model
            os_backend.close()
            raise ModelMismatch(f"the index {settings.index_alias}", stored, embedder.name)
        return os_backend
    from suli.backends.embedded import EmbeddedBackend

    # The store records the model and refuses another (suli.errors.ModelMismatch).
    return EmbeddedBackend(settings.sqlite_path, embedder.dimension, model=embedder.name)


def open_searcher(settings: Settings, *, lazy_model: bool = False) -> Searcher:
    embedder = open_embedder(settings, lazy_model=lazy_model)
    reranker = None
    if settings.rerank == "mmr":
        from suli.rerank import MMRReranker

        reranker = MMRReranker()
    return Searcher(open_backend(settings, embedder), embedder, settings, reranker)
