"""`suli demo`: the sample workspace in the embedded store, served on loopback with a token."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.output import handle_errors
from suli.auth import create_token
from suli.settings import Settings


def default_db() -> Path:
    return Settings(backend="embedded").home / "demo.db"


@click.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Store file (default ~/.local/share/suli/demo.db).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    envvar="SULI_DEMO_PORT",
)
@click.option(
    "--as", "principal_id", default="prn_ana", show_default=True, help="Whose token to print."
)
@click.option("--serve/--no-serve", default=True, help="Serve the HTTP API after loading.")
@handle_errors
def demo(db_path: Path | None, port: int, principal_id: str, serve: bool) -> None:
    """Load a sample workspace (~1,000 items) into the embedded store and serve it."""
    from suli import sample
    from suli.core import open_backend, open_embedder

    db = db_path or default_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    settings = Settings(backend="embedded", embedded_path=db)
    embedder = open_embedder(settings)
    backend = open_backend(settings, embedder)
    ws = sample.build()
    if backend.count() != len(ws.items):
        click.echo(f"loading the sample workspace into {db} ...", err=True)
        sample.load(backend, embedder, ws)
    token = create_token(backend, principal_id)
    backend.close()
    url = f"http://127.0.0.1:{port}"
    click.echo(
        f"""
Suli demo: {len(ws.items)} items in workspace {sample.WORKSPACE}, store {db}
Token for {principal_id} (shown once): {token}

Try:
  suli search deploy checklist --url {url} --token {token}
  suli search launch post --outcome rejected,failed --since 2026-06-01 --url {url} --token {token}
  curl -s -H 'Authorization: Bearer {token}' -H 'content-type: application/json' \\
       -d '{{"title": "Roll back a failed payments deploy", "spec": "canary burned the error budget"}}' {url}/api/v1/related
Or without the server:  SULI_EMBEDDED_PATH={db} suli search deploy checklist --as {principal_id}
Web page: {url}/   API docs: {url}/docs
""",
        err=True,
    )
    sys.stderr.flush()
    if serve:
        import uvicorn

        from app.main import create_app

        uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
