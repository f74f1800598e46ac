"""The CLI's lazily built core objects, shared by sub-commands through the Click context."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import click

from suli.settings import Settings

if TYPE_CHECKING:
    from suli.service import Searcher


def settings(ctx: click.Context) -> Settings:
    obj = ctx.ensure_object(dict)
    if "settings" not in obj:
        overrides = {k: v for k, v in (obj.get("overrides") or {}).items() if v is not None}
        obj["settings"] = Settings(**overrides)
    return obj["settings"]  # type: ignore[no-any-return]


def open_searcher(s: Settings) -> Searcher:
    """suli.core.open_searcher, but the embedding model loads only when a text is not in the
    vector cache: a one-shot command with a known query vector never waits for it (the
    service loads it at start instead, so its first query is not the slow one)."""
    from suli.core import open_backend
    from suli.embedding import build_embedder
    from suli.service import Searcher

    embedder = build_embedder(
        s.embedder, s.vector_cache_path, batch_size=s.embed_batch_size, lazy=True
    )
    reranker = None
    if s.rerank == "mmr":
        from suli.rerank import MMRReranker

        reranker = MMRReranker()
    return Searcher(open_backend(s, embedder), embedder, s, reranker)


def searcher(ctx: click.Context) -> Searcher:
    obj = ctx.ensure_object(dict)
    if "searcher" not in obj:
        obj["searcher"] = open_searcher(settings(ctx))
        ctx.call_on_close(obj["searcher"].backend.close)
    return obj["searcher"]  # type: ignore[no-any-return]


def embed_query_first(s: Searcher, text: str) -> None:
    """Find or make the query's vector before the search starts: a model that must load first
    then does not eat the search's embedding budget (past it the vector leg would be dropped
    as degraded), and the search's own call finds the vector in memory. A failure here is
    left to the search, which reports it as a degraded vector leg."""
    with contextlib.suppress(Exception):  # the search says what failed, once
        s.embedder.embed_query(text)


def load_model(s: Searcher) -> None:
    """Load the embedding model now if it is not yet, so loading it is not counted against
    the search's embedding budget (past it the vector leg would be given up as degraded)."""
    inner = getattr(s.embedder, "inner", s.embedder)
    if hasattr(inner, "load"):
        inner.load()


def store_name(ctx: click.Context) -> str:
    """Which store a command reads, for messages: backend and file or alias (and nodes)."""
    s = settings(ctx)
    if s.backend == "opensearch":
        return f"the OpenSearch index {s.index_alias} at {s.opensearch_url}"
    return f"the embedded store {s.sqlite_path}"
