"""`suli serve`: run the HTTP query service with uvicorn."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

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


@click.command(short_help="Run the HTTP API, web page and MCP endpoint.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes (metrics are summed over them; rate limits are shared only through "
    "SULI_SHARED_STORE).",
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
    if workers > 1:
        _share_metrics()
        if config.shared_store is None:
            click.echo(
                f"note: rate limits are counted in each of the {workers} worker processes "
                f"(each limit is in effect {workers}x); set SULI_SHARED_STORE=redis://... "
                "to count them once",
                err=True,
            )
    server.run(config, host, port, workers, log_level)


def _share_metrics() -> None:
    """Workers write their metrics to one folder that /metrics sums (prometheus_client's
    multiprocess mode); it must be set before a worker imports prometheus_client."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return  # the operator's own folder
    folder = tempfile.mkdtemp(prefix="suli-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    atexit.register(shutil.rmtree, folder, True)
