"""A rolling-upgrade step's refusals and the per-node version, without starting a JVM (the
step itself runs on a real cluster in tests/cluster/test_rolling_upgrade.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import devcluster
from cli.main import cli
from devcluster.cluster import NODE_VERSION_FILE, SPEC_FILE


def _saved(root: Path, nodes: int = 3, version: str = "2.19.1") -> devcluster.Cluster:
    spec = devcluster.ClusterSpec(nodes=nodes, http_port=9440, transport_port=9540, version=version)
    root.mkdir(parents=True, exist_ok=True)
    (root / SPEC_FILE).write_text(spec.to_json())
    cluster = devcluster.load(root)
    assert cluster is not None
    return cluster


def test_a_node_runs_the_spec_version_until_its_home_says_otherwise(tmp_path: Path) -> None:
    cluster = _saved(tmp_path)
    assert [cluster.node_version(i) for i in range(3)] == ["2.19.1"] * 3
    cluster.home(1).mkdir(parents=True)
    (cluster.home(1) / NODE_VERSION_FILE).write_text("3.5.0\n")
    assert [cluster.node_version(i) for i in range(3)] == ["2.19.1", "3.5.0", "2.19.1"]
    (cluster.home(1) / NODE_VERSION_FILE).write_text("")  # garbled: the spec's again
    assert cluster.node_version(1) == "2.19.1"


def test_a_downgrade_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    cluster = _saved(tmp_path)
    cluster.home(0).mkdir(parents=True)
    (cluster.home(0) / NODE_VERSION_FILE).write_text("3.5.0\n")
    with pytest.raises(devcluster.ClusterError, match=r"no downgrade to 2\.19\.1"):
        devcluster.upgrade_node(0, "2.19.1", tmp_path)
    assert (cluster.home(0) / NODE_VERSION_FILE).read_text() == "3.5.0\n"


def test_an_upgrade_needs_other_nodes_serving(tmp_path: Path) -> None:
    _saved(tmp_path)  # saved, but no node runs
    with pytest.raises(devcluster.ClusterError, match="other running nodes"):
        devcluster.upgrade_node(2, "3.5.0", tmp_path)
    assert not (tmp_path / "nodes" / "n3" / NODE_VERSION_FILE).exists()


def test_no_cluster_and_unknown_versions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(devcluster.ClusterError, match="no cluster in"):
        devcluster.upgrade_node(0, "3.5.0", tmp_path / "empty")
    _saved(tmp_path)
    with pytest.raises(ValueError, match="unknown OpenSearch version"):
        devcluster.upgrade_node(0, "9.9.9", tmp_path)


def test_the_cli_step_checks_its_arguments(tmp_path: Path) -> None:
    _saved(tmp_path)
    run = CliRunner().invoke
    state = ["cluster", "--state-dir", str(tmp_path), "upgrade-node"]
    out = run(cli, [*state, "4", "--version", "3.5.0"])
    assert out.exit_code == 2 and "the cluster has 3 node(s)" in out.output
    out = run(cli, [*state, "1", "--version", "4.0.0"])
    assert out.exit_code == 2  # not a known line
    out = run(cli, [*state, "1", "--version", "3.5.0"])
    assert out.exit_code == 1 and "other running nodes" in out.output
    out = run(cli, ["cluster", "--state-dir", str(tmp_path / "none"), "upgrade-node", "1",
                    "--version", "3.5.0"])  # fmt: skip
    assert out.exit_code == 1 and "no cluster in" in out.output
