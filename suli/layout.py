"""How many primary shards an items index should have, for Suli's request pattern.

A Suli search sends two requests (both legs, then the page by id) and each leg's query phase
runs on every primary shard of the index: fixed costs (the typo clauses' automata, the
visibility lookup, collecting 100 candidates and their doc values) are paid once per shard.
Splitting an index finer than it needs multiplies them (bench/RESULTS.md: at 100k items, three
primaries cost the nodes more CPU per search than one). OpenSearch's sizing guidance is shards
of 10-50 GB; Suli's items take about 14 KB each with their vector, so one primary holds about
three million of them. Throughput across nodes comes from replicas, each a full copy that
answers whole searches (docs/operations.md, "Shards and replicas").
"""

from __future__ import annotations

import math

# Upper end of OpenSearch's 10-50 GB guidance, kept below it so an index growing between
# checks stays inside: a primary is split only when it would pass this.
PRIMARY_TARGET_BYTES = 40 * 1024**3


def primaries_for(primary_bytes: int) -> int:
    """The primaries an index of this primary size needs: one per PRIMARY_TARGET_BYTES."""
    return max(1, math.ceil(primary_bytes / PRIMARY_TARGET_BYTES))


def finer_than_needed(shards: int, primary_bytes: int) -> str | None:
    """A note when an index has more primaries than its size needs, else None."""
    want = primaries_for(primary_bytes)
    if shards <= want:
        return None
    each = primary_bytes / shards / 1024**3
    return (
        f"{shards} primary shards of {each:.1f} GB each where {want} would do (shards up to "
        f"{PRIMARY_TARGET_BYTES // 1024**3} GB): every search pays per shard; "
        f"`suli reindex --shards {want}` and add replicas for throughput "
        '(docs/operations.md, "Shards and replicas")'
    )
