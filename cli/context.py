"""The CLI's lazily built core objects, shared by sub-commands through the Click context."""

from __future__ import annotations

import click

from suli.service import Searcher
from suli.settings import Settings


def settings(ctx: click.Context) -> Settings:
    obj = ctx.ensure_object(dict)
    if "settings" not in obj:
        overrides = {k: v for k, v in (obj.get("overrides") or {}).items() if v is not None}
        obj["settings"] = Settings(**overrides)
    return obj["settings"]  # type: ignore[no-any-return]


def searcher(ctx: click.Context) -> Searcher:
    obj = ctx.ensure_object(dict)
    if "searcher" not in obj:
        from suli.core import open_searcher

        obj["searcher"] = open_searcher(settings(ctx))
        ctx.call_on_close(obj["searcher"].backend.close)
    return obj["searcher"]  # type: ignore[no-any-return]


def store_name(ctx: click.Context) -> str:
    """Which store a command reads, for messages: backend and file or alias (and nodes)."""
    s = settings(ctx)
    if s.backend == "opensearch":
        return f"the OpenSearch index {s.index_alias} at {s.opensearch_url}"
    return f"the embedded store {s.sqlite_path}"
