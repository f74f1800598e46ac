"""Index definitions as data, versioned (see items.json `_meta.mapping_version`)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((_HERE / f"{name}.json").read_text())


@dataclass(frozen=True, slots=True)
class Hnsw:
    """How the vector field's HNSW graph is built (Settings.hnsw_m, hnsw_ef_construction,
    vector_encoder). `sq` is Lucene's 7-bit scalar quantizer: a quarter of the float32
    vector memory for the graph search; the full vectors stay on disk."""

    m: int = 16
    ef_construction: int = 128
    encoder: str = "float32"  # or "sq"

    def parameters(self) -> dict[str, Any]:
        """The `method.parameters` of the vector field, as the mapping states them."""
        out: dict[str, Any] = {"m": self.m, "ef_construction": self.ef_construction}
        if self.encoder == "sq":
            out["encoder"] = {"name": "sq"}
        return out

    @classmethod
    def of_mapping(cls, vector_field: dict[str, Any]) -> Hnsw:
        """What an existing index's vector field was built with (its mapping as read back)."""
        params = (vector_field.get("method") or {}).get("parameters") or {}
        encoder = (params.get("encoder") or {}).get("name") or "float32"
        return cls(int(params.get("m", 16)), int(params.get("ef_construction", 100)), encoder)

    def describe(self) -> str:
        return f"m={self.m} ef_construction={self.ef_construction} encoder={self.encoder}"


def hnsw_drift(built: Hnsw, wanted: Hnsw) -> str | None:
    """A line saying an index's graph differs from the configured one (None when it does not).

    The HNSW parameters are fixed when an index is created: a changed SULI_HNSW_* setting
    applies only to indices created after it, so the difference is said, never hidden."""
    if built == wanted:
        return None
    return (
        f"live index's vector graph is {built.describe()}, settings ask for "
        f"{wanted.describe()}: run `suli reindex` to rebuild it"
    )


def items_index(
    dimension: int,
    shards: int = 1,
    replicas: int = 0,
    model: str = "",
    hnsw: Hnsw | None = None,
) -> dict[str, Any]:
    """The items index body for a model of `dimension`, with shards, replicas and (when
    given) the HNSW build parameters filled in."""
    body = copy.deepcopy(_load("items"))
    body["settings"]["index"].update(number_of_shards=shards, number_of_replicas=replicas)
    body["mappings"]["properties"]["vector"]["dimension"] = dimension
    if hnsw is not None:
        body["mappings"]["properties"]["vector"]["method"]["parameters"] = hnsw.parameters()
    body["mappings"]["_meta"].update(dimension=dimension, model=model)
    return body


def acl_index(shards: int = 1, replicas: int = 0) -> dict[str, Any]:
    body = copy.deepcopy(_load("acl"))
    body["settings"]["index"].update(number_of_shards=shards, number_of_replicas=replicas)
    return body


def acl_fields() -> dict[str, Any]:
    """The ACL index's field mappings (an older index gains the missing ones in place)."""
    return copy.deepcopy(_load("acl")["mappings"]["properties"])


def mapping_version() -> int:
    return int(_load("items")["mappings"]["_meta"]["mapping_version"])


def item_fields() -> set[str]:
    """Top-level fields the items mapping declares (documents may use only these)."""
    return set(_load("items")["mappings"]["properties"])
