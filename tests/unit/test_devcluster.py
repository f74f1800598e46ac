"""The local cluster helper's pure parts: config rendering, spec checks, port refusal, pid files.

No JVM is started: ports are taken by plain sockets or a tiny HTTP server, "nodes" are shell
processes whose command line looks like an OsNode's.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

import devcluster
from cli.main import cli
from devcluster import jdk, lines, plugins, process
from devcluster.cluster import JDK_FILE, Cluster
from devcluster.http import describe_listener, port_free
from devcluster.spec import ClusterSpec, java_command, opensearch_yml


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
    java17 = jdk.Jdk(Path("/jdk17"), "17.0.15")
    one = java_command(ClusterSpec(heap="1g"), tmp_path, "cp", java17)
    three = java_command(ClusterSpec(nodes=3, heap="768m"), tmp_path, "cp", java17)
    assert one[:3] == ["/jdk17/bin/java", "-Xms1g", "-Xmx1g"]
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


def test_up_refuses_to_wipe_another_clusters_data_unless_told(
    listener: int, tmp_path: Path
) -> None:
    """A bare `up` over the stopped nodes of another shape (here a 3-node 3.5.0 cluster on 9241)
    names the command that starts them and deletes nothing; `up --wipe` deletes their data."""
    old = ClusterSpec(nodes=3, http_port=9241, transport_port=9341, heap="2g", version="3.5.0")
    (tmp_path / devcluster.cluster.SPEC_FILE).write_text(old.to_json())
    kept = tmp_path / "nodes" / "n2" / "data" / "nodes" / "0"
    kept.mkdir(parents=True)
    (kept / "segments_1").write_text("an index")
    args = ["cluster", "--state-dir", str(tmp_path), "up", "--http-port", str(listener)]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 1, refused.output
    start = "up --nodes 3 --http-port 9241 --heap 2g --version 3.5.0"
    assert start in refused.output and "--wipe" in refused.output
    assert (kept / "segments_1").read_text() == "an index"
    assert devcluster.load(tmp_path).spec == old  # type: ignore[union-attr]
    # With --wipe the old data goes; this shape then stops at the taken port, as any up would.
    wiped = CliRunner().invoke(cli, [*args[:4], "--wipe", *args[4:]])
    assert wiped.exit_code != 0 and f"port {listener}" in wiped.output
    assert not (tmp_path / "nodes").exists()


def _answering(payload: dict[str, object]) -> type[BaseHTTPRequestHandler]:
    """A stand-in node that answers every GET with `payload` as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # quiet
            pass

    return Handler


_FakeOpenSearch = _answering(
    {"cluster_name": "other", "name": "n9", "version": {"number": "2.19.1"}}
)


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


# ---- the JDK a node runs on (devcluster.jdk) ------------------------------------------------


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    """A folder that looks like a JDK home: bin/java, bin/javac and a `release` file."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    for tool in ("java", "javac"):
        (home / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (home / "bin" / tool).chmod(0o755)
    (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def no_system_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the fake JDKs a test makes count: no JAVA_HOME, no `java` on PATH."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("SULI_JAVA_HOME", raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def no_mvn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No `mvn` on PATH: a fetch that would download fails loudly instead."""
    empty = tmp_path / "no-mvn-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.mark.usefixtures("no_system_java")
def test_the_newest_jdk_is_chosen_and_turns_on_lucene_vector_code(tmp_path: Path) -> None:
    jvm = tmp_path / "jvm"
    _fake_jdk(jvm, "java-17-openjdk-amd64", "17.0.15")
    newest = _fake_jdk(jvm, "temurin-25-jdk-amd64", "25.0.3")
    _fake_jdk(jvm, "temurin-21-jdk-amd64", "21.0.7")
    (jvm / "not-a-jdk").mkdir()
    chosen = jdk.choose(jvm_dirs=[jvm])
    assert (chosen.home, chosen.feature, chosen.simd) == (newest.resolve(), 25, True)
    cmd = java_command(ClusterSpec(), tmp_path, "cp", chosen)
    assert cmd[0] == str(newest.resolve() / "bin" / "java")
    assert "--add-modules=jdk.incubator.vector" in cmd
    assert "-Dorg.apache.lucene.vectorization.upperJavaFeatureVersion=25" in cmd
    assert "-Djava.locale.providers=SPI,CLDR" in cmd  # COMPAT is gone from JDK 23 on
    assert cmd.index("--add-modules=jdk.incubator.vector") < cmd.index("OsNode")  # a JVM flag


@pytest.mark.usefixtures("no_system_java")
def test_with_only_java_17_the_node_starts_without_simd_and_says_so(
    tmp_path: Path, listener: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _fake_jdk(tmp_path / "jvm", "java-17-openjdk-amd64", "17.0.15")
    chosen = jdk.choose(jvm_dirs=[tmp_path / "jvm"])
    assert (chosen.home, chosen.simd) == (old.resolve(), False)
    cmd = java_command(ClusterSpec(), tmp_path, "cp", chosen)
    assert not [flag for flag in cmd if "vector" in flag]
    assert "-Djava.locale.providers=SPI,COMPAT" in cmd
    # The notice comes first, before up() checks ports or downloads anything.
    monkeypatch.setattr(logging.getLogger("devcluster"), "propagate", True)  # the CLI unsets it
    with (
        caplog.at_level(logging.INFO, logger="devcluster"),
        pytest.raises(devcluster.PortInUseError),
    ):
        devcluster.up(
            http_port=listener, transport_port=listener + 1, state=tmp_path, java=str(old)
        )
    assert "vector search runs WITHOUT SIMD" in caplog.text
    assert "Java 17.0.15" in caplog.text


@pytest.mark.usefixtures("no_system_java")
def test_java_home_suli_java_home_and_the_java_option_override_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jvm = tmp_path / "jvm"
    old = _fake_jdk(jvm, "jdk-17", "17.0.15").resolve()
    mid = _fake_jdk(jvm, "jdk-21", "21.0.7").resolve()
    _fake_jdk(jvm, "jdk-25", "25.0.3")
    monkeypatch.setenv("JAVA_HOME", str(old))
    assert jdk.choose(jvm_dirs=[jvm]).home == old
    monkeypatch.setenv("SULI_JAVA_HOME", str(mid))
    assert jdk.choose(jvm_dirs=[jvm]).home == mid
    assert jdk.choose(str(old / "bin" / "java"), jvm_dirs=[jvm]).home == old  # --java wins
    with pytest.raises(devcluster.ProvisionError, match="--java=/nowhere is not a JDK"):
        jdk.choose("/nowhere")


def test_a_bad_java_option_is_refused_with_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["cluster", "--state-dir", str(tmp_path), "up", "--java", str(tmp_path / "nope")]
    )
    assert result.exit_code == 2
    assert "--java" in result.output and "is not a JDK" in result.output
    assert not list(tmp_path.iterdir())  # nothing was written


@pytest.mark.parametrize(
    ("version", "feature"), [("17.0.15", 17), ("25", 25), ("1.8.0_402", 8), ("21-ea", 21)]
)
def test_feature_versions_are_read_from_release_strings(version: str, feature: int) -> None:
    assert jdk.feature_version(version) == feature


@pytest.mark.usefixtures("no_system_java")
def test_a_node_started_again_runs_on_the_jdk_up_chose(tmp_path: Path) -> None:
    chosen = _fake_jdk(tmp_path / "jvm", "jdk-21", "21.0.7")
    cluster = _cluster(tmp_path)
    (tmp_path / JDK_FILE).write_text(f"{chosen}\n")
    assert cluster.jdk().home == chosen.resolve()


# ---- extra plugins (devcluster.plugins) -----------------------------------------------------


@pytest.mark.parametrize("version", list(lines.LINES))
def test_base_plugin_classes_match_the_launcher_defaults(version: str) -> None:
    # -Dosnode.plugins replaces the launcher's default list: the Python copy must not drift.
    line = lines.LINES[version]
    source = (Path(devcluster.__file__).parent / line.launcher).read_text()
    assert f"public final class {line.main_class} " in source  # javac wants file = class
    block = source.split("DEFAULT_PLUGINS = String.join(", 1)[1].split(");", 1)[0]
    assert tuple(re.findall(r'"([\w.]+)"', block)) == line.plugin_classes
    assert lines.LINES["2.19.1"].plugin_classes == plugins.BASE_PLUGIN_CLASSES


def test_an_extra_plugin_joins_the_classpath_and_the_plugin_list(tmp_path: Path) -> None:
    java21 = jdk.Jdk(Path("/jdk21"), "21.0.7")
    spec = ClusterSpec(nodes=3, heap="768m", plugins=("neural-search",))
    jars = tmp_path / "cache" / "plugins" / "neural-search"
    cmd = java_command(spec, tmp_path, "/c/launcher:/c/lib/*:/c/knn/*", java21, [jars])
    flag = next(f for f in cmd if f.startswith("-Dosnode.plugins="))
    classes = flag.split("=", 1)[1].split(",")
    assert classes[:-1] == list(plugins.BASE_PLUGIN_CLASSES)  # k-NN, reindex... all kept
    assert classes[-1] == "org.opensearch.neuralsearch.plugin.NeuralSearch"
    assert cmd[cmd.index("-cp") + 1] == f"/c/launcher:/c/lib/*:/c/knn/*:{jars}/*"
    assert cmd.index(flag) < cmd.index("OsNode")  # a JVM flag, not a program argument
    plain = java_command(ClusterSpec(), tmp_path, "cp", java21, [jars])
    assert not [f for f in plain if f.startswith("-Dosnode.plugins")]  # launcher defaults
    assert plain[plain.index("-cp") + 1] == "cp"


def test_the_plugin_set_is_saved_with_the_spec_so_a_restart_keeps_it(tmp_path: Path) -> None:
    spec = ClusterSpec(nodes=3, heap="768m", plugins=("neural-search", "neural-search"))
    assert spec.plugins == ("neural-search",)
    path = tmp_path / "cluster.json"
    path.write_text(spec.to_json())
    assert ClusterSpec.load(path) == spec
    assert spec.without_plugins() == ClusterSpec(nodes=3, heap="768m")
    path.write_text(json.dumps({"nodes": 1}))  # a spec saved before plugins existed
    assert ClusterSpec.load(path) == ClusterSpec(nodes=1)
    with pytest.raises(ValueError, match="unknown plugin 'sql'; known: neural-search"):
        ClusterSpec(plugins=("sql",))


def test_a_cached_plugin_is_not_fetched_again(tmp_path: Path, no_mvn: None) -> None:
    jars = plugins.jar_dir(tmp_path, "neural-search")
    jars.mkdir(parents=True)
    marker = {"artifact": plugins.KNOWN["neural-search"].artifact()}
    assert marker["artifact"] == "org.opensearch.plugin:neural-search:2.19.1.0:zip"
    (jars / plugins.MARKER).write_text(json.dumps(marker))
    assert plugins.fetch("neural-search", tmp_path) == jars  # no mvn on PATH: from the cache
    (jars / plugins.MARKER).write_text(json.dumps({"artifact": "x:y:0:zip"}))  # another version
    with pytest.raises(devcluster.ProvisionError, match="`mvn` not found"):
        plugins.fetch("neural-search", tmp_path)


def test_an_unknown_plugin_option_is_refused_with_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["cluster", "--state-dir", str(tmp_path), "up", "--plugin", "sql"]
    )
    assert result.exit_code == 2
    assert "--plugin" in result.output and "neural-search" in result.output
    assert not list(tmp_path.iterdir())


_GreenHealth = _answering({"cluster_name": "suli-dev", "status": "green", "timed_out": False})


def _serve(port: int) -> HTTPServer:
    server = HTTPServer(("127.0.0.1", port), _GreenHealth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _free_ports(n: int) -> int:
    """The first of n consecutive free loopback ports."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        if first + n < 65536 and all(port_free(first + i) for i in range(n)):
            return first
    raise AssertionError("no run of free ports")


def test_ready_only_once_every_node_answers_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One node says green before another's HTTP port is bound (seen: a client of node 1 got
    "connection refused" right after `up` returned): not ready until that node answers."""
    first = _free_ports(3)
    spec = ClusterSpec(nodes=3, http_port=first, transport_port=first + 10)
    cluster = Cluster(tmp_path, spec)
    monkeypatch.setattr(Cluster, "pid", lambda self, i: 4242)
    servers = [_serve(first + 1), _serve(first + 2)]  # node 0 (the first URL) not yet
    try:
        with pytest.raises(devcluster.StartupError, match=f"127.0.0.1:{first} not answering"):
            cluster.wait_ready(timeout=2.5)
        threading.Timer(1.0, lambda: servers.append(_serve(first))).start()
        t0 = time.monotonic()
        assert cluster.wait_ready(timeout=30)["status"] == "green"
        assert time.monotonic() - t0 >= 0.9  # it waited for node 0
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
