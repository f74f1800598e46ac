"""The CLI's lazily built core objects, shared by sub-commands through the Click context."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, cast

import click

from suli.settings import Settings

if TYPE_CHECKING:
    from suli.service import Searcher


def settings(ctx: click.Context) -> Settings:
    obj = ctx.ensure_object(dict)
    if "settings" not in obj:
        overrides = {k: v for k, v in (obj.get("overrides") or {}).items() if v is not None}
        obj["settings"] = Settings(**overrides)
    return cast(Settings, obj["settings"])


def searcher(ctx: click.Context) -> Searcher:
    obj = ctx.ensure_object(dict)
    if "searcher" not in obj:
        from suli.core import open_searcher

        obj["searcher"] = open_searcher(settings(ctx), lazy_model=True)
        ctx.call_on_close(obj["searcher"].backend.close)
    return cast("Searcher", obj["searcher"])


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
