"""`suli demo`: the sample workspace in the embedded store, served on loopback with a token."""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path

import click

from cli.output import handle_errors
from suli.auth import create_token, hash_token
from suli.backends.base import Backend
from suli.errors import InvalidInput
from suli.settings import Settings


def default_db() -> Path:
    return Settings(backend="embedded").home / "demo.db"


def _suli() -> str:
    """This suli's own path (the venv's), so printed commands work without an activated venv."""
    here = Path(sys.executable).with_name("suli")
    return str(here) if here.is_file() else "suli"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # As uvicorn binds: a just-stopped demo's TIME_WAIT connections do not count as busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def demo_token(backend: Backend, db: Path, principal_id: str) -> tuple[str, Path]:
    """The principal's demo token, kept beside the store (mode 0600) and reused while the store
    still knows it; a new one only when there is none, so runs do not pile up tokens."""
    path = db.with_name(db.name + ".tokens.json")
    kept: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    token = kept.get(principal_id)
    if token and backend.token(hash_token(token)) == (principal_id, False):
        return token, path
    token = create_token(backend, principal_id)
    kept[principal_id] = token
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f)
    return token, path


def try_lines(suli: str, db: Path, url: str, token: str, principal_id: str) -> list[str]:
    """The commands printed under "Try:"; each runs as printed (tests run them)."""
    store = f"{suli} --backend embedded --db {shlex.quote(str(db))}"
    return [
        f"{suli} search deploy checklist --url {url} --token {token}",
        f"{suli} search launch post --outcome rejected,failed --since 2026-06-01 --url {url} --token {token}",
        f"{store} search deploy checklist --as {principal_id}",
        f"{store} related --title 'Roll back a failed payments deploy' --as {principal_id}",
    ]


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
    help="Port on 127.0.0.1. Env: SULI_DEMO_PORT.",
)
@click.option(
    "--as", "principal_id", default="prn_ana", show_default=True, help="Whose token to print."
)
@click.option("--serve/--no-serve", default=True, help="Serve the HTTP API after loading.")
@click.pass_context
@handle_errors
def demo(
    ctx: click.Context, db_path: Path | None, port: int, principal_id: str, serve: bool
) -> None:
    """Load a sample workspace (~1,000 items) into the embedded store and serve it."""
    from cli import sample
    from suli.core import open_backend, open_embedder

    if serve and not _port_free(port):
        raise InvalidInput(
            f"port: 127.0.0.1:{port} is already in use (another demo or server?); "
            f"pick another with --port {port + 1} (or SULI_DEMO_PORT)",
            "port",
        )
    db = db_path or default_db()
    settings = Settings(backend="embedded", embedded_path=db)
    ctx.ensure_object(dict)["settings"] = settings  # errors name this store
    db.parent.mkdir(parents=True, exist_ok=True)
    embedder = open_embedder(settings)
    backend = open_backend(settings, embedder)
    ws = sample.build()
    try:
        if backend.count() != len(ws.items):
            click.echo(f"loading the sample workspace into {db} ...", err=True)
            sample.load(backend, embedder, ws)
        token, kept = demo_token(backend, db, principal_id)
    finally:
        backend.close()
    url = f"http://127.0.0.1:{port}"
    tries = "\n".join(f"  {line}" for line in try_lines(_suli(), db, url, token, principal_id))
    click.echo(
        f"""
Suli demo: {len(ws.items)} items in workspace {sample.WORKSPACE}, store {db}
Token for {principal_id}: {token}
  (kept in {kept} and reused next run; revoke with `suli token revoke TOKEN`)

Try:
{tries}
  curl -s -H 'Authorization: Bearer {token}' -H 'content-type: application/json' \\
       -d '{{"title": "Roll back a failed payments deploy", "spec": "canary burned the error budget"}}' {url}/api/v1/related
Web page: {url}/   API docs: {url}/docs
""",
        err=True,
    )
    sys.stderr.flush()
    if serve:
        _serve(settings, port, url)


def _serve(settings: Settings, port: int, url: str) -> None:
    import uvicorn

    from app.main import create_app

    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.1)
        if server.started:
            click.echo(f"ready on {url} (Ctrl-C stops)", err=True)

    threading.Thread(target=announce, daemon=True).start()
    server.run()
    if not server.started:
        sys.exit(1)  # uvicorn has said why (e.g. the port was taken meanwhile)
