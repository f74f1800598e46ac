"""`suli cluster`: provision and run a local OpenSearch (2.19.1 or 3.5.0) + k-NN from Maven Central."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import click

import devcluster
from devcluster import jdk as jdks
from devcluster import lines
from devcluster import plugins as extra_plugins


class _EchoHandler(logging.Handler):
    """Progress lines to the current stderr (looked up per record, so CliRunner captures it)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def _progress_to_stderr() -> None:
    logger = logging.getLogger("devcluster")
    if not any(isinstance(h, _EchoHandler) for h in logger.handlers):
        logger.addHandler(_EchoHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _heap(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[1-9][0-9]*[mMgG]", value):
        raise click.BadParameter("use a JVM size such as 768m or 1g")
    return value


def _java(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and jdks.read_jdk(jdks.override_home(value)) is None:
        raise click.BadParameter(f"{value} is not a JDK home or its bin/java")
    return value


class _Failure(click.ClickException):
    """A cluster error: message on stderr, exit code 1."""

    exit_code = 1


@click.group(short_help="Run a local OpenSearch (1 or 3 nodes).")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SULI_CLUSTER_DIR",
    help="Node homes, pids and logs [env SULI_CLUSTER_DIR; default ~/.cache/suli/cluster].",
)
@click.pass_context
def cluster(ctx: click.Context, state_dir: Path | None) -> None:
    """Run a local OpenSearch (one JVM per node, jars from Maven Central, cached).

    Two lines: 2.19.1 (default; Java 17 or newer) and 3.5.0 (`up --version 3.5.0`; Java 21 or
    newer). Needs Maven; nodes run on the newest JDK installed (>= 21 gives Lucene's SIMD
    vector code) unless --java, SULI_JAVA_HOME or JAVA_HOME names one. Artifacts are cached
    in ~/.cache/suli/opensearch-<version> (env SULI_CLUSTER_CACHE). Without `up --secure` the
    node has no security plugin: for local use only.
    """
    _progress_to_stderr()
    ctx.obj = state_dir


@cluster.command(short_help="Provision, start the nodes, wait until ready.")
@click.option("--nodes", type=click.Choice(["1", "3"]), default="1", show_default=True)
@click.option(
    "--http-port",
    type=click.IntRange(1024, 65000),
    default=9200,
    show_default=True,
    help="HTTP port of the first node; node i uses this + i.",
)
@click.option(
    "--transport-port",
    type=click.IntRange(1024, 65000),
    default=None,
    help="Transport port of the first node [default: http port + 100].",
)
@click.option("--heap", callback=_heap, help="JVM heap per node [default: 1g, 768m for 3 nodes].")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=devcluster.DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for the cluster to become ready.",
)
@click.option(
    "--java",
    callback=_java,
    help="JDK home (or its bin/java) for the nodes [default: $SULI_JAVA_HOME, $JAVA_HOME, "
    "else the newest JDK installed].",
)
@click.option(
    "--version",
    "version",
    type=click.Choice(list(lines.LINES)),
    envvar=lines.VERSION_ENV,
    default=lines.DEFAULT_VERSION,
    show_default=True,
    help="OpenSearch line to run [env SULI_CLUSTER_VERSION]; 3.x needs Java >= 21.",
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    type=click.Choice(sorted(extra_plugins.KNOWN)),
    help="Extra plugin to load beside k-NN (repeatable; fetched from Maven Central once; "
    "neural-search exists for 2.19.1 only).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="TLS on HTTP and transport, users and roles: the opensearch-security plugin "
    "(2.19.1 only); prints the https URL, CA file and admin credentials.",
)
@click.option(
    "--wipe",
    is_flag=True,
    help="Delete the data of another cluster's stopped nodes in the state dir (without it, "
    "`up` refuses to start over them and names the shape that starts them).",
)
@click.pass_obj
def up(
    state_dir: Path | None,
    nodes: str,
    http_port: int,
    transport_port: int | None,
    heap: str | None,
    timeout: float,
    java: str | None,
    version: str,
    plugins: tuple[str, ...],
    secure: bool,
    wipe: bool,
) -> None:
    """Provision (first time only), start the nodes and wait until they are ready.

    Prints an `export SULI_OPENSEARCH_URL=...` line (all node URLs) on stdout, so
    `eval "$(suli cluster up)"` points Suli at the node (with --secure also the CA file, user
    and password lines).
    """
    if secure and "security" not in lines.get(version).extra_plugins:
        raise click.UsageError(
            f"--secure needs OpenSearch 2.19.1: Maven Central refuses the opensearch-security "
            f"zip for {version}, so a secured {version} node cannot be built here",
        )
    try:
        started = devcluster.up(
            nodes=int(nodes),
            http_port=http_port,
            transport_port=transport_port,
            heap=heap,
            timeout=timeout,
            state=state_dir,
            java=java,
            plugins=plugins,
            version=version,
            secure=secure,
            wipe=wipe,
        )
    except devcluster.ClusterError as err:
        raise _Failure(str(err)) from err
    except ValueError as err:  # a shape ClusterSpec rejects, e.g. overlapping port ranges
        raise click.UsageError(str(err)) from err
    click.echo(f"nodes: {' '.join(started.urls)}", err=True)
    click.echo(f"logs:  {started.root / 'nodes'}/*/logs/stdout.log", err=True)
    # Suli takes comma-separated hosts: the client then survives losing one node.
    click.echo(f"export SULI_OPENSEARCH_URL={','.join(started.urls)}")
    if started.spec.secure:
        _echo_secure(started)


def _echo_secure(started: devcluster.Cluster) -> None:
    """The CA file and credentials of a secured cluster, as export lines for `eval`."""
    from devcluster import security

    made = security.material(started.root)
    cert, key = made.cert("client")
    click.echo(f"export SULI_OPENSEARCH_CA_CERTS={made.ca}")
    click.echo(f"export SULI_OPENSEARCH_USER={security.ADMIN_USER}")
    click.echo(f"export SULI_OPENSEARCH_PASSWORD={made.admin_password}")
    click.echo(
        f"# admin certificate (securityadmin): {' '.join(map(str, made.cert('admin')))}\n"
        f"# or, instead of a password, the certificate of user {security.CLIENT_CERT_USER}:\n"
        f"#   export SULI_OPENSEARCH_CLIENT_CERT={cert} SULI_OPENSEARCH_CLIENT_KEY={key}\n"
        "# least-privilege roles: suli security roles --apply (docs/operations.md)"
    )


def _version(report: dict[str, Any]) -> str:
    """What a node reports; the saved spec's version when no node answers (or they differ)."""
    live, asked = report["version"], report.get("cluster_version")
    if live is None:
        return f"{asked} (not running)" if asked else "-"
    return live if asked in (None, live) else f"{live} (spec says {asked})"


def _human_status(report: dict[str, Any]) -> str:
    health = report["health"] or {}
    lines = [
        f"state dir: {report['state_dir']}",
        f"cluster:   {health.get('cluster_name', '-')}  "
        f"health {health.get('status', 'unreachable')}  "
        f"nodes {health.get('number_of_nodes', 0)}  "
        f"OpenSearch {_version(report)}",
    ]
    for node in report["nodes"]:
        state = f"running pid {node['pid']}" if node["running"] else "stopped"
        lines.append(f"  {node['name']}  {node['url']}  {state}  log {node['log']}")
    java = report.get("java")
    if java:
        simd = "SIMD vector code on" if java["simd"] else "no SIMD (Java < 21)"
        lines.append(f"java:      {java['version']} at {java['home']} ({simd})")
    if report["plugins"]:
        lines.append("plugins:   " + ", ".join(p.rsplit(".", 1)[-1] for p in report["plugins"]))
    if report["url"]:
        lines.append(f"export SULI_OPENSEARCH_URL={report['url']}")
    return "\n".join(lines)


@cluster.command(short_help="Nodes, health, version, plugins (exit 1: none up).")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON on stdout.")
@click.pass_obj
def status(state_dir: Path | None, as_json: bool) -> None:
    """Show nodes, health, version and plugins; exit 1 when no node answers."""
    report = devcluster.status(state_dir)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    elif report["nodes"]:
        click.echo(_human_status(report))
    else:
        click.echo(f"no cluster in {report['state_dir']}", err=True)
    if report["health"] is None:
        sys.exit(1)


@cluster.command()
@click.option("--wipe", is_flag=True, help="Also delete the nodes' data.")
@click.pass_obj
def down(state_dir: Path | None, wipe: bool) -> None:
    """Stop every node (TERM, then KILL after a grace period)."""
    try:
        stopped = devcluster.down(state_dir, wipe=wipe)
    except (devcluster.ClusterError, OSError) as err:
        raise _Failure(str(err)) from err
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "no node was running", err=True)


@cluster.command()
@click.option("--node", type=click.IntRange(min=1), help="Node number (1 = n1); default all.")
@click.option("--tail", "lines", type=click.IntRange(min=1), help="Only the last N lines.")
@click.pass_obj
def logs(state_dir: Path | None, node: int | None, lines: int | None) -> None:
    """Print the nodes' logs (stdout and stderr of each JVM)."""
    found = devcluster.load(state_dir)
    if found is None:
        raise _Failure(f"no cluster in {devcluster.state_dir(state_dir)}")
    if node is not None and node > found.spec.nodes:
        raise click.BadParameter(f"the cluster has {found.spec.nodes} node(s)", param_hint="--node")
    for i in [node - 1] if node else range(found.spec.nodes):
        path = found.log_path(i)
        if node is None:
            click.echo(f"==> {path} <==")
        if lines:
            click.echo(devcluster.tail(path, lines), nl=False)
        elif path.exists():
            with path.open(errors="replace") as handle:
                for line in handle:
                    click.echo(line, nl=False)
        else:
            click.echo(f"(no log yet at {path})", err=True)


@cluster.command("upgrade-node", short_help="One step of a rolling upgrade.")
@click.argument("node", type=click.IntRange(min=1))
@click.option(
    "--version",
    "version",
    type=click.Choice(list(lines.LINES)),
    required=True,
    help="OpenSearch version the node moves to (its data is kept; no downgrade).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=devcluster.DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each phase (node gone, node back, green).",
)
@click.pass_obj
def upgrade_node(state_dir: Path | None, node: int, version: str, timeout: float) -> None:
    """One step of a rolling upgrade: node NODE (1 = n1) restarts on --version with its data.

    Replica allocation is limited to primaries, the cluster flushed, the node stopped and
    started on the new version, allocation re-enabled, and the command waits for green. Run
    it for each node in turn (the elected cluster manager last); the others serve meanwhile.
    """
    found = devcluster.load(state_dir)
    if found is None:
        raise _Failure(f"no cluster in {devcluster.state_dir(state_dir)}")
    if node > found.spec.nodes:
        raise click.BadParameter(f"the cluster has {found.spec.nodes} node(s)", param_hint="NODE")
    try:
        health = devcluster.upgrade_node(node - 1, version, state_dir, timeout)
    except devcluster.ClusterError as err:
        raise _Failure(str(err)) from err
    click.echo(f"n{node} runs OpenSearch {version}; cluster {health.get('status')}", err=True)
