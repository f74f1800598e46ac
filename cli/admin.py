"""Writes: `suli index`, `delete`, `acl load|list`, `principal load|list`,
`token create|list|revoke`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from cli.context import searcher, settings, store_name
from cli.output import emit_json, handle_errors, json_option, plural
from cli.rejects import default_rejects_path, echo_rejects, save_rejects
from indexer.lines import raw_lines
from suli.auth import create_token, revoke_token
from suli.backends.base import as_store
from suli.errors import InvalidInput, SuliError
from suli.validate import lookup_id, parse_acl, parse_principal

T = TypeVar("T")

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def _count_lines(path: str) -> int | None:
    if path == "-":
        return None
    # Bytes in bounded reads: a line that is not UTF-8 or is huge is counted, then rejected.
    with open(path, "rb") as f:
        return sum(1 for _, raw, too_long in raw_lines(f) if too_long or raw.strip())


def _part(text: str) -> tuple[int, int]:
    """I/N with 1 <= I <= N, or InvalidInput naming --part."""
    i, sep, n = text.partition("/")
    if sep and i.strip().isdigit() and n.strip().isdigit() and 1 <= int(i) <= int(n):
        return int(i), int(n)
    raise InvalidInput(f"--part: expected I/N with 1 <= I <= N (e.g. 2/4), got {text!r}", "part")


def index_progress(console: Console) -> Progress:
    """`suli index`'s bar on stderr. The embedded/reused/cached counts only where the line
    has room for them: on an 80-column terminal they pushed the N/M count off the line."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    wide = console.width >= 120
    columns: list[ProgressColumn | str] = [TextColumn("indexing")]
    if wide:
        columns.append(TextColumn("{task.fields[counts]}"))
    columns += [
        BarColumn(bar_width=None if wide else 16),
        MofNCompleteColumn(),
        TaskProgressColumn(show_speed=True),  # lines/s, while the total is unknown too
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    return Progress(*columns, console=console, transient=True)


@click.command("index", short_help="Index JSON lines (exit 1 if any line is rejected).")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False, exists=False))
@click.option(
    "--rejects",
    "rejects_path",
    type=click.Path(dir_okay=False),
    help="Where to write rejected lines (default FILE.rejects.jsonl; for - (stdin) "
    "$SULI_HOME/rejects/stdin-<UTC time>.rejects.jsonl, which `suli status` counts).",
)
@click.option(
    "--part",
    default="1/1",
    show_default=True,
    help="Index only share I of N (I/N, split by a stable hash of each item's id), so N "
    "processes or machines can index one file together; a part can be re-run after a crash.",
)
@click.option(
    "--workers",
    type=click.IntRange(0, 256),
    default=None,
    help="Processes that run the embedding model (default: one per core with the real model, "
    "none with the fake; 0 embeds in this process).",
)
@json_option
@click.pass_context
@handle_errors
def index_cmd(
    ctx: click.Context,
    file: str,
    rejects_path: str | None,
    part: str,
    workers: int | None,
    as_json: bool,
) -> None:
    """Index JSON lines from FILE (or - for stdin); bad lines go to a rejects file.

    Exit code: 0 when every line was indexed; 1 when any line was rejected (the others are
    indexed all the same) or the store stopped taking writes; 2 for a usage error.
    """
    from rich.console import Console

    from indexer.pipeline import Summary, index_stream
    from indexer.workers import EmbedPool, default_workers

    share = _part(part)
    if file != "-" and not Path(file).is_file():
        raise InvalidInput(f"file: no such file {file!r}", "file")
    s = searcher(ctx)
    total = _count_lines(file)
    # Bytes, decoded per line by the reader: one undecodable line is one rejected line.
    stream: IO[bytes] = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    progress = index_progress(Console(stderr=True))
    kind = settings(ctx).embedder
    if workers is None:
        workers = default_workers() if kind == "minilm" else 0
    pool = EmbedPool(kind, workers) if workers else None
    with progress, stream:
        task = progress.add_task("index", total=total, counts="")

        def tick(sm: Summary) -> None:
            counts = f"embedded {sm.embedded}, reused {sm.reused}, cached {sm.cached}"
            progress.update(task, completed=sm.read, counts=counts)

        try:
            summary = index_stream(
                stream, s.backend, s.embedder, part=share, on_progress=tick, pool=pool
            )
        finally:
            if pool is not None:
                pool.close(cancel=True)
    refresh_error = None
    if summary.indexed and summary.stopped is None:
        try:
            s.backend.refresh()
        except SuliError as e:  # written, only not yet searchable: said, not a traceback
            refresh_error = e.message
    body = summary.to_json()
    rejects_error = None
    if summary.rejected:
        rejects_path = rejects_path or str(default_rejects_path(file, settings(ctx).home))
        # A folder it cannot write (read-only, or a container's user on a host's volume) is
        # said after the summary, with every reason, so no rejected line goes unreported.
        rejects_error = save_rejects(rejects_path, summary.rejected)
        body["rejects_file"] = None if rejects_error else rejects_path
        if rejects_error:
            body["rejects_error"] = rejects_error
    if refresh_error:
        body["refresh_error"] = refresh_error
    if as_json:
        emit_json(body)
    else:
        click.echo(
            f"read {summary.read}, indexed {summary.indexed}, rejected {len(summary.rejected)}, "
            f"retried {summary.retried}; embedded {summary.embedded}, reused {summary.reused} "
            f"(unchanged), cached {summary.cached} (from the vector cache), brought their own "
            f"vector {summary.supplied}",
            err=True,
        )
        if summary.stopped:
            click.echo(
                f"stopped ({summary.stopped}): {summary.unwritten} lines read were not "
                "written; re-run the same command to finish (upserts are idempotent)",
                err=True,
            )
        echo_rejects(summary.rejected, rejects_path, every=rejects_error is not None)
        if refresh_error:
            click.echo(f"written, but not yet searchable: {refresh_error}", err=True)
    if rejects_error:
        click.echo(f"Error: {rejects_error}", err=True)
    if not summary.ok or refresh_error:
        sys.exit(1)


@click.command(short_help="Delete items of one workspace by id.")
@click.argument("ids", nargs=-1, required=True)
@click.option(
    "--workspace",
    "-w",
    required=True,
    help="The workspace the ids belong to (ids are per workspace).",
)
@json_option
@click.pass_context
@handle_errors
def delete(ctx: click.Context, ids: tuple[str, ...], workspace: str, as_json: bool) -> None:
    """Delete items of one workspace by id (exit 1 when one is missing or fails)."""
    for item_id in ids:
        lookup_id(item_id, "ids")
    s = searcher(ctx)
    out = s.backend.delete(workspace, list(ids))
    body = {"deleted": list(out.indexed), "missing": list(out.missing), "failed": out.rejected}
    emit_json(body) if as_json else click.echo(
        f"deleted {len(out.indexed)}, not found {len(out.missing)}, failed {len(out.rejected)}"
    )
    if out.rejected or out.missing:
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


def _parsed(file: str, parse: Callable[[dict[str, Any]], T]) -> list[T]:
    """Every entry of FILE parsed, or InvalidInput naming the first bad entry (its position
    and id) and the field at fault."""
    out = []
    for n, data in enumerate(_read_json_objects(file)):
        try:
            out.append(parse(data))
        except InvalidInput as e:
            named = f", id {data['id']!r}" if isinstance(data.get("id"), str) else ""
            raise InvalidInput(
                f"{file}: entry {n + 1} (index {n}{named}): {e.message}", e.field
            ) from None
    return out


@click.group()
def acl() -> None:
    """Board ACLs."""


@acl.command("load", short_help="Load board ACLs from a JSON file.")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False))
@click.pass_context
@handle_errors
def acl_load(ctx: click.Context, file: str) -> None:
    """Load board ACLs ({board, workspace, name, members[], groups[]}) from FILE."""
    acls = _parsed(file, parse_acl)  # all valid, or nothing written
    searcher(ctx).backend.put_acls(acls)
    click.echo(f"loaded {plural(len(acls), 'board ACL')}", err=True)


@acl.command("list")
@click.option("--workspace", help="Only this workspace's boards.")
@json_option
@click.pass_context
@handle_errors
def acl_list(ctx: click.Context, workspace: str | None, as_json: bool) -> None:
    """List board ACLs: board, workspace, name, members, groups."""
    acls = [
        a for a in as_store(searcher(ctx).backend).list_acls() if workspace in (None, a.workspace)
    ]
    rows = [
        {
            "board": a.board,
            "workspace": a.workspace,
            "name": a.name,
            "members": list(a.members),
            "groups": list(a.groups),
        }
        for a in acls
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(
            f"{r['board']}  {r['workspace']}  {r['name'] or '-'}  members: "
            f"{', '.join(r['members']) or '-'}  groups: {', '.join(r['groups']) or '-'}"
        )
    click.echo(f"{plural(len(rows), 'board ACL')} in {store_name(ctx)}", err=True)


@click.group()
def principal() -> None:
    """Principals (people and agents)."""


@principal.command("load")
@click.argument("file", type=click.Path(allow_dash=True, dir_okay=False))
@click.pass_context
@handle_errors
def principal_load(ctx: click.Context, file: str) -> None:
    """Load principals ({id, workspace, kind, groups[]}) from FILE."""
    ps = _parsed(file, parse_principal)  # all valid, or nothing written
    searcher(ctx).backend.put_principals(ps)
    click.echo(f"loaded {plural(len(ps), 'principal')}", err=True)


@principal.command("list")
@click.option("--workspace", help="Only this workspace's principals.")
@json_option
@click.pass_context
@handle_errors
def principal_list(ctx: click.Context, workspace: str | None, as_json: bool) -> None:
    """List principals: id, workspace, kind, groups."""
    ps = [
        p
        for p in as_store(searcher(ctx).backend).list_principals()
        if workspace in (None, p.workspace)
    ]
    rows = [
        {"id": p.id, "workspace": p.workspace, "kind": p.kind, "groups": list(p.groups)} for p in ps
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(
            f"{r['id']}  {r['workspace']}  {r['kind']}  groups: {', '.join(r['groups']) or '-'}"
        )
    click.echo(f"{plural(len(rows), 'principal')} in {store_name(ctx)}", err=True)


@click.group()
def token() -> None:
    """API tokens (stored only as hashes)."""


@token.command("create", short_help="Create a token for PRINCIPAL (printed once).")
@click.argument("principal_arg", metavar="[PRINCIPAL]", required=False)
@click.option("--principal", "principal_id", help="Whose token (or give PRINCIPAL).")
@click.option("--admin", is_flag=True, help="May call ingestion and ACL routes.")
@click.pass_context
@handle_errors
def token_create(
    ctx: click.Context, principal_arg: str | None, principal_id: str | None, admin: bool
) -> None:
    """Create a token for PRINCIPAL; it is printed once and cannot be shown again."""
    if principal_arg and principal_id and principal_arg != principal_id:
        raise click.UsageError("give PRINCIPAL or --principal, not two different ones")
    who = principal_arg or principal_id
    if not who:
        raise click.UsageError("Missing PRINCIPAL (e.g. suli token create prn_ana)")
    click.echo(create_token(searcher(ctx).backend, who, admin))


@token.command("list", short_help="List stored tokens by hash.")
@click.option("--principal", "principal_id", help="Only this principal's tokens.")
@json_option
@click.pass_context
@handle_errors
def token_list(ctx: click.Context, principal_id: str | None, as_json: bool) -> None:
    """List stored tokens by hash (tokens themselves are never stored), owner and age."""
    ts = [
        t
        for t in as_store(searcher(ctx).backend).list_tokens()
        if principal_id in (None, t.principal_id)
    ]
    rows = [
        {"hash": t.hash, "principal": t.principal_id, "admin": t.admin, "created_at": t.created_at}
        for t in ts
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        admin = "  admin" if r["admin"] else ""
        click.echo(f"{r['hash']}  {r['principal']}  {r['created_at']}{admin}")
    click.echo(
        f"{plural(len(rows), 'token')} in {store_name(ctx)} (revoke: suli token revoke HASH)",
        err=True,
    )


@token.command("revoke")
@click.argument("token_or_hash")
@click.pass_context
@handle_errors
def token_revoke(ctx: click.Context, token_or_hash: str) -> None:
    """Revoke a token (give the token or its hash)."""
    revoke_token(searcher(ctx).backend, token_or_hash)
    click.echo("revoked", err=True)
