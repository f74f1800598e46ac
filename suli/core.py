"""Builds the core's heavy objects once (backend, embedder, searcher) from Settings."""

from __future__ import annotations

from suli.backends.base import Backend
from suli.embedding import Embedder, build_embedder
from suli.service import Searcher
from suli.settings import Settings


def open_embedder(settings: Settings) -> Embedder:
    return build_embedder(
        settings.embedder, settings.vector_cache_path, batch_size=settings.embed_batch_size
    )


def open_backend(settings: Settings, embedder: Embedder) -> Backend:
    """The configured backend, with its indices/tables created if missing."""
    if settings.backend == "opensearch":
        from suli.backends.opensearch import OpenSearchBackend

        os_backend = OpenSearchBackend(settings, embedder.dimension, embedder.name)
        os_backend.ensure_ready()
        return os_backend
    from suli.backends.embedded import EmbeddedBackend

    return EmbeddedBackend(settings.sqlite_path, embedder.dimension)


def open_searcher(settings: Settings) -> Searcher:
    embedder = open_embedder(settings)
    reranker = None
    if settings.rerank == "mmr":
        from suli.rerank import MMRReranker

        reranker = MMRReranker()
    return Searcher(open_backend(settings, embedder), embedder, settings, reranker)
