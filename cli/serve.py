"""`suli serve`: run the HTTP query service with uvicorn."""

from __future__ import annotations

import os

import click

from cli.context import settings
from cli.output import handle_errors

# Group options that reach the service through the environment (uvicorn workers are new
# processes: they read Settings from SULI_* like any deployment would).
_ENV = {
    "backend": "SULI_BACKEND",
    "opensearch_url": "SULI_OPENSEARCH_URL",
    "embedded_path": "SULI_EMBEDDED_PATH",
}


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes (rate limits and metrics are per worker).",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@click.pass_context
@handle_errors
def serve(ctx: click.Context, host: str, port: int, workers: int, log_level: str) -> None:
    """Run the HTTP API (/api/v1/search, /api/v1/related, ..., /docs) over the configured backend."""
    from app import server

    config = settings(
        ctx
    )  # bad configuration fails here (exit 2, see cli.main), not inside a worker
    for key, value in (ctx.obj.get("overrides") or {}).items():
        if value is not None and key in _ENV:
            os.environ[_ENV[key]] = str(value)
    server.run(config, host, port, workers, log_level)
