"""The local cluster's two OpenSearch lines (2.19.1, 3.5.0): version choice, JDK fit, launcher,
cache, spec and CLI. No JVM is started; JDKs are folders that look like one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import devcluster
from cli.main import cli
from devcluster import jdk, lines, plugins, process
from devcluster.cluster import SPEC_FILE
from devcluster.paths import cache_dir
from devcluster.spec import ClusterSpec, java_command

JAVA17 = jdk.Jdk(Path("/jdk17"), "17.0.15")
JAVA21 = jdk.Jdk(Path("/jdk21"), "21.0.7")
JAVA25 = jdk.Jdk(Path("/jdk25"), "25.0.3")


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    """A folder that looks like a JDK home: bin/java, bin/javac and a `release` file."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    for tool in ("java", "javac"):
        (home / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (home / "bin" / tool).chmod(0o755)
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home.resolve()


@pytest.fixture
def only_fake_jdks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No JAVA_HOME, SULI_JAVA_HOME or java on PATH: only the JDKs a test makes in the folder."""
    for name in ("JAVA_HOME", "SULI_JAVA_HOME", lines.VERSION_ENV):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return tmp_path / "jvm"


def test_the_default_line_is_2_19_and_the_env_var_picks_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(lines.VERSION_ENV, raising=False)
    assert lines.get().version == "2.19.1" == devcluster.DEFAULT_VERSION
    monkeypatch.setenv(lines.VERSION_ENV, "3.5.0")
    assert (lines.get().version, lines.get().knn, lines.get().java_min) == ("3.5.0", "3.5.0.0", 21)
    assert lines.get("2.19.1").version == "2.19.1"  # an explicit version beats the env var
    with pytest.raises(
        ValueError, match=re.escape("unknown OpenSearch version '9.9'; known: 2.19.1, 3.5.0")
    ):
        lines.get("9.9")


def test_a_3x_node_starts_its_own_launcher_with_cldr_on_every_java(tmp_path: Path) -> None:
    spec = ClusterSpec(version="3.5.0")
    cmd = java_command(spec, tmp_path, "cp", JAVA21)
    assert cmd[-3:] == ["cp", "OsNode3", str(tmp_path)]
    assert "-Djava.locale.providers=SPI,CLDR" in cmd  # 3.x dropped COMPAT, whatever the JDK
    assert "--add-modules=jdk.incubator.vector" in cmd
    old = java_command(ClusterSpec(), tmp_path, "cp", JAVA21)
    assert old[-3:] == ["cp", "OsNode", str(tmp_path)]
    assert "-Djava.locale.providers=SPI,COMPAT" in old  # 2.19 on a JDK that still has it


def test_the_version_is_saved_in_the_spec_and_an_old_spec_reads_as_2_19(tmp_path: Path) -> None:
    path = tmp_path / SPEC_FILE
    spec = ClusterSpec(nodes=3, heap="768m", version="3.5.0")
    path.write_text(spec.to_json())
    assert json.loads(path.read_text())["version"] == "3.5.0"
    assert ClusterSpec.load(path) == spec
    # A version change is a change of shape (the data is wiped), a plugin set alone is not.
    assert spec.without_plugins() != ClusterSpec(nodes=3, heap="768m").without_plugins()
    path.write_text(json.dumps({"nodes": 1}))  # written before there were two lines
    assert ClusterSpec.load(path) == ClusterSpec(nodes=1, version="2.19.1")
    path.write_text(json.dumps({"nodes": 1, "version": "1.3.0"}))
    assert ClusterSpec.load(path) is None
    with pytest.raises(ValueError, match="unknown OpenSearch version ''"):
        ClusterSpec(version="")  # never taken as "the default"


def test_neural_search_is_refused_on_3_5_because_maven_has_no_zip_for_it() -> None:
    with pytest.raises(
        ValueError, match=re.escape("'neural-search' is not available for OpenSearch 3.5.0")
    ):
        ClusterSpec(version="3.5.0", plugins=("neural-search",))
    assert ClusterSpec(plugins=("neural-search",)).plugins == ("neural-search",)
    flag = plugins.plugin_classes((), lines.LINES["3.5.0"])
    assert flag.split(",")[0] == "org.opensearch.transport.Netty4ModulePlugin"


def test_each_line_has_its_own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SULI_CLUSTER_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "suli" / "opensearch-2.19.1"
    assert cache_dir(version="3.5.0") == tmp_path / "suli" / "opensearch-3.5.0"
    monkeypatch.setenv("SULI_CLUSTER_CACHE", str(tmp_path / "ci-cache"))
    assert cache_dir() == tmp_path / "ci-cache"  # as before there were two lines
    assert cache_dir(version="3.5.0") == tmp_path / "ci-cache-3.5.0"


def test_3x_takes_the_newest_jdk_that_fits(only_fake_jdks: Path) -> None:
    _fake_jdk(only_fake_jdks, "java-17-openjdk-amd64", "17.0.15")
    newest = _fake_jdk(only_fake_jdks, "temurin-25-jdk-amd64", "25.0.3")
    chosen = jdk.choose(jvm_dirs=[only_fake_jdks], minimum=21)
    assert (chosen.home, chosen.feature) == (newest, 25)


def test_3x_with_only_java_17_fails_naming_what_is_missing(only_fake_jdks: Path) -> None:
    old = _fake_jdk(only_fake_jdks, "java-17-openjdk-amd64", "17.0.15")
    with pytest.raises(devcluster.ProvisionError) as err:
        jdk.choose(jvm_dirs=[only_fake_jdks], minimum=21, needed_by="OpenSearch 3.5.0")
    message = str(err.value)
    assert "OpenSearch 3.5.0 needs Java >= 21" in message
    assert f"Java 17.0.15 at {old}" in message and "install a JDK 21 or newer" in message
    assert jdk.choose(jvm_dirs=[only_fake_jdks], minimum=17).home == old  # 2.19 still runs


def test_an_explicit_java_too_old_for_3x_is_refused_naming_one_that_fits(
    only_fake_jdks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _fake_jdk(only_fake_jdks, "jdk-17", "17.0.15")
    fits = _fake_jdk(only_fake_jdks, "jdk-25", "25.0.3")
    for source in ("--java", "SULI_JAVA_HOME"):
        java = str(old) if source == "--java" else None
        if source == "SULI_JAVA_HOME":
            monkeypatch.setenv("SULI_JAVA_HOME", str(old))
        with pytest.raises(devcluster.ProvisionError) as err:
            jdk.choose(java, jvm_dirs=[only_fake_jdks], minimum=21, needed_by="OpenSearch 3.5.0")
        assert f"{source}={old} is Java 17.0.15" in str(err.value)
        assert f"installed and new enough: {fits}" in str(err.value)


def test_a_java_home_too_old_for_3x_is_passed_over(
    only_fake_jdks: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    old = _fake_jdk(only_fake_jdks, "jdk-17", "17.0.15")
    fits = _fake_jdk(only_fake_jdks, "jdk-21", "21.0.7")
    monkeypatch.setenv("JAVA_HOME", str(old))
    monkeypatch.setattr(devcluster.cluster.log, "propagate", True)  # the CLI unsets it
    with caplog.at_level("WARNING", logger="devcluster"):
        assert jdk.choose(jvm_dirs=[only_fake_jdks], minimum=21).home == fits
    assert f"JAVA_HOME={old} is Java 17.0.15, too old" in caplog.text
    assert jdk.choose(jvm_dirs=[only_fake_jdks], minimum=17).home == old  # it fits 2.19


def test_a_3x_node_process_is_recognised_by_its_launcher_class(tmp_path: Path) -> None:
    home = tmp_path / "nodes" / "n1"
    home.mkdir(parents=True)
    code = "import time; time.sleep(30)"
    fake = subprocess.Popen([sys.executable, "-c", code, "OsNode3", str(home)])
    try:
        cmdline = Path(f"/proc/{fake.pid}/cmdline")
        deadline = time.monotonic() + 5  # setup: the fake's own argv is visible
        while b"OsNode3" not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        process._children.pop(fake.pid, None)  # judged by its argv, as a node from another CLI
        assert process.is_node(fake.pid, home)
        assert fake.pid in process.find_nodes(tmp_path / "nodes")
    finally:
        fake.kill()
        fake.wait()


def test_cli_version_option_is_checked_and_saved(tmp_path: Path, only_fake_jdks: Path) -> None:
    runner = CliRunner()
    state = str(tmp_path / "state")
    bad = runner.invoke(cli, ["cluster", "--state-dir", state, "up", "--version", "9.9"])
    assert bad.exit_code == 2 and "'9.9' is not one of '2.19.1', '3.5.0'" in bad.output
    mixed = ["cluster", "--state-dir", state, "up", "--version", "3.5.0", "--plugin"]
    refused = runner.invoke(cli, [*mixed, "neural-search"])
    assert refused.exit_code == 2 and "not available for OpenSearch 3.5.0" in refused.output
    _fake_jdk(only_fake_jdks, "jdk-17", "17.0.15")
    too_old = runner.invoke(
        cli, ["cluster", "--state-dir", state, "up", "--version", "3.5.0"],
        env={"SULI_JAVA_HOME": str(only_fake_jdks / "jdk-17")},
    )  # fmt: skip
    assert too_old.exit_code == 1 and "OpenSearch 3.5.0 needs Java >= 21" in too_old.output
    assert not Path(state).exists()  # refused before anything was written or started


def test_status_shows_the_saved_version_when_no_node_answers(tmp_path: Path) -> None:
    (tmp_path / SPEC_FILE).write_text(ClusterSpec(http_port=9470, version="3.5.0").to_json())
    assert devcluster.status(tmp_path)["cluster_version"] == "3.5.0"
    result = CliRunner().invoke(cli, ["cluster", "--state-dir", str(tmp_path), "status"])
    assert result.exit_code == 1  # no node answers
    assert "OpenSearch 3.5.0 (not running)" in result.output
