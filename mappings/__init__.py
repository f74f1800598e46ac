"""Index definitions as data, versioned (see items.json `_meta.mapping_version`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((_HERE / f"{name}.json").read_text())


def items_index(
    dimension: int,
    shards: int = 1,
    replicas: int = 0,
    model: str = "",
    vector_parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The items index body for a model of `dimension`, with shards, replicas and (when
    given) the vector field's `method.parameters` (suli.backends.opensearch.hnsw.Hnsw.parameters()) filled in."""
    body = copy.deepcopy(_load("items"))
    body["settings"]["index"].update(number_of_shards=shards, number_of_replicas=replicas)
    body["mappings"]["properties"]["vector"]["dimension"] = dimension
    if vector_parameters is not None:
        body["mappings"]["properties"]["vector"]["method"]["parameters"] = dict(vector_parameters)
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
