"""Run a local 1- or 3-node OpenSearch: one JVM per node, homes and pids in a state dir."""

from __future__ import annotations

import contextlib
import logging
import shlex
import shutil
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devcluster import lines, process, security
from devcluster import plugins as extra_plugins
from devcluster.errors import ClusterError, PortInUseError, ProvisionError, StartupError
from devcluster.http import describe_listener, get_json, port_free
from devcluster.jdk import Jdk, choose, read_jdk
from devcluster.paths import state_dir
from devcluster.provision import Layout, provision
from devcluster.spec import (
    LOG4J2_PROPERTIES,
    ClusterSpec,
    default_heap,
    java_command,
    opensearch_yml,
)

log = logging.getLogger("devcluster")

SPEC_FILE = "cluster.json"
JDK_FILE = "jdk"  # home of the JDK `up` chose: a node started again later runs on the same one
# In a node home: the version that node was upgraded to, while the others still run the spec's
# (a rolling upgrade, devcluster.upgrade). A node's data cannot go back to an older version.
NODE_VERSION_FILE = "version"
DEFAULT_TIMEOUT = 180.0


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a text file ('' when it does not exist)."""
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except OSError:
        return ""


@dataclass(frozen=True)
class Cluster:
    """A local cluster described by the spec saved in its state dir."""

    root: Path
    spec: ClusterSpec

    @property
    def urls(self) -> list[str]:
        """HTTP URL of each node, index i = node n{i+1}."""
        return self.spec.urls

    @property
    def url(self) -> str:
        """URL of the first node."""
        return self.urls[0]

    def home(self, i: int) -> Path:
        """Home directory of node i (0-based)."""
        return self.root / "nodes" / self.spec.names[i]

    def log_path(self, i: int) -> Path:
        """stdout/stderr log of node i."""
        return self.home(i) / "logs" / "stdout.log"

    def pid(self, i: int) -> int | None:
        """Pid of node i if that JVM is running; a stale pid file is removed."""
        pid_file = self.home(i) / "pid"
        pid = process.read_pid(pid_file)
        if pid is None:
            return None
        if process.is_node(pid, self.home(i)):
            return pid
        pid_file.unlink(missing_ok=True)
        return None

    def jdk(self) -> Jdk:
        """The JDK `up` chose for this cluster; chosen afresh when that one is gone."""
        try:
            saved = read_jdk(Path((self.root / JDK_FILE).read_text().strip()))
        except OSError:
            saved = None
        line = self.spec.line
        return saved or choose(minimum=line.java_min, needed_by=f"OpenSearch {line.version}")

    def node_version(self, i: int) -> str:
        """The OpenSearch version node i runs: the spec's, unless a rolling upgrade moved it."""
        try:
            return (self.home(i) / NODE_VERSION_FILE).read_text().strip() or self.spec.version
        except OSError:
            return self.spec.version

    def get_json(self, url: str, timeout: float = 5.0) -> tuple[int, Any]:
        """GET from a node; on a secure cluster over TLS trusting its CA, as the admin user."""
        if not self.spec.secure:
            return get_json(url, timeout=timeout)
        made = security.material(self.root)
        return get_json(url, timeout, security.admin_headers(made), security.ssl_context(made))

    def running(self) -> list[int]:
        """Indices of the nodes whose JVM is running."""
        return [i for i in range(self.spec.nodes) if self.pid(i) is not None]

    def start(
        self, i: int, layout: Layout | None = None, extra: Mapping[str, object] | None = None
    ) -> int:
        """Start node i's JVM (no wait); returns its pid. A no-op when it already runs.

        `extra` adds static node settings for this start only (the next start drops them).
        """
        pid = self.pid(i)
        if pid is not None:
            return pid
        if self.node_version(i) != self.spec.version:  # upgraded ahead of the others
            ahead = replace(self, spec=replace(self.spec, version=self.node_version(i)))
            return ahead.start(i, None, extra)
        for port in (self.spec.http_ports[i], self.spec.transport_ports[i]):
            _require_free(port)
        layout = layout or provision(version=self.spec.version, jdk=self.jdk())
        home = self.home(i)
        for sub in ("config", "data", "logs", "tmp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        (home / "config" / "opensearch.yml").write_text(opensearch_yml(self.spec, i, extra))
        (home / "config" / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        if self.spec.secure:
            security.install(self.root, home)
        plugin_dirs = [
            # cached after the first fetch
            extra_plugins.fetch(name, layout.root, layout.lib, layout.knn, line=self.spec.line)
            for name in self.spec.plugins
        ]
        cmd = java_command(self.spec, home, layout.classpath, self.jdk(), plugin_dirs)
        pid = process.spawn(cmd, home, self.log_path(i))
        (home / "pid").write_text(f"{pid}\n")
        log.info("started %s (pid %s) on %s", self.spec.names[i], pid, self.urls[i])
        return pid

    def kill(self, i: int) -> None:
        """SIGKILL node i, as a crash would."""
        pid = self.pid(i)
        if pid is not None:
            process.kill(pid)
            log.info("killed %s (pid %s)", self.spec.names[i], pid)
        (self.home(i) / "pid").unlink(missing_ok=True)

    def stop(self, i: int) -> None:
        """Stop node i cleanly (TERM, then KILL after a grace period)."""
        pid = self.pid(i)
        if pid is not None:
            process.stop(pid)
            log.info("stopped %s (pid %s)", self.spec.names[i], pid)
        (self.home(i) / "pid").unlink(missing_ok=True)

    def down(self) -> list[str]:
        """Stop every node; returns the names of the nodes that were running."""
        names = [self.spec.names[i] for i in self.running()]
        for i in range(self.spec.nodes):
            self.stop(i)
        for pid in process.find_nodes(self.root / "nodes"):  # pid file lost or garbled
            process.stop(pid)
            log.info("stopped untracked node process %s", pid)
        return names

    def wait_ready(
        self, status: str | None = None, nodes: int | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """Poll _cluster/health until `nodes` nodes and `status` are reached; returns the health.

        Defaults: all nodes; yellow for one node (replicas cannot be placed), green for three.
        Raises StartupError naming a node log, with its tail, when a node dies or time runs out.
        """
        status = status or ("yellow" if self.spec.nodes == 1 else "green")
        nodes = nodes or self.spec.nodes
        query = f"_cluster/health?wait_for_nodes={nodes}&wait_for_status={status}&timeout=2s"
        watched = self.running()
        if not watched:
            raise StartupError(f"no node of {self.root} is running", self.log_path(0))
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            for i in watched:
                if self.pid(i) is None:
                    raise self._startup_error(i, f"{self.spec.names[i]} exited while starting")
            for i in watched:
                try:
                    code, body = self.get_json(f"{self.urls[i]}/{query}", timeout=10.0)
                except (OSError, ValueError) as err:
                    last = f"{self.urls[i]}: {err}"
                    continue
                if code == 200 and isinstance(body, dict) and not body.get("timed_out"):
                    # The health can be green on one node before another's HTTP port is
                    # bound (a client of node 1 then failed with "connection refused" right
                    # after `up` returned): ready when every node answers too.
                    silent = self._silent(watched)
                    if not silent:
                        return body
                    last = f"{silent} not answering HTTP yet"
                    break
                if isinstance(body, dict) and "status" in body:
                    last = f"{body['status']} with {body.get('number_of_nodes')} node(s)"
                else:
                    last = f"HTTP {code}"
                break
            time.sleep(1.0)
        raise self._startup_error(
            watched[0], f"cluster not {status} with {nodes} node(s) after {timeout:.0f} s ({last})"
        )

    def _silent(self, nodes: list[int]) -> str | None:
        """The URL of the first of `nodes` whose HTTP port does not answer, or None."""
        for i in nodes:
            try:
                self.get_json(f"{self.urls[i]}/", timeout=10.0)
            except (OSError, ValueError):
                return self.urls[i]
        return None

    def wait_green(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Wait for all nodes and green."""
        return self.wait_ready("green", self.spec.nodes, timeout)

    def _startup_error(self, i: int, reason: str) -> StartupError:
        path = self.log_path(i)
        return StartupError(f"{reason}; log: {path}\n--- tail of {path} ---\n{tail(path)}", path)


def _require_free(port: int) -> None:
    if not port_free(port):
        raise PortInUseError(
            f"port {port} is already in use by {describe_listener(port)}, which this state dir "
            "does not manage; stop it or pick other ports (--http-port)"
        )


def load(state: str | Path | None = None) -> Cluster | None:
    """The cluster saved in a state dir, or None when there is none."""
    root = state_dir(state)
    spec = ClusterSpec.load(root / SPEC_FILE)
    return Cluster(root, spec) if spec else None


def _wipe(root: Path) -> None:
    shutil.rmtree(root / "nodes", ignore_errors=True)
    (root / SPEC_FILE).unlink(missing_ok=True)
    (root / JDK_FILE).unlink(missing_ok=True)


def _holds_data(root: Path) -> bool:
    """True when any node of the state dir has written data (an index, the cluster state)."""
    return any(p.is_dir() and any(p.iterdir()) for p in (root / "nodes").glob("*/data"))


def _other_shape(root: Path, old: ClusterSpec) -> str:
    """The refusal of `up` over another cluster's data: what it is and the two ways on."""
    start = f"suli cluster --state-dir {root} up --nodes {old.nodes} --http-port {old.http_port}"
    if old.transport_port != old.http_port + 100:
        start += f" --transport-port {old.transport_port}"
    start += f" --heap {old.heap} --version {old.version}"
    start += "".join(f" --plugin {p}" for p in old.plugins) + (" --secure" if old.secure else "")
    return (
        f"{root} holds the data of another cluster (OpenSearch {old.version}, {old.nodes} "
        f"node(s) from port {old.http_port}, heap {old.heap}), which this shape would wipe. "
        f"Start it as it was: `{start}`; or delete its data: `up --wipe` "
        f"(or `suli cluster --state-dir {root} down --wipe`)"
    )


def up(
    nodes: int = 1,
    http_port: int = 9200,
    transport_port: int | None = None,
    heap: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    state: str | Path | None = None,
    cache: str | Path | None = None,
    java: str | None = None,
    plugins: Sequence[str] = (),
    version: str | None = None,
    secure: bool = False,
    wipe: bool = False,
) -> Cluster:
    """Provision if needed, start the nodes and wait until the cluster is ready.

    `version` is the OpenSearch line (devcluster.lines: "2.19.1", the default, or "3.5.0"),
    else $SULI_CLUSTER_VERSION; it is saved in the spec, and each line has its own cache.

    `plugins` names extra plugins to load beside k-NN (devcluster.plugins.KNOWN, e.g.
    "neural-search"): fetched from Maven Central into the artifact cache once, and saved in
    the cluster's spec so a node started again later loads them too.

    The nodes run on `java` (a JDK home or its bin/java), else $SULI_JAVA_HOME, else
    $JAVA_HOME, else the newest JDK installed (see devcluster.jdk): >= 21 turns on Lucene's
    SIMD vector code, 17 runs 2.19 without it and says so; 3.x needs >= 21 and refuses less.

    Transport ports default to http_port + 100. Starting the same cluster again is a no-op;
    a different shape or plugin set in the same state dir must be brought down first. Data is
    kept between runs of the same shape; a changed plugin set alone keeps it too. Where the
    stopped nodes of another shape (nodes, ports, heap, version) hold data, `up` refuses and
    names the shape that starts them, unless `wipe` says to delete that data.

    `secure` runs the security plugin (2.19.1 only): TLS on HTTP and transport, an `admin`
    user and certificates made in <state>/security (devcluster.security); the URLs are https.
    """
    line = lines.get(version)
    spec = ClusterSpec(
        version=line.version,
        nodes=nodes,
        http_port=http_port,
        transport_port=transport_port if transport_port is not None else http_port + 100,
        heap=heap or default_heap(nodes),
        plugins=tuple(plugins),
        secure=secure,
    )
    root = state_dir(state)
    jdk = choose(java, minimum=line.java_min, needed_by=f"OpenSearch {line.version}")
    # First, before any port check or download: an operator on Java 17 must see it.
    (log.info if jdk.simd else log.warning)("%s", jdk.describe())
    existing = load(root)
    if existing and existing.running():
        if existing.spec != spec:
            old = existing.spec
            plugs = ", ".join(old.plugins) or "no extra plugin"
            raise ClusterError(
                f"{root} already runs a different cluster (OpenSearch {old.version}, "
                f"{old.nodes} node(s) from port {old.http_port}, {plugs}); run "
                f"`suli cluster --state-dir {shlex.quote(str(root))} down` first"
            )
        log.info("already running: %s", ", ".join(existing.urls))
        if existing.jdk().home != jdk.home:
            log.warning(
                "nodes keep running on %s; `suli cluster --state-dir %s down` first to move "
                "them to %s", existing.jdk().home, shlex.quote(str(root)), jdk.home,
            )  # fmt: skip
        for i in range(spec.nodes):  # bring back a node that was killed or crashed
            existing.start(i)
        existing.wait_ready(timeout=timeout)
        return existing
    if existing and existing.spec.without_plugins() != spec.without_plugins():
        if not wipe and _holds_data(root):
            raise ClusterError(_other_shape(root, existing.spec))
        log.info("cluster shape changed: wiping old node data in %s", root)
        _wipe(root)
    for port in spec.http_ports + spec.transport_ports:
        _require_free(port)
    layout = provision(cache, line.version, jdk)
    root.mkdir(parents=True, exist_ok=True)
    (root / SPEC_FILE).write_text(spec.to_json())
    (root / JDK_FILE).write_text(f"{jdk.home}\n")
    cluster = Cluster(root, spec)
    started = time.monotonic()
    try:
        # All nodes at once: a 3-node cluster needs a quorum of cluster managers to form.
        for i in range(spec.nodes):
            cluster.start(i, layout)
        health = cluster.wait_ready(timeout=timeout)
    except BaseException:
        cluster.down()
        raise
    log.info(
        "cluster %s (OpenSearch %s) is %s with %s node(s) after %.1f s on Java %s",
        health.get("cluster_name"), line.version, health.get("status"),
        health.get("number_of_nodes"), time.monotonic() - started, jdk.version,
    )  # fmt: skip
    return cluster


def down(state: str | Path | None = None, wipe: bool = False) -> list[str]:
    """Stop every node of the state dir (TERM, then KILL); optionally delete their data."""
    cluster = load(state)
    stopped = cluster.down() if cluster else []
    if wipe:
        _wipe(state_dir(state))
    return stopped


def _require(state: str | Path | None) -> Cluster:
    cluster = load(state)
    if cluster is None:
        raise ClusterError(f"no cluster in {state_dir(state)}; run `suli cluster up` first")
    return cluster


def kill_node(i: int, state: str | Path | None = None) -> None:
    """SIGKILL node i (0-based) of the cluster in the state dir."""
    _require(state).kill(i)


def start_node(i: int, state: str | Path | None = None, wait: bool = True) -> None:
    """Start node i (0-based) again and, by default, wait until all nodes are back and ready."""
    cluster = _require(state)
    cluster.start(i)
    if wait:
        cluster.wait_ready()


def status(state: str | Path | None = None) -> dict[str, Any]:
    """Nodes, pids, health, version and plugins of the cluster in the state dir.

    `cluster_version` is the version saved in the spec (what `up` was asked for), `version`
    the one a running node reports."""
    root = state_dir(state)
    cluster = load(root)
    report: dict[str, Any] = {
        "state_dir": str(root),
        "running": False,
        "url": None,
        "nodes": [],
        "health": None,
        "version": None,
        "cluster_version": None,
        "plugins": [],
        "java": None,
    }
    if cluster is None:
        return report
    report["cluster_version"] = cluster.spec.version
    with contextlib.suppress(ProvisionError):  # no JDK at all: status still reports the rest
        jdk = cluster.jdk()
        report["java"] = {"home": str(jdk.home), "version": jdk.version, "simd": jdk.simd}
    for i, name in enumerate(cluster.spec.names):
        pid = cluster.pid(i)
        report["nodes"].append(
            {
                "name": name,
                "pid": pid,
                "running": pid is not None,
                "url": cluster.urls[i],
                "transport_port": cluster.spec.transport_ports[i],
                "log": str(cluster.log_path(i)),
            }
        )
    live = [n["url"] for n in report["nodes"] if n["running"]]
    report["running"] = bool(live)
    for url in live:
        try:
            _, health = cluster.get_json(f"{url}/_cluster/health")
            _, info = cluster.get_json(f"{url}/")
            _, plugins = cluster.get_json(f"{url}/_cat/plugins?format=json")
        except (OSError, ValueError):
            continue
        report["url"] = url
        report["health"] = health
        report["version"] = info.get("version", {}).get("number") if info else None
        report["plugins"] = sorted({p["component"] for p in plugins or []})
        break
    return report
