"""What is on the cluster: the alias, its physical indices with their `_meta`, and cluster status."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import opensearchpy
from opensearchpy import OpenSearch

from indexer.isolation import workspace_indices, workspace_notes
from indexer.rejects import count_rejects
from suli.backends.opensearch.hnsw import Hnsw, hnsw_drift
from suli.errors import BackendUnavailable, InvalidInput
from suli.layout import finer_than_needed

T = TypeVar("T")

# `<alias>-v<mapping version>-<UTC timestamp>`, as OpenSearchBackend.physical_name makes them.
_PHYSICAL = r"-v(?P<version>[0-9]+)-(?P<stamp>[0-9]{14,20})"


def call(fn: Callable[[], T], what: str) -> T:
    """One admin call; transport faults become BackendUnavailable naming what failed."""
    try:
        return fn()
    except opensearchpy.ConnectionError as e:
        raise BackendUnavailable(f"OpenSearch is unreachable ({what}): {e.info or e}") from e
    except opensearchpy.TransportError as e:
        raise BackendUnavailable(f"OpenSearch refused {what}: {e.status_code} {e.error}") from e


def is_physical(alias: str, name: str) -> bool:
    """True when name is one of alias's versioned physical indices."""
    return re.fullmatch(re.escape(alias) + _PHYSICAL, name) is not None


def alias_targets(client: OpenSearch, alias: str) -> list[str]:
    """The indices the alias points at (normally exactly one); [] when the alias is missing."""
    try:
        return sorted(client.indices.get_alias(name=alias))
    except opensearchpy.NotFoundError:
        return []
    except opensearchpy.TransportError as e:
        raise BackendUnavailable(f"OpenSearch refused the alias lookup: {e}") from e


def live_index(client: OpenSearch, alias: str) -> str | None:
    """The one physical index behind the alias (None when there is no alias)."""
    targets = call(lambda: alias_targets(client, alias), "alias lookup")
    if len(targets) > 1:
        raise BackendUnavailable(f"alias {alias} points at {len(targets)} indices: {targets}")
    return targets[0] if targets else None


def read_meta(client: OpenSearch, index: str) -> dict[str, Any]:
    """The index mapping's `_meta` (mapping_version, dimension, model, reindex state)."""
    got = call(lambda: client.indices.get_mapping(index=index), f"mapping of {index}")
    return dict(got[index]["mappings"].get("_meta") or {})


def write_meta(client: OpenSearch, index: str, meta: dict[str, Any]) -> None:
    """Replace the mapping's `_meta` (put_mapping replaces it whole; fields stay as they are)."""
    call(lambda: client.indices.put_mapping(index=index, body={"_meta": meta}), "_meta update")


def fields(client: OpenSearch, index: str) -> set[str]:
    """Top-level fields the index maps."""
    got = call(lambda: client.indices.get_mapping(index=index), f"mapping of {index}")
    return set(got[index]["mappings"].get("properties") or {})


@dataclass(frozen=True)
class PhysicalIndex:
    """One physical index of the alias, as `suli indices` shows it."""

    name: str
    live: bool
    docs: int
    health: str
    size: str
    mapping_version: int | None
    model: str
    dimension: int | None
    shards: int
    replicas: int
    write_blocked: bool
    created: str
    reindex: dict[str, Any] | None  # state of the reindex that built it, while it builds
    previous: str | None  # the index that was live before this one (rollback target)
    primary_bytes: int = 0  # store size of the primaries alone (the layout rule reads it)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def physical_indices(client: OpenSearch, alias: str) -> list[PhysicalIndex]:
    """Every `<alias>-v<N>-<stamp>` index, oldest first, with counts and `_meta`."""
    live = set(call(lambda: alias_targets(client, alias), "alias lookup"))
    try:
        got = client.indices.get(index=f"{alias}-v*", expand_wildcards="open,closed")
        rows = client.cat.indices(index=f"{alias}-v*", format="json", bytes="b")
    except opensearchpy.NotFoundError:
        return []
    except (opensearchpy.ConnectionError, opensearchpy.TransportError) as e:
        raise BackendUnavailable(f"OpenSearch refused the index listing: {e}") from e
    cat = {r["index"]: r for r in rows}
    out = []
    for name, body in got.items():
        if not is_physical(alias, name):
            continue
        meta = body["mappings"].get("_meta") or {}
        index_settings = body["settings"]["index"]
        row = cat.get(name, {})
        out.append(
            PhysicalIndex(
                name=name,
                live=name in live,
                docs=int(row.get("docs.count") or 0),
                health=str(row.get("health") or "unknown"),
                size=_human_bytes(int(row.get("store.size") or 0)),
                mapping_version=meta.get("mapping_version"),
                model=str(meta.get("model") or ""),
                dimension=meta.get("dimension"),
                shards=int(index_settings.get("number_of_shards", 0)),
                replicas=int(index_settings.get("number_of_replicas", 0)),
                write_blocked=str(index_settings.get("blocks", {}).get("write")) == "true",
                created=_created(index_settings.get("creation_date")),
                reindex=meta.get("reindex") if meta.get("reindex", {}).get("phase") else None,
                previous=(meta.get("live_since") or {}).get("previous"),
                primary_bytes=int(row.get("pri.store.size") or 0),
            )
        )
    return sorted(out, key=lambda p: p.name)


def drop(client: OpenSearch, alias: str, name: str) -> None:
    """Delete an old physical index of the alias; the live one and foreign indices are refused."""
    if not is_physical(alias, name):
        raise InvalidInput(f"name: {name!r} is not a physical index of {alias}", "name")
    if name in call(lambda: alias_targets(client, alias), "alias lookup"):
        raise InvalidInput(f"name: {name} is live behind {alias}; it cannot be dropped", "name")
    try:
        client.indices.delete(index=name)
    except opensearchpy.NotFoundError:
        raise InvalidInput(f"name: no index {name}", "name") from None
    except (opensearchpy.ConnectionError, opensearchpy.TransportError) as e:
        raise BackendUnavailable(f"OpenSearch refused to drop {name}: {e}") from e


def hnsw_of(client: OpenSearch, index: str) -> Hnsw:
    """The HNSW build parameters of an index's vector field, as its mapping states them."""
    got = call(lambda: client.indices.get_mapping(index=index), f"mapping of {index}")
    props = got[index]["mappings"].get("properties") or {}
    return Hnsw.of_mapping(props.get("vector") or {})


def status(
    client: OpenSearch,
    alias: str,
    expected: tuple[int, str, int],
    rejects: Iterable[Path] = (),
    hnsw: Hnsw | None = None,
) -> dict[str, Any]:
    """Cluster health, nodes, the alias and its index, counts and pending rejects, as one dict.

    expected: (mapping version, model name, dimension) this Suli would build an index with;
    hnsw: the vector graph it would build (a live index built otherwise gets a note).
    """
    health = call(lambda: client.cluster.health(), "cluster health")
    nodes = call(
        lambda: client.cat.nodes(
            format="json",
            h="name,ip,node.role,cluster_manager,heap.percent,ram.percent,cpu,load_1m,disk.used_percent,version",
        ),
        "node list",
    )
    indices = physical_indices(client, alias)
    live = next((p for p in indices if p.live), None)
    version, model, dimension = expected
    notes: list[str] = []
    if live is None:
        notes.append(f"no index behind {alias}: run `suli index FILE`")
    else:
        if live.mapping_version != version:
            notes.append(
                f"live index has mapping v{live.mapping_version}, this Suli builds v{version}: "
                "run `suli reindex`"
            )
        if live.model != model or live.dimension != dimension:
            notes.append(
                f"live index holds {live.model or '?'} vectors ({live.dimension}), this Suli "
                f"embeds with {model} ({dimension}): run `suli reindex`"
            )
        if hnsw is not None and (note := hnsw_drift(hnsw_of(client, live.name), hnsw)):
            notes.append(note)
        if note := finer_than_needed(live.shards, live.primary_bytes):
            notes.append(f"{live.name}: {note}")
    building = [
        p.name
        for p in indices
        if not p.live and p.reindex and p.reindex.get("phase") in ("copying", "copied", "failed")
    ]
    if live is not None and live.write_blocked:
        notes.append(f"{live.name} is write-blocked (an interrupted reindex?): writes wait")
    if building:
        notes.append(f"unfinished reindex into {', '.join(building)}: `suli reindex --resume`")
    pending = count_rejects(rejects)
    workspaces = workspace_indices(client, alias)  # SULI_ISOLATE_WORKSPACES: one per workspace
    notes += workspace_notes(workspaces, expected)
    return {
        "cluster": {
            "name": health.get("cluster_name"),
            "status": health.get("status"),
            "nodes": health.get("number_of_nodes"),
            "data_nodes": health.get("number_of_data_nodes"),
            "active_shards": health.get("active_shards"),
            "relocating_shards": health.get("relocating_shards"),
            "initializing_shards": health.get("initializing_shards"),
            "unassigned_shards": health.get("unassigned_shards"),
        },
        "nodes": [
            {
                "name": n.get("name"),
                "roles": n.get("node.role"),
                "cluster_manager": n.get("cluster_manager") == "*",
                "heap_percent": _int(n.get("heap.percent")),
                "cpu_percent": _int(n.get("cpu")),
                "load_1m": n.get("load_1m"),
                "disk_used_percent": n.get("disk.used_percent"),
                "version": n.get("version"),
            }
            for n in sorted(nodes, key=lambda n: str(n.get("name")))
        ],
        "alias": alias,
        "index": live.to_json() if live else None,
        "expected": {"mapping_version": version, "model": model, "dimension": dimension},
        "docs": live.docs if live else 0,
        "indices": [p.to_json() for p in indices],
        "workspaces": workspaces,
        "rejects": {"files": pending, "total": sum(f["lines"] for f in pending)},
        "notes": notes,
    }


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _created(millis: Any) -> str:
    try:
        return datetime.fromtimestamp(int(millis) / 1000, UTC).isoformat(timespec="seconds")
    except (TypeError, ValueError):
        return ""


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
