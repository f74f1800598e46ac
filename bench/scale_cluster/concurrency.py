"""The concurrency phase: closed-loop clients against `suli serve` and the native hybrid query
(bench.concurrency); not in the default phases, the nodes need the neural-search plugin."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from bench.clustered import WORKSPACE
from bench.scale_cluster.size import SizeRun
from suli.visibility import visibility_for

NEURAL_SEARCH = "org.opensearch.neuralsearch.plugin.NeuralSearch"  # its `_cat/plugins` component


def has_native_hybrid(client: OpenSearch) -> bool:
    """Whether every node runs neural-search, whose `hybrid` query the native side sends."""
    rows = client.cat.plugins(format="json", h="name,component")
    nodes = {r["name"] for r in client.cat.nodes(format="json", h="name")}
    with_it = {r["name"] for r in rows if r["component"] == NEURAL_SEARCH}
    return bool(nodes) and with_it == nodes


def concurrency(run: SizeRun) -> dict[str, Any]:
    """Closed-loop clients against `suli serve` (its own process: no GIL shared with the
    clients) and against OpenSearch's native hybrid query over the same index; the nodes
    need the neural-search plugin (`--plugins neural-search` with the cluster phase)."""
    from bench import concurrency as closed_loop  # imported late: it pulls in the service

    run.require_loaded()
    _, headers = run.http  # creates the principal's token
    token = headers["Authorization"].split()[1]
    texts, vecs = run.query_set
    vis = visibility_for(run.principal, run.backend.acls(WORKSPACE))
    env = {"SULI_OPENSEARCH_URL": run.url, "SULI_INDEX_ALIAS": run.alias,
           "SULI_ACL_INDEX": run.settings.acl_index,
           "SULI_MEANING_FLOOR": str(run.settings.meaning_floor)}  # fmt: skip
    native = has_native_hybrid(run.client)  # else (3.x here) Suli is measured alone
    with closed_loop.suli_service(env, workers=run.args.serve_workers) as suli_url:
        return dict(closed_loop.run_levels(
            suli_url, token, run.url.split(","), run.alias, texts, vecs, vis,
            levels=tuple(run.args.levels), seconds=run.args.concurrency_seconds,
            depth=run.settings.candidate_depth, native=native,
            settle=run.args.prime_settle,
        ))  # fmt: skip
