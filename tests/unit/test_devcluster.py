"""The local cluster helper's pure parts: config rendering, spec checks, port refusal, pid files.

No JVM is started: ports are taken by plain sockets or a tiny HTTP server, "nodes" are shell
processes whose command line looks like an OsNode's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

import devcluster
from devcluster import process
from devcluster.cluster import Cluster
from devcluster.http import describe_listener, port_free
from devcluster.spec import ClusterSpec, java_command, opensearch_yml

pytestmark = pytest.mark.unit


def _yml(text: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in text.strip().splitlines())


def test_single_node_config() -> None:
    spec = ClusterSpec(nodes=1, http_port=9400, transport_port=9500)
    conf = _yml(opensearch_yml(spec, 0))
    assert conf["http.port"] == "9400" and conf["transport.port"] == "9500"
    assert conf["discovery.type"] == "single-node"
    assert conf["network.host"] == "127.0.0.1"
    assert "discovery.seed_hosts" not in conf


def test_three_node_config_names_every_peer() -> None:
    spec = ClusterSpec(nodes=3, http_port=9400, transport_port=9500, heap="768m")
    conf = _yml(opensearch_yml(spec, 1))
    assert (conf["node.name"], conf["http.port"], conf["transport.port"]) == ("n2", "9401", "9501")
    assert conf["discovery.seed_hosts"] == '["127.0.0.1:9500", "127.0.0.1:9501", "127.0.0.1:9502"]'
    assert conf["cluster.initial_cluster_manager_nodes"] == "[n1, n2, n3]"
    assert "discovery.type" not in conf


def test_extra_settings_are_rendered_as_yaml_scalars() -> None:
    spec = ClusterSpec(nodes=3, http_port=9400, transport_port=9500)
    extra = {"thread_pool.write.queue_size": 1, "node.attr.zone": "b", "x.enabled": True}
    conf = _yml(opensearch_yml(spec, 2, extra))
    assert conf["thread_pool.write.queue_size"] == "1"
    assert conf["node.attr.zone"] == '"b"'
    assert conf["x.enabled"] == "true"
    assert "thread_pool.write.queue_size" not in opensearch_yml(spec, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 2}, "nodes must be 1 or 3"),
        ({"heap": "lots"}, "heap must look like"),
        ({"http_port": 80}, "out of range"),
        ({"nodes": 3, "http_port": 9200, "transport_port": 9201}, "overlap"),
    ],
)
def test_bad_specs_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterSpec(**kwargs)  # type: ignore[arg-type]


def test_spec_round_trips_and_garbled_files_read_as_none(tmp_path: Path) -> None:
    spec = ClusterSpec(nodes=3, http_port=9400, transport_port=9500, heap="768m")
    path = tmp_path / "cluster.json"
    path.write_text(spec.to_json())
    assert ClusterSpec.load(path) == spec
    path.write_text("{not json")
    assert ClusterSpec.load(path) is None
    path.write_text(json.dumps({"nodes": 7}))
    assert ClusterSpec.load(path) is None
    assert ClusterSpec.load(tmp_path / "missing.json") is None


def test_java_command_sizes_heap_and_gc_threads(tmp_path: Path) -> None:
    one = java_command(ClusterSpec(heap="1g"), tmp_path, "cp", "java")
    three = java_command(ClusterSpec(nodes=3, heap="768m"), tmp_path, "cp", "java")
    assert one[:3] == ["java", "-Xms1g", "-Xmx1g"]
    assert "-XX:ParallelGCThreads=1" not in one and "-XX:ParallelGCThreads=1" in three
    assert three[-3:] == ["cp", "OsNode", str(tmp_path)]


@pytest.fixture
def listener() -> Iterator[int]:
    """A port held by a plain TCP listener that speaks no HTTP."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_taken_port_is_refused_before_anything_starts(listener: int, tmp_path: Path) -> None:
    assert not port_free(listener)
    with pytest.raises(devcluster.PortInUseError, match=f"port {listener}.*does not speak"):
        devcluster.up(nodes=1, http_port=listener, transport_port=listener + 1, state=tmp_path)
    assert not (tmp_path / "nodes").exists()  # nothing was provisioned or started


class _FakeOpenSearch(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(
            {"cluster_name": "other", "name": "n9", "version": {"number": "2.19.1"}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


def test_refusal_names_the_opensearch_that_answers_there() -> None:
    server = HTTPServer(("127.0.0.1", 0), _FakeOpenSearch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = int(server.server_address[1])
        assert describe_listener(port) == "OpenSearch 2.19.1 (cluster 'other', node 'n9')"
    finally:
        server.shutdown()
        server.server_close()


def _cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path, ClusterSpec(nodes=3, http_port=9400, transport_port=9500))


def test_a_pid_file_of_a_dead_process_is_stale(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    done = subprocess.Popen(["true"])
    done.wait()
    pid_file = cluster.home(0) / "pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(f"{done.pid}\n")
    assert cluster.pid(0) is None
    assert not pid_file.exists()  # removed, so the next start is not confused


def test_a_reused_pid_that_is_not_our_node_is_stale(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    pid_file = cluster.home(1) / "pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(f"{os.getpid()}\n")  # alive, but this test process is no OsNode JVM
    assert cluster.pid(1) is None
    assert not pid_file.exists()
    pid_file.write_text("garbage")
    assert cluster.pid(1) is None


def _why(pid: int) -> str:
    """What is_node saw, for a failure message."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError as e:
        argv = repr(e).encode()
    child = process._children.get(pid)
    state = None if child is None else (child.args, child.returncode)
    return f"alive={process.alive(pid)} child={state} cmdline={argv!r}"


def test_a_process_that_looks_like_our_node_is_found_even_without_pid_file(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    home = cluster.home(2)
    home.mkdir(parents=True)
    # argv: python -c ... OsNode <home>, like `java ... OsNode <home>`. (Not `sh -c 'sleep 30'`:
    # the shell may exec sleep in its place, and then the argv no longer names OsNode.)
    code = "import time; time.sleep(30)"
    fake = subprocess.Popen([sys.executable, "-c", code, "OsNode", str(home)])
    try:
        cmdline = Path(f"/proc/{fake.pid}/cmdline")
        deadline = time.monotonic() + 5  # setup: the fake's own argv is visible
        while b"OsNode" not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.is_node(fake.pid, home), _why(fake.pid)
        assert not process.is_node(fake.pid, cluster.home(0))  # another node's home
        assert fake.pid in process.find_nodes(tmp_path / "nodes")
        (home / "pid").write_text(f"{fake.pid}\n")
        assert cluster.pid(2) == fake.pid
        assert cluster.running() == [2]
    finally:
        fake.kill()
        fake.wait()
    assert cluster.pid(2) is None


def test_a_zombie_counts_as_dead() -> None:
    child = subprocess.Popen(["true"])
    stat = Path(f"/proc/{child.pid}/stat")
    deadline = time.monotonic() + 10
    while stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z":  # exited, not reaped yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert not process.alive(child.pid)
    finally:
        child.wait()


def test_a_reaped_child_does_not_hide_a_new_process_that_reuses_its_pid() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    process._children[live.pid] = gone  # a node started earlier, exited, and its pid reused
    try:
        assert process.alive(live.pid)
        assert live.pid not in process._children
    finally:
        process._children.pop(live.pid, None)
        live.kill()
        live.wait()
    assert not process.alive(live.pid)
