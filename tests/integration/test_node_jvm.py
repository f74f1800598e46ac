"""The test node runs as production does: on Java >= 21 with Lucene's SIMD vector code on.

`suli cluster up` (CI) and tests/conftest.py start nodes through devcluster, which picks the
newest JDK installed; `GET _nodes/jvm,process` shows what each node really runs on, and a
node started on this machine also shows Lucene's own log line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from devcluster import jdk

ENABLED = "Java vector incubator API enabled"
VECTOR_FLAGS = "--add-modules=jdk.incubator.vector"


def _log_of_local_node(pid: int) -> str | None:
    """This start's log of a devcluster node running here (argv `... OsNode <home>`), else None."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "OsNode" not in argv or argv.index("OsNode") + 1 >= len(argv):
        return None  # not ours (another machine, a container, a pid of another namespace)
    log = Path(argv[argv.index("OsNode") + 1]) / "logs" / "stdout.log"
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return re.split(r"\n=== \S+ starting: ", text)[-1]  # the log appends one section per start


def test_nodes_run_lucene_vector_code_when_a_jdk_21_or_newer_is_installed(
    os_client: OpenSearch,
) -> None:
    chosen = jdk.choose()  # what devcluster picks on this machine, overrides included
    nodes: dict[str, Any] = os_client.nodes.info(metric="jvm,process")["nodes"]
    assert nodes
    for node in nodes.values():
        version, args = node["jvm"]["version"], node["jvm"]["input_arguments"]
        seen = f"{node['name']}: Java {version}, {args}"
        log = _log_of_local_node(int(node["process"]["id"]))
        if chosen.simd:
            assert jdk.feature_version(version) >= jdk.SIMD_MIN, seen
            assert VECTOR_FLAGS in args, seen
            if log is not None:
                assert ENABLED in log, seen
        else:  # Java 17 only: the node still runs, on that JDK, without the vector module
            assert jdk.feature_version(version) == chosen.feature, seen
            assert VECTOR_FLAGS not in args, seen
            if log is not None:
                assert ENABLED not in log, seen
