"""Operations: `suli reindex` (with --resume, --rollback, --dry-run), `suli status`, `suli indices`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import mappings
from cli.context import settings as get_settings
from cli.output import emit_json, handle_errors, json_option, plural
from cli.rejects import rejects_files
from cli.schemas import expected_model
from suli.errors import IndexingError, InvalidInput, NotFound
from suli.settings import Settings

if TYPE_CHECKING:
    from rich.progress import TaskID

    from suli.backends.opensearch import OpenSearchBackend


def _opensearch(ctx: click.Context, dimension: int = 0, model: str = "") -> OpenSearchBackend:
    settings = get_settings(ctx)
    if settings.backend != "opensearch":
        raise InvalidInput(
            "backend: this command needs the OpenSearch backend (set SULI_OPENSEARCH_URL)",
            "backend",
        )
    # Here, not at the top: `suli status` on the embedded store never imports the client.
    from suli.backends.opensearch import OpenSearchBackend

    backend = OpenSearchBackend(settings, dimension, model)
    ctx.call_on_close(backend.close)
    return backend


def rejects_dir(settings: Settings) -> Path:
    """Where `suli reindex` writes items the new index refused (and `suli status` looks)."""
    return settings.home / "rejects"


class _Bar:
    """One progress bar on stderr whose label follows the reindex phase; ETA while copying."""

    def __init__(self, enabled: bool) -> None:
        # rich only here: `suli status` and `suli indices` draw no bar.
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=not enabled,
        )
        self.task: TaskID | None = None
        self.phase = ""

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.task is None:
            self.task = self.progress.add_task(phase, total=total)
        if phase != self.phase:
            self.phase = phase
            self.progress.reset(self.task, description=phase, total=total)
        self.progress.update(self.task, completed=done, total=total)


@click.command("reindex", short_help="Build a new index, copy, swap the alias (or roll back).")
@click.option(
    "--shards", type=click.IntRange(min=1), help="Shards of the new index (default: settings)."
)
@click.option("--replicas", type=click.IntRange(min=0), help="Replicas of the new index.")
@click.option(
    "--re-embed", is_flag=True, help="Embed every item again even if the model is the same."
)
@click.option(
    "--method",
    type=click.Choice(["auto", "scan", "server"]),
    default="auto",
    show_default=True,
    help="scan: point in time + search_after (resumable, can re-embed); server: _reindex.",
)
@click.option("--resume", is_flag=True, help="Continue an interrupted reindex.")
@click.option(
    "--merge",
    is_flag=True,
    help="Force-merge the new index to one segment per shard before the swap (faster vector "
    "search; minutes at 100k+ items).",
)
@click.option("--rollback", is_flag=True, help="Point the alias back at the previous index.")
@click.option("--force", is_flag=True, help="With --rollback: even if recent writes cannot follow.")
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing.")
@json_option
@click.pass_context
@handle_errors
def reindex(
    ctx: click.Context,
    shards: int | None,
    replicas: int | None,
    re_embed: bool,
    method: str,
    resume: bool,
    merge: bool,
    rollback: bool,
    force: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Copy the live index into a new one (new mapping or model), verify it and swap the alias.

    On the embedded store: re-embed, in place, the items of another embedding model."""
    if resume and rollback:
        raise InvalidInput("rollback: cannot be combined with --resume", "rollback")
    if rollback and (shards or replicas is not None or re_embed or method != "auto" or merge):
        raise InvalidInput(
            "rollback: takes no --shards/--replicas/--re-embed/--method/--merge", "rollback"
        )
    if resume and (shards or replicas is not None):
        raise InvalidInput("resume: the interrupted run's shards and replicas are kept", "resume")
    if force and not rollback:
        raise InvalidInput("force: only applies to --rollback", "force")
    from indexer.reindex import Reindexer
    from suli.core import open_embedder

    settings = get_settings(ctx)
    embedder = open_embedder(settings)
    if settings.backend == "embedded" and not (rollback or resume or dry_run):
        _reembed_embedded(settings, embedder, re_embed, as_json)
        return
    backend = _opensearch(ctx, embedder.dimension, embedder.name)
    bar = _Bar(enabled=not dry_run)
    # The shared alias, then with SULI_ISOLATE_WORKSPACES each workspace's, one after another.
    targets = [backend, *(backend.workspace_views() if backend.isolated else [])]
    runs: list[tuple[dict[str, Any], Any]] = []
    for target in targets:
        engine = Reindexer(target, embedder, rejects_dir(settings), on_progress=bar)
        if rollback:
            try:
                rplan = engine.plan_rollback()
            except NotFound:
                if len(targets) > 1:
                    continue  # only some aliases were reindexed: roll back those
                raise
            if dry_run:
                runs.append(({"dry_run": True, "rollback": rplan.to_json()}, _rollback_lines))
                continue
            with bar.progress:
                report = engine.rollback(rplan, force=force)
            runs.append(({"rollback": rplan.to_json(), "report": report.to_json()}, _report_lines))
            continue
        try:
            plan = engine.plan(
                shards=shards,
                replicas=replicas,
                re_embed=re_embed,
                method=method,
                resume=resume,
                merge=merge,
            )
        except InvalidInput as e:
            if resume and len(targets) > 1 and "no interrupted" in e.message:
                continue  # resume the aliases that were interrupted
            raise
        if dry_run:
            runs.append(({"dry_run": True, "plan": plan.to_json()}, _plan_lines))
            continue
        if not as_json:
            for line in _plan_lines({"plan": plan.to_json()}):
                click.echo(line, err=True)
        with bar.progress:
            report = engine.run(plan)
        runs.append(({"plan": plan.to_json(), "report": report.to_json()}, _report_lines))
    if not rollback and not dry_run:
        backend.build_visibility()  # principals of before visibility documents get theirs
    if not runs:  # every alias skipped: none had a previous or an interrupted index
        raise (
            InvalidInput("resume: no interrupted reindex", "resume")
            if resume
            else NotFound("no alias records a previous index: nothing to roll back to")
        )
    if len(targets) == 1:
        body, lines = runs[0]
        _show(body, as_json, lines)
        return
    if as_json:
        emit_json({"aliases": [body for body, _ in runs]})
        return
    for body, lines in runs:
        _show(body, False, lines)


def _reembed_embedded(settings: Settings, embedder: Any, force: bool, as_json: bool) -> None:
    """`suli reindex` on the embedded store: re-embed, in place, every item whose vector is not
    the configured model's, then record that model. Run again after an interruption: the
    items done keep their new vectors."""
    if force:
        raise InvalidInput(
            "re-embed: the embedded store re-embeds the items of another model only", "re_embed"
        )
    from indexer.pipeline import index_items
    from suli.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(
        settings.sqlite_path, embedder.dimension, model=embedder.name, check_model=False
    )
    try:
        before = backend.stored_model
        items = list(backend.all_items())
        # An item's stored hash names the model its vector came from: only the others embed.
        summary = index_items(enumerate(items, start=1), backend, embedder)
        if summary.rejected:
            raise IndexingError(f"{len(summary.rejected)} items could not be re-embedded")
        backend.record_model()
    finally:
        backend.close()
    body = {
        "store": str(settings.sqlite_path),
        "model": {"before": before, "after": embedder.name},
        "items": len(items),
        "embedded": summary.embedded + summary.cached,
        "reused": summary.reused,
    }
    if as_json:
        emit_json(body)
        return
    click.echo(
        f"re-embedded {summary.embedded + summary.cached} of {len(items)} items in {settings.sqlite_path} "
        f"(model {before or '?'} -> {embedder.name}; {summary.reused} already were)"
    )


def _show(body: dict[str, Any], as_json: bool, lines: Any) -> None:
    if as_json:
        emit_json(body)
        return
    for line in lines(body):
        click.echo(line)


def _plan_lines(body: dict[str, Any]) -> list[str]:
    p = body["plan"]
    target = p["target"] or f"{p['alias']}-v{p['mapping_version']}-<timestamp>"
    return [
        f"{'resume' if p['target'] else 'reindex'} {p['alias']}: {p['source']} -> {target}",
        f"  mapping v{p['source_mapping_version']} -> v{p['mapping_version']}; "
        f"model {p['source_model'] or '?'} ({p['source_dimension']}) -> {p['model']} ({p['dimension']})",
        f"  {p['docs']} items; {p['shards']} shard(s), {p['replicas']} replica(s); "
        f"copy by {p['method']}, {'re-embedding' if p['re_embed'] else 'keeping vectors'} "
        f"({'; '.join(p['reasons'])})",
        f"  then: {'force-merge to 1 segment per shard, ' if p.get('merge') else ''}"
        "catch up writes made meanwhile, verify, swap the alias; the old index is kept",
    ]


def _rollback_lines(body: dict[str, Any]) -> list[str]:
    r = body["rollback"]
    return [
        f"rollback {r['alias']}: {r['current']} -> {r['previous']}",
        f"  {plural(r['written_since_swap'], 'item')} written since the swap; carried over by: "
        f"{r['mode']}",
    ]


def _report_lines(body: dict[str, Any]) -> list[str]:
    r = body["report"]
    v = r["verification"]
    lines = [
        f"{r['alias']} -> {r['target']} (was {r['source']}; kept for `suli reindex --rollback`)",
        f"  copied {r['copied']} items in {r['copy_seconds']:.1f} s ({r['items_per_s']} items/s), "
        f"{r['retries']} re-sent",
        f"  caught up {r['caught_up']} items in {r['passes']} pass(es), removed {r['deleted']}",
        f"  verified: {v.get('source_docs')} = {v.get('target_docs')} docs, "
        f"{v.get('sampled')} sampled items identical",
        f"  writes held {r['blocked_ms']:.0f} ms; alias swap {r['swap_ms']:.1f} ms; "
        "searches never paused",
    ]
    if r.get("merge_seconds") is not None:
        lines.insert(
            2, f"  merged to {r['segments']} segment(s) per shard in {r['merge_seconds']:.1f} s"
        )
    return lines + [f"  note: {n}" for n in r["notes"]]


@click.command("status", short_help="The store: health, nodes, alias, index, rejects.")
@click.option(
    "--rejects",
    "rejects",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Rejects files or folders to count (default: $SULI_HOME/rejects).",
)
@json_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, rejects: tuple[Path, ...], as_json: bool) -> None:
    """The store: on OpenSearch cluster health, nodes, the alias and its index; on the embedded
    store its file; then model, counts and pending rejects."""
    settings = get_settings(ctx)
    model, dimension = expected_model(settings)
    # Only the named paths and $SULI_HOME/rejects: never whatever the current directory holds.
    # In a folder only rejects files count (FILE.rejects.jsonl, reindex-*.jsonl), not inputs.
    paths = rejects_files(list(rejects) or [rejects_dir(settings)])
    if settings.backend != "opensearch":
        body = _embedded_status(settings, model, dimension, paths)
        emit_json(body) if as_json else _embedded_lines(body)
        return
    from indexer.inventory import status as cluster_status

    backend = _opensearch(ctx, dimension, model)
    body = cluster_status(
        backend.client,
        backend.alias,
        (mappings.mapping_version(), model, dimension),
        paths,
        hnsw=settings.hnsw,
    )
    if as_json:
        emit_json(body)
    else:
        _status_lines(body)
    if body["cluster"]["status"] == "red":
        sys.exit(1)


def _embedded_status(
    settings: Settings, model: str, dimension: int, rejects: list[Path]
) -> dict[str, Any]:
    """The embedded store's status; a missing store file is reported, not created."""
    from indexer.rejects import count_rejects  # not via indexer.inventory: opensearchpy
    from suli.backends.embedded import EmbeddedBackend

    path = settings.sqlite_path
    pending = count_rejects(rejects)
    body: dict[str, Any] = {
        "backend": "embedded",
        "path": str(path),
        "exists": path.is_file(),
        "model": model,
        "dimension": dimension,
        "rejects": {"files": pending, "total": sum(f["lines"] for f in pending)},
        "notes": [],
    }
    if not path.is_file():
        body["notes"].append(f"no store at {path}: run `suli index FILE` (or `suli demo`)")
        return body
    backend = EmbeddedBackend(path, dimension)
    try:
        body |= {
            "items": backend.count(),
            "principals": len(backend.list_principals()),
            "boards": len(backend.list_acls()),
            "tokens": len(backend.list_tokens()),
        }
    finally:
        backend.close()
    return body


def _embedded_lines(b: dict[str, Any]) -> None:
    click.echo(f"embedded store {b['path']}" + ("" if b["exists"] else " (missing)"))
    if b["exists"]:
        click.echo(
            f"  {b['items']} items, {b['principals']} principals, {b['boards']} board ACLs, "
            f"{b['tokens']} tokens; model {b['model']} ({b['dimension']} dims)"
        )
    r = b["rejects"]
    click.echo(f"pending rejects: {r['total']} line(s)")
    for f in r["files"]:
        click.echo(f"  {f['lines']:>6}  {f['path']}")
    for note in b["notes"]:
        click.echo(f"note: {note}")


def _status_lines(b: dict[str, Any]) -> None:
    c = b["cluster"]
    click.echo(
        f"cluster {c['name']}: {c['status']}, {c['nodes']} node(s), {c['active_shards']} shards "
        f"active, {c['unassigned_shards']} unassigned, {c['relocating_shards']} relocating"
    )
    for n in b["nodes"]:
        star = "*" if n["cluster_manager"] else " "
        click.echo(
            f"  {star} {n['name']:<10} {n['roles']:<6} heap {n['heap_percent']}%  "
            f"cpu {n['cpu_percent']}%  load {n['load_1m']}  disk {n['disk_used_percent']}%"
        )
    i = b["index"]
    if i:
        click.echo(
            f"alias {b['alias']} -> {i['name']} ({i['health']}, {i['docs']} items, {i['size']})"
        )
        click.echo(
            f"  mapping v{i['mapping_version']}, model {i['model'] or '?'} ({i['dimension']} dims), "
            f"{i['shards']} shard(s) x {i['replicas']} replica(s)"
            + (", WRITE-BLOCKED" if i["write_blocked"] else "")
        )
    else:
        click.echo(f"alias {b['alias']}: no index")
    others = [x["name"] for x in b["indices"] if not x["live"]]
    if others:
        click.echo(f"  older indices: {', '.join(others)} (`suli indices`)")
    if ws := b.get("workspaces"):
        items = sum(w["docs"] for w in ws)
        click.echo(f"workspace indices: {len(ws)} ({items} items; `suli status --json` lists them)")
    r = b["rejects"]
    click.echo(f"pending rejects: {r['total']} line(s)")
    for f in r["files"]:
        click.echo(f"  {f['lines']:>6}  {f['path']}")
    for note in b["notes"]:
        click.echo(f"note: {note}")


@click.group(
    "indices",
    invoke_without_command=True,
    short_help="Physical indices behind the alias; drop old ones.",
)
@json_option
@click.pass_context
@handle_errors
def indices(ctx: click.Context, as_json: bool) -> None:
    """Physical indices behind the alias (`suli indices drop NAME` removes an old one)."""
    if ctx.invoked_subcommand is None:
        _list(ctx, as_json)


@indices.command("list", short_help="The alias's physical indices: live, docs, mapping.")
@json_option
@click.pass_context
@handle_errors
def indices_list(ctx: click.Context, as_json: bool) -> None:
    """List the alias's physical indices: live one, docs, mapping version, model."""
    _list(ctx, as_json)


def _list(ctx: click.Context, as_json: bool) -> None:
    from indexer.inventory import physical_indices

    backend = _opensearch(ctx)
    rows = physical_indices(backend.client, backend.alias)
    if as_json:
        emit_json({"alias": backend.alias, "indices": [r.to_json() for r in rows]})
        return
    if not rows:
        click.echo(f"no physical indices behind {backend.alias}")
        return
    click.echo(
        f"  {'NAME':<42} {'DOCS':>8} {'MAP':>4} {'MODEL (DIM)':<28} {'SH/R':>5} HEALTH  STATE"
    )
    for r in rows:
        state = "live" if r.live else ("blocked" if r.write_blocked else "")
        if not r.live and r.reindex and r.reindex.get("phase") in ("copying", "copied", "failed"):
            state = f"reindex {r.reindex.get('phase')}"
        click.echo(
            f"{'*' if r.live else ' '} {r.name:<42} {r.docs:>8} {'v' + str(r.mapping_version):>4} "
            f"{f'{r.model or chr(63)} ({r.dimension})':<28} {f'{r.shards}/{r.replicas}':>5} "
            f"{r.health:<7} {state}"
        )


def _interactive() -> bool:
    """Whether a person can answer a prompt (a test swaps this for a yes)."""
    return sys.stdin.isatty()


@indices.command("drop", short_help="Delete an old physical index (never the live one).")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed without a TTY).")
@click.pass_context
@handle_errors
def indices_drop(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete an old physical index (never the live one); asks first unless --yes."""
    from indexer.inventory import drop

    backend = _opensearch(ctx)
    if not yes:
        if not _interactive():
            raise InvalidInput(
                f"yes: dropping {name} deletes its data; confirm with --yes (no terminal to ask)",
                "yes",
            )
        click.confirm(f"Drop index {name} and all its documents?", abort=True, err=True)
    drop(backend.client, backend.alias, name)
    click.echo(f"dropped {name}", err=True)
