"""devcluster loads an extra plugin beside k-NN, and keeps it for the next start."""

from __future__ import annotations

from pathlib import Path

import devcluster
from devcluster import plugins
from devcluster.http import get_json


def test_a_node_started_with_neural_search_lists_it_beside_knn(
    neural_search_cluster: devcluster.Cluster,
) -> None:
    code, listed = get_json(f"{neural_search_cluster.url}/_cat/plugins?format=json", timeout=30)
    assert code == 200
    # An embedded node names a classpath plugin by its class (no descriptor is read), so
    # `opensearch-neural-search` shows as its plugin class; the launcher's defaults stay.
    assert set(plugins.plugin_classes(("neural-search",)).split(",")) == {
        p["component"] for p in listed
    }
    assert "org.opensearch.neuralsearch.plugin.NeuralSearch" in {p["component"] for p in listed}
    # A later start (`suli cluster start-node`, a test's kill and start) reads this spec.
    saved = devcluster.load(neural_search_cluster.root)
    assert saved is not None and saved.spec.plugins == ("neural-search",)
    # The jars come from the artifact cache, not a per-cluster copy: the next cluster reuses them.
    jars = plugins.jar_dir(devcluster.provision().root, "neural-search")
    assert any(jars.glob("opensearch-neural-search-*.jar"))
    argv = Path(f"/proc/{neural_search_cluster.pid(0)}/cmdline").read_bytes().split(b"\0")
    assert f"{jars}/*".encode() in argv[argv.index(b"-cp") + 1].split(b":")
