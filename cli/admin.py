"""Writes: `suli index`, `delete`, `acl load`, `principal load`, `token create|revoke`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.context import searcher
from cli.output import emit_json, handle_errors, json_option
from indexer.pipeline import Summary, index_stream, raw_lines, write_rejects
from suli.auth import create_token, revoke_token
from suli.errors import InvalidInput
from suli.validate import lookup_id, parse_acl, parse_principal


def _count_lines(path: str) -> int | None:
    if path == "-":
        return None
    # Bytes in bounded reads: a line that is not UTF-8 or is huge is counted, then rejected.
    with open(path, "rb") as f:
        return sum(1 for _, raw, too_long in raw_lines(f) if too_long or raw.strip())


@click.command("index")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False, exists=False))
@click.option(
    "--rejects", "rejects_path", help="Where to write rejected lines (default FILE.rejects.jsonl)."
)
@json_option
@click.pass_context
@handle_errors
def index_cmd(ctx: click.Context, file: str, rejects_path: str | None, as_json: bool) -> None:
    """Index JSON lines from FILE (or - for stdin); bad lines go to a rejects file."""
    if file != "-" and not Path(file).is_file():
        raise InvalidInput(f"file: no such file {file!r}", "file")
    s = searcher(ctx)
    total = _count_lines(file)
    # Bytes, decoded per line by the reader: one undecodable line is one rejected line.
    stream: IO[bytes] = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    progress = Progress(
        TextColumn("indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=__import__("rich.console").console.Console(stderr=True),
        transient=True,
    )
    with progress, stream:
        task = progress.add_task("index", total=total)

        def tick(sm: Summary) -> None:
            progress.update(task, completed=sm.read)

        summary = index_stream(stream, s.backend, s.embedder, on_progress=tick)
    s.backend.refresh()
    if summary.rejected:
        rejects_path = rejects_path or (("stdin" if file == "-" else file) + ".rejects.jsonl")
        write_rejects(rejects_path, summary.rejected)
    body = summary.to_json()
    if rejects_path and summary.rejected:
        body["rejects_file"] = rejects_path
    if as_json:
        emit_json(body)
    else:
        click.echo(
            f"read {summary.read}, indexed {summary.indexed}, rejected {len(summary.rejected)}, retried {summary.retried}",
            err=True,
        )
        for r in summary.rejected[:20]:
            click.echo(f"  line {r.line}: {r.reason}", err=True)
        if summary.rejected:
            click.echo(f"  rejects written to {rejects_path}", err=True)
    if not summary.ok:
        sys.exit(1)


@click.command()
@click.argument("ids", nargs=-1, required=True)
@json_option
@click.pass_context
@handle_errors
def delete(ctx: click.Context, ids: tuple[str, ...], as_json: bool) -> None:
    """Delete items by id."""
    for item_id in ids:
        lookup_id(item_id, "ids")
    s = searcher(ctx)
    out = s.backend.delete(list(ids))
    body = {"deleted": list(out.indexed), "failed": out.rejected}
    emit_json(body) if as_json else click.echo(
        f"deleted {len(out.indexed)}, failed {len(out.rejected)}"
    )
    if out.rejected:
        sys.exit(1)


def _read_json_objects(path: str) -> list[dict[str, object]]:
    """A JSON array or JSON lines."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            data = json.loads(stripped)
        else:
            data = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise InvalidInput(f"file: invalid JSON ({e.msg}, line {e.lineno})", "file") from None
    if not all(isinstance(d, dict) for d in data):
        raise InvalidInput("file: expected JSON objects", "file")
    return data


@click.group()
def acl() -> None:
    """Board ACLs."""


@acl.command("load")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False))
@click.pass_context
@handle_errors
def acl_load(ctx: click.Context, file: str) -> None:
    """Load board ACLs ({board, workspace, name, members[], groups[]}) from FILE."""
    acls = [parse_acl(d) for d in _read_json_objects(file)]  # all valid, or nothing written
    searcher(ctx).backend.put_acls(acls)
    click.echo(f"loaded {len(acls)} board ACLs", err=True)


@click.group()
def principal() -> None:
    """Principals (people and agents)."""


@principal.command("load")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False))
@click.pass_context
@handle_errors
def principal_load(ctx: click.Context, file: str) -> None:
    """Load principals ({id, workspace, kind, groups[]}) from FILE."""
    ps = [parse_principal(d) for d in _read_json_objects(file)]
    searcher(ctx).backend.put_principals(ps)
    click.echo(f"loaded {len(ps)} principals", err=True)


@click.group()
def token() -> None:
    """API tokens (stored only as hashes)."""


@token.command("create")
@click.option("--principal", "principal_id", required=True)
@click.option("--admin", is_flag=True, help="May call ingestion and ACL routes.")
@click.pass_context
@handle_errors
def token_create(ctx: click.Context, principal_id: str, admin: bool) -> None:
    """Create a token; it is printed once and cannot be shown again."""
    click.echo(create_token(searcher(ctx).backend, principal_id, admin))


@token.command("revoke")
@click.argument("token_or_hash")
@click.pass_context
@handle_errors
def token_revoke(ctx: click.Context, token_or_hash: str) -> None:
    """Revoke a token (give the token or its hash)."""
    revoke_token(searcher(ctx).backend, token_or_hash)
    click.echo("revoked", err=True)
