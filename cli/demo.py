"""`suli demo`: the sample workspace in the embedded store (or OpenSearch), served on loopback
with a token."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from cli.output import handle_errors
from suli.auth import create_token, hash_token
from suli.backends.base import Backend, as_store
from suli.errors import InvalidInput
from suli.settings import Settings

# On OpenSearch the demo keeps to an alias and an ACL index of its own (as it keeps to demo.db
# on the embedded store): its principals never overwrite yours, nor yours its.
DEMO_ALIAS = "suli-demo-items"
DEMO_ACL_INDEX = "suli-demo-acl"


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


def demo_token(backend: Backend, path: Path, principal_id: str) -> str:
    """The principal's demo token, kept in path (mode 0600) and reused while the store still
    knows it; a new one only when there is none, so runs do not pile up tokens."""
    kept: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    token = kept.get(principal_id)
    if token and backend.token(hash_token(token)) == (principal_id, False):
        return token
    token = create_token(backend, principal_id)
    kept[principal_id] = token
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f)
    return token


def store_args(settings: Settings) -> str:
    """The global options that point any `suli` command at the demo's store."""
    if settings.backend == "opensearch":
        return (
            f"--backend opensearch --opensearch-url {shlex.quote(str(settings.opensearch_url))} "
            f"--index-alias {shlex.quote(settings.index_alias)} "
            f"--acl-index {shlex.quote(settings.acl_index)}"
        )
    return f"--backend embedded --db {shlex.quote(str(settings.sqlite_path))}"


def try_lines(
    suli: str, store: str, url: str, token: str, principal_id: str, *, served: bool
) -> list[str]:
    """The commands printed under "Try:"; each runs as printed (tests run them). The --url
    ones only while a server runs: without one they are not offered."""
    local = f"{suli} {store}"
    lines = [
        f"{local} search deploy checklist --as {principal_id}",
        f"{local} related --title 'Roll back a failed payments deploy' --as {principal_id}",
    ]
    if served:
        lines += [
            f"{suli} search deploy checklist --url {url} --token {token}",
            f"{suli} search launch post --outcome rejected,failed --since 2026-06-01 "
            f"--url {url} --token {token}",
        ]
    return lines


def _demo_settings(ctx: click.Context, backend: str | None, db_path: Path | None) -> Settings:
    """Where the demo loads: the embedded demo.db unless asked for OpenSearch (by --backend
    here or before `demo`). SULI_BACKEND is not read: a demo never writes into the store a
    shell happens to be configured for."""
    overrides: dict[str, Any] = (ctx.find_root().obj or {}).get("overrides") or {}
    chosen = backend or overrides.get("backend") or "embedded"
    if chosen == "opensearch":
        if db_path:
            raise click.UsageError(
                "--db is the embedded store's file; not with --backend opensearch"
            )
        url = overrides.get("opensearch_url") or os.environ.get("SULI_OPENSEARCH_URL")
        if not url:
            raise InvalidInput(
                "opensearch_url: --backend opensearch needs SULI_OPENSEARCH_URL or "
                "--opensearch-url (after `suli cluster up`: http://127.0.0.1:9200)",
                "opensearch_url",
            )
        return Settings(
            backend="opensearch",
            opensearch_url=url,
            index_alias=overrides.get("index_alias") or DEMO_ALIAS,
            acl_index=overrides.get("acl_index") or DEMO_ACL_INDEX,
        )
    db = db_path or overrides.get("embedded_path") or default_db()
    return Settings(backend="embedded", embedded_path=Path(db))


@click.command(short_help="Load a ~1,000-item sample workspace and serve it.")
@click.option(
    "--backend",
    type=click.Choice(["embedded", "opensearch"]),
    help="Load the sample into the embedded store (default) or into OpenSearch "
    "(SULI_OPENSEARCH_URL or --opensearch-url; served the same way).",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Embedded store file (default ~/.local/share/suli/demo.db).",
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
    ctx: click.Context,
    backend: str | None,
    db_path: Path | None,
    port: int,
    principal_id: str,
    serve: bool,
) -> None:
    """Load a sample workspace (~1,000 items) into the embedded store (or OpenSearch) and serve it."""
    from cli import sample
    from suli.core import open_searcher

    if serve and not _port_free(port):
        raise InvalidInput(
            f"port: 127.0.0.1:{port} is already in use (another demo or server?); "
            f"pick another with --port {port + 1} (or SULI_DEMO_PORT)",
            "port",
        )
    settings = _demo_settings(ctx, backend, db_path)
    ctx.ensure_object(dict)["settings"] = settings  # errors name this store
    if settings.backend == "opensearch":
        where = f"the OpenSearch index {settings.index_alias} at {settings.opensearch_url}"
        # One kept token per cluster and alias: another cluster's store does not know this
        # one's token, and would replace it on every run if they shared the file.
        cluster = hashlib.sha256(str(settings.opensearch_url).encode()).hexdigest()[:8]
        kept = settings.home / f"demo-{settings.index_alias}-{cluster}.tokens.json"
        settings.home.mkdir(parents=True, exist_ok=True)
    else:
        db = settings.sqlite_path
        where, kept = str(db), db.with_name(db.name + ".tokens.json")
        db.parent.mkdir(parents=True, exist_ok=True)
    searcher = open_searcher(
        settings, lazy_model=True
    )  # the model loads only for texts the sample lacks
    ws = sample.build()
    try:
        if as_store(searcher.backend).count() != len(ws.items):
            click.echo(f"loading the sample workspace into {where} ...", err=True)
            sample.load(searcher.backend, searcher.embedder, ws)
        token = demo_token(searcher.backend, kept, principal_id)
    finally:
        searcher.backend.close()
    url = f"http://127.0.0.1:{port}"
    suli, store = _suli(), store_args(settings)
    tries = try_lines(suli, store, url, token, principal_id, served=serve)
    click.echo(
        f"""
Suli demo: {len(ws.items)} items in workspace {sample.WORKSPACE}, store {where}
Token for {principal_id}: {token}
  (kept in {kept} and reused next run; revoke with `suli token revoke TOKEN`)

Try:
{chr(10).join("  " + line for line in tries)}
""",
        err=True,
    )
    if serve:
        click.echo(
            f"""  curl -s -H 'Authorization: Bearer {token}' -H 'content-type: application/json' \\
       -d '{{"title": "Roll back a failed payments deploy", "spec": "canary burned the error budget"}}' {url}/api/v1/related
Web page: {url}/ (sign in with the token above)   API docs: {url}/docs

Every `suli` command reads this store with `{store}` before the command name.
""",
            err=True,
        )
        sys.stderr.flush()
        _serve(settings, port, url)
        return
    click.echo(
        f"""No server started (--no-serve). To serve this store (HTTP API, web page, /docs),
run the same `suli demo` without --no-serve, or:
  {suli} {store} serve --port {port}

Every `suli` command reads this store with `{store}` before the command name.
""",
        err=True,
    )


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
