"""The index definitions run on OpenSearch 3.x as they do on 2.19: no setting 3.0 removed, and
the two defaults 3.x changed pinned to 2.19's.

tests/integration/test_os3_node.py shows on a real 3.5 node that each setting listed here as
removed is refused there, so this list is not a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mappings
from suli.backends.opensearch.hnsw import Hnsw

ROOT = Path(__file__).resolve().parents[2]

# k-NN settings the 3.0 release removed (its breaking changes): the HNSW build parameters and
# the space now live in each knn_vector field's `method`, and the plugin cannot be switched off.
REMOVED_IN_3 = frozenset(
    {
        "index.knn.algo_param.m",
        "index.knn.algo_param.ef_construction",
        "index.knn.space_type",
        "knn.plugin.enabled",
    }
)

BODIES = {
    "items (default)": mappings.items_index(384),
    "items (3 shards, replicas, sq)": mappings.items_index(
        768, shards=3, replicas=2, model="m", vector_parameters=Hnsw(32, 200, "sq").parameters()
    ),
    "acl": mappings.acl_index(shards=2, replicas=1),
}


def flat(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """("index.knn", True)-style pairs of nested settings, as OpenSearch flattens them."""
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from flat(value, f"{name}.")
        else:
            yield name, value


def index_settings(body: dict[str, Any]) -> dict[str, Any]:
    """Flat index settings of a create-index body; `analysis.x` is `index.analysis.x`."""
    pairs = dict(flat(body["settings"]))
    return {k if k.startswith("index.") else f"index.{k}": v for k, v in pairs.items()}


@pytest.mark.parametrize("name", list(BODIES))
def test_no_index_body_carries_a_setting_removed_in_3_0(name: str) -> None:
    settings = index_settings(BODIES[name])
    assert settings, "the flattening found no settings at all"
    assert not set(settings) & REMOVED_IN_3
    assert not [k for k in settings if k.startswith("index.knn.algo_param.") and k != (
        "index.knn.algo_param.ef_search"  # still an index setting in 3.x
    )]  # fmt: skip


def test_the_vector_field_states_space_and_graph_in_its_method() -> None:
    # Where 3.x takes what the removed index settings used to say.
    method = BODIES["items (3 shards, replicas, sq)"]["mappings"]["properties"]["vector"]["method"]
    assert (method["engine"], method["space_type"]) == ("lucene", "cosinesimil")
    assert (method["parameters"]["m"], method["parameters"]["ef_construction"]) == (32, 200)


def test_vectors_stay_in_source_and_wildcards_have_no_doc_values_as_on_2_19() -> None:
    items = BODIES["items (default)"]
    # 3.x derives a vector from the graph files instead of storing it in _source by default;
    # Suli reads vectors back from _source (reindex keeps them, export, partial updates), and
    # on k-NN 3.5 a released scroll context closes the files later reads derive from.
    assert index_settings(items)["index.knn.derived_source.enabled"] is False
    # 3.x turned doc values on for `wildcard` fields; they are limited to 32766 bytes, so a
    # long body could no longer be indexed. 2.19's default (off) is stated explicitly.
    props = items["mappings"]["properties"]
    wildcards = {
        f"{field}.{sub}": spec
        for field, conf in props.items()
        for sub, spec in (conf.get("fields") or {}).items()
        if spec["type"] == "wildcard"
    }
    assert set(wildcards) == {"title.wc", "body.wc"}
    assert all(spec["doc_values"] is False for spec in wildcards.values())


def test_no_code_sends_a_setting_removed_in_3_0() -> None:
    # Settings also travel in put_settings calls (reindex, benches); none may name one.
    pattern = re.compile("|".join(re.escape(s.removeprefix("index.")) for s in REMOVED_IN_3))
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("suli", "indexer", "app", "cli", "bench", "mappings", "devcluster")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".py", ".json", ".yml", ".java")
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_the_flattening_finds_a_removed_setting_where_one_is() -> None:
    # The check above would pass on anything if index_settings lost nested keys.
    stale = {"settings": {"index": {"knn": True, "knn.space_type": "l2"}, "knn": {"algo_param":
             {"m": 16}}}}  # fmt: skip
    assert set(index_settings(stale)) & REMOVED_IN_3 == {
        "index.knn.space_type",
        "index.knn.algo_param.m",
    }
