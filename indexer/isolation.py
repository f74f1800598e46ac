"""The per-workspace indices of SULI_ISOLATE_WORKSPACES, as `suli status` lists them."""

from __future__ import annotations

from typing import Any

import opensearchpy
from opensearchpy import OpenSearch

from suli.backends.opensearch.workspaces import INFIX
from suli.errors import BackendUnavailable


def workspace_indices(client: OpenSearch, alias: str) -> list[dict[str, Any]]:
    """One row per workspace alias (its live index, items, mapping, model; older indices
    kept for rollback), in two requests however many workspaces there are."""
    pattern = f"{alias}{INFIX}*"
    try:
        got = client.indices.get(index=pattern, expand_wildcards="open,closed")
        rows = client.cat.indices(index=pattern, format="json", bytes="b") if got else []
    except opensearchpy.NotFoundError:
        return []
    except (opensearchpy.ConnectionError, opensearchpy.TransportError) as e:
        raise BackendUnavailable(f"OpenSearch refused the workspace index listing: {e}") from e
    docs = {r["index"]: int(r.get("docs.count") or 0) for r in rows}
    health = {r["index"]: str(r.get("health") or "unknown") for r in rows}
    out = []
    for name, body in sorted(got.items()):
        for ws_alias in body.get("aliases") or {}:
            meta = body["mappings"].get("_meta") or {}
            index_settings = body["settings"]["index"]
            older = sorted(n for n in got if n.startswith(f"{ws_alias}-v") and n != name)
            out.append(
                {
                    "alias": ws_alias,
                    "workspace": meta.get("workspace"),
                    "index": name,
                    "docs": docs.get(name, 0),
                    "health": health.get(name, "unknown"),
                    "mapping_version": meta.get("mapping_version"),
                    "model": str(meta.get("model") or ""),
                    "dimension": meta.get("dimension"),
                    "write_blocked": str(index_settings.get("blocks", {}).get("write")) == "true",
                    "older": older,
                }
            )
    return sorted(out, key=lambda r: r["alias"])


def workspace_notes(rows: list[dict[str, Any]], expected: tuple[int, str, int]) -> list[str]:
    """What `suli status` says of them: indices this Suli would build otherwise, blocked ones."""
    version, model, dimension = expected
    stale = [
        r["alias"]
        for r in rows
        if (r["mapping_version"], r["model"], r["dimension"]) != (version, model, dimension)
    ]
    notes = []
    if stale:
        notes.append(
            f"{len(stale)} workspace index(es) differ from what this Suli builds (mapping, "
            f"model or dimension), e.g. {stale[0]}: run `suli reindex`"
        )
    notes += [f"{r['index']} is write-blocked: writes wait" for r in rows if r["write_blocked"]]
    return notes
