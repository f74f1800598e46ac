"""The shape of a local cluster and the files and JVM flags each node is started with."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from devcluster import lines, security
from devcluster import plugins as extra_plugins
from devcluster.jdk import Jdk

_HEAP = re.compile(r"^[1-9][0-9]*[mMgG]$")

# Console only: the helper redirects stdout to <node>/logs/stdout.log. The header-warning
# appender turns deprecation logs into HTTP `Warning` headers, as the distribution does.
LOG4J2_PROPERTIES = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console

appender.header_warning.type = HeaderWarningAppender
appender.header_warning.name = header_warning
logger.deprecation.name = org.opensearch.deprecation
logger.deprecation.level = deprecation
logger.deprecation.appenderRef.header_warning.ref = header_warning
logger.deprecation.additivity = false
"""

# The distribution's SystemJvmOptions for 2.x; none is strictly needed, they keep the
# embedded node close to what `bin/opensearch` runs.
_SYSTEM_PROPS = [
    "-Dfile.encoding=UTF-8",
    "-Djava.awt.headless=true",
    "-Djna.nosys=true",
    "-Dio.netty.noUnsafe=true",
    "-Dio.netty.noKeySetOptimization=true",
    "-Dio.netty.recycler.maxCapacityPerThread=0",
    "-Dio.netty.allocator.numDirectArenas=0",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.disable.jmx=true",
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    # A node out of heap is useless to tests: die and show it rather than hang.
    "-XX:+ExitOnOutOfMemoryError",
]


def default_heap(nodes: int) -> str:
    """1g for one node; 768m each for three so they fit a small CI machine."""
    return "1g" if nodes == 1 else "768m"


@dataclass(frozen=True)
class ClusterSpec:
    """Node count, first ports, heap, extra plugins, OpenSearch version and security; node i
    uses http_port + i and transport_port + i. `plugins` names extra plugins
    (devcluster.plugins.KNOWN) beside k-NN; `version` one of devcluster.lines.LINES (a spec
    saved before there were two lines reads back as 2.19.1, the one it ran)."""

    nodes: int = 1
    http_port: int = 9200
    transport_port: int = 9300
    heap: str = "1g"
    cluster_name: str = "suli-dev"
    plugins: tuple[str, ...] = ()
    version: str = lines.DEFAULT_VERSION
    secure: bool = False  # the security plugin, TLS and users (devcluster.security)

    def __post_init__(self) -> None:
        # Sorted and unique: the same set is the same spec, whatever order it was asked in
        # (and a list read back from cluster.json becomes a tuple again). Secure implies the
        # security plugin, so its jars load on every start.
        # The plugin without its certificates and config would not start: asking for it is
        # asking for a secure node.
        object.__setattr__(self, "secure", self.secure or security.PLUGIN in self.plugins)
        wanted = set(self.plugins) | ({security.PLUGIN} if self.secure else set())
        object.__setattr__(self, "plugins", tuple(sorted(wanted)))
        if self.version not in lines.LINES:  # no fallback to a default: the spec says which
            known = ", ".join(lines.LINES)
            raise ValueError(f"unknown OpenSearch version {self.version!r}; known: {known}")
        extra_plugins.check(self.plugins, self.line)
        if self.nodes not in (1, 3):
            raise ValueError(f"nodes must be 1 or 3, not {self.nodes}")
        if not _HEAP.match(self.heap):
            raise ValueError(f"heap must look like 768m or 1g, not {self.heap!r}")
        for port in (self.http_port, self.transport_port):
            if not 1024 <= port <= 65535 - self.nodes:
                raise ValueError(f"port {port} is out of range")
        http = set(self.http_ports)
        if http & set(self.transport_ports):
            raise ValueError("http and transport port ranges overlap")

    @property
    def line(self) -> lines.Line:
        """The OpenSearch line the nodes run."""
        return lines.LINES[self.version]

    @property
    def names(self) -> list[str]:
        """Node names n1..nN."""
        return [f"n{i + 1}" for i in range(self.nodes)]

    @property
    def http_ports(self) -> list[int]:
        """HTTP port of each node."""
        return [self.http_port + i for i in range(self.nodes)]

    @property
    def transport_ports(self) -> list[int]:
        """Transport port of each node."""
        return [self.transport_port + i for i in range(self.nodes)]

    @property
    def urls(self) -> list[str]:
        """HTTP URL of each node (https when secure)."""
        scheme = "https" if self.secure else "http"
        return [f"{scheme}://127.0.0.1:{port}" for port in self.http_ports]

    def without_plugins(self) -> ClusterSpec:
        """The same nodes, ports and version with no extra plugin: what decides whether data
        is kept."""
        return replace(self, plugins=())

    def to_json(self) -> str:
        """Serialise for the state dir."""
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def load(cls, path: Path) -> ClusterSpec | None:
        """Read a saved spec; None when absent or unreadable."""
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def opensearch_yml(spec: ClusterSpec, i: int, extra: Mapping[str, object] | None = None) -> str:
    """config/opensearch.yml for node i (0-based); `extra` adds node settings (e.g. a tiny queue)."""
    lines = [
        f"cluster.name: {spec.cluster_name}",
        f"node.name: {spec.names[i]}",
        "network.host: 127.0.0.1",
        f"http.port: {spec.http_ports[i]}",
        f"transport.port: {spec.transport_ports[i]}",
        # Dev and CI disks are often nearly full; watermarks would block shard allocation.
        "cluster.routing.allocation.disk.threshold_enabled: false",
    ]
    if spec.nodes == 1:
        lines.append("discovery.type: single-node")
    else:
        seeds = ", ".join(f'"127.0.0.1:{p}"' for p in spec.transport_ports)
        lines += [
            "node.roles: [cluster_manager, data, ingest]",
            f"discovery.seed_hosts: [{seeds}]",
            f"cluster.initial_cluster_manager_nodes: [{', '.join(spec.names)}]",
        ]
    settings = {**(security.node_settings() if spec.secure else {}), **(extra or {})}
    lines += [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _jdk_flags(jdk: Jdk, line: lines.Line) -> list[str]:
    """Flags that depend on the Java and OpenSearch versions, as the distribution's launcher
    picks them."""
    # JDK 23 removed the COMPAT locale data; OpenSearch 2.x switches to CLDR there too, and
    # 3.x uses CLDR on every Java.
    cldr = jdk.feature >= 23 or line.major >= 3
    flags = [f"-Djava.locale.providers=SPI,{'CLDR' if cldr else 'COMPAT'}"]
    if jdk.feature >= 22:  # Lucene's madvise calls: allowed, without a warning per start
        flags.append("--enable-native-access=ALL-UNNAMED")
    return flags + jdk.jvm_flags()


def java_command(
    spec: ClusterSpec,
    home: Path,
    classpath: str,
    jdk: Jdk,
    plugin_dirs: Sequence[Path] = (),
) -> list[str]:
    """The full `java ... OsNode <home>` command line for one node on `jdk` (OsNode3 for 3.x).

    With extra plugins in the spec, their jar folders (`plugin_dirs`) go after the server's on
    the classpath and their classes join the launcher's default list in -Dosnode.plugins.
    """
    cmd = [jdk.java, f"-Xms{spec.heap}", f"-Xmx{spec.heap}"]
    if spec.nodes > 1:
        # Three JVMs on a 2-core machine: fewer GC threads means less CPU fighting.
        cmd += ["-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1"]
    cmd += _SYSTEM_PROPS + _jdk_flags(jdk, spec.line)
    if spec.plugins:
        cmd.append(f"-Dosnode.plugins={extra_plugins.plugin_classes(spec.plugins, spec.line)}")
        classpath = ":".join([classpath, *(f"{d}/*" for d in plugin_dirs)])
    main = spec.line.main_class
    cmd += [f"-Djava.io.tmpdir={home / 'tmp'}", "-cp", classpath, main, str(home)]
    return cmd
