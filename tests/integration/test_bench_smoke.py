"""A tiny run of each bench of the suite (bench/README.md) against the real node, so the
benchmarks do not rot.

Sizes are a few documents and queries: these runs check that the scripts work and report
what they claim, never how fast anything is (speed lives in bench/RESULTS.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

import devcluster
from bench import (
    concurrency,
    core_cpu,
    depth_bound,
    embedded,
    engine_cpu,
    floor,
    indexing_scale,
    isolation,
    native_hybrid,
    overhead,
    reindex,
    scale_cluster,
    typos,
)
from bench.nfcorpus import WORKSPACE, load_items, load_qrels, load_queries
from bench.scale_cluster.concurrency import has_native_hybrid
from suli.auth import create_token
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import build_embedder
from suli.settings import Settings
from suli.visibility import visibility_for

pytestmark = pytest.mark.model


@pytest.fixture
def tiny_corpus(opensearch_url: str) -> Iterator[str]:
    """An alias holding the first 30 NFCorpus documents; dropped afterwards."""
    alias = f"test-{uuid.uuid4().hex[:8]}"
    backend = OpenSearchBackend(
        Settings(opensearch_url=opensearch_url, index_alias=alias, acl_index=f"{alias}-acl"), 384
    )
    backend.ensure_ready()
    items = load_items(30)
    vectors = build_embedder("minilm", overhead.CACHE).embed_documents(
        [it.embed_text() for it in items]
    )
    assert not backend.upsert(list(zip(items, vectors, strict=True))).rejected
    backend.refresh()
    yield alias
    client = OpenSearch(opensearch_url)
    names = set(client.indices.get_alias(name=alias))
    for extra in (f"{alias}-o-acl", f"{alias}-acl"):  # alias -o goes with the index
        if client.indices.exists(index=extra):
            names.add(extra)
    client.indices.delete(index=",".join(names))


def test_overhead_reports_every_side(opensearch_url: str, tiny_corpus: str) -> None:
    report = overhead.main(
        ["--url", opensearch_url, "--source-alias", tiny_corpus, "--alias", f"{tiny_corpus}-o",
         "--queries", "3", "--rounds", "1", "--profile"]
    )  # fmt: skip
    assert report["docs"] == 30
    assert "Ordered by: cumulative time" in report["profile"]
    assert set(report["sides"]) == {"raw_msearch", "suli_core", "suli_http"}
    assert all(s["n"] == 3 for s in report["sides"].values())
    assert report["sides"]["raw_msearch"]["p50_ratio"] == 1.0
    assert "msearch" in report["core_phases_p50_ms"]


def test_native_hybrid_asserts_the_same_top10(neural_search_cluster: devcluster.Cluster) -> None:
    """On a node started as `--start-node` starts it (neural-search 2.19.1.0 from Maven
    Central), compares OpenSearch's hybrid + RRF with Suli's fusion (the bench asserts the
    top 10)."""
    report = native_hybrid.main(
        ["--url", neural_search_cluster.url, "--limit-docs", "60", "--queries", "4",
         "--rounds", "1"]
    )  # fmt: skip
    assert report["docs"] == 60
    assert report["mean_top10_overlap"] > 0.9  # equal but for ties at the 10th place
    assert set(report["sides"]) == {"native_hybrid_rrf", "suli_fusion"}


def test_indexing_scale_profiles_the_model_and_times_workers_and_reuse(
    opensearch_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    indexing_scale.main(["profile", "--passages", "8"])
    indexing_scale.main(["workers", "--passages", "8", "--workers", "1"])
    indexing_scale.main(["reupsert", "--url", opensearch_url, "--items", "60", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "session (floor)" in out and "embed_documents / floor" in out
    assert "index_items --workers 1" in out
    assert "60 unchanged items" in out and "re-upsert / helpers.bulk throughput" in out
    assert not OpenSearch(opensearch_url).indices.get(index="bench-reuse-*")  # cleaned up


def test_scale_cluster_runs_every_phase_on_the_test_node(
    opensearch_url: str, tmp_path: Path
) -> None:
    """2000 clustered items on the shared node (replicas 0: one node), 20 queries: every phase
    reports, the load and the writer's items are counted, recall is a share."""
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "results.jsonl"
    n = 2000
    try:
        report = scale_cluster.main(
            ["--url", opensearch_url, "--sizes", str(n), "--replicas", "0", "--prefix", prefix,
             "--data-root", str(tmp_path / "data"), "--centres", "50", "--queries", "20",
             "--rounds", "1", "--warmup", "2", "--settle-quiet", "1", "--write-warmup", "1", "--out", str(out)]
        )  # fmt: skip
        cpu = engine_cpu.main(["--url", opensearch_url, "--n", str(n), "--prefix", prefix,
                               "--queries", "8", "--rounds", "1"])  # fmt: skip
        core = core_cpu.main(["--url", opensearch_url, "--n", str(n), "--prefix", prefix,
                              "--queries", "8", "--rounds", "2"])  # fmt: skip
        depth = depth_bound.main(["--url", opensearch_url, "--n", str(n), "--prefix", prefix,
                                  "--queries", "8"])  # fmt: skip
    finally:
        OpenSearch(opensearch_url).indices.delete(index=f"{prefix}-*")
    # The node has no neural-search: Suli's requests only, each kind replayed over its requests.
    assert (cpu["native"], cpu["legs_requests"]) == (False, 8) and 0 < cpu["page_requests"] <= 8
    kinds = ("suli_legs", "suli_legs_exact", "suli_page", "suli_page_searched",
             "suli_page_highlighted")  # fmt: skip
    assert set(kinds) <= set(cpu) and "native_hybrid" not in cpu
    for kind in kinds:
        assert cpu[kind]["cpu_ms_median"] >= 0 and cpu[kind]["wall_ms_median"] > 0
    # The legs by part (#34 item 5): each kind replayed over the same 8 legs' requests.
    for kind in (
        "legs_text_only",
        "legs_vector_only",
        "legs_no_typos",
        "legs_boards_inline",
        "legs_depth_half",
        "legs_no_prefix",
        "legs_no_fuzzy",
        "legs_typos_constant",
        "legs_typos_expanded",
        "legs_typos_expanded_stems",
        "legs_boards_lookup",
        "legs_fuzzy",
    ):
        assert cpu[kind]["wall_ms_median"] > 0, kind
    # Corrections sent as the terms the engine's rewrite reaches answer as the fuzzy clauses do.
    assert cpu["legs_typos_expanded_same_hits_as_suli_legs"] == "8/8"
    assert cpu["suli_legs_same_hits_as_legs_fuzzy"] == "8/8" and cpu["corrections_settled"]
    # Candidate depth: every query with a page counted, each share a fraction.
    assert 0 < depth["queries"] <= 8 and set(depth["depths"]) == {"25", "50", "75"}
    for d in depth["depths"].values():
        assert 0 <= d["same_page_anyway"] <= 1 and 0 <= d["bound_holds"] <= 1
    assert cpu["suli_search_cpu_ms"] == round(
        cpu["suli_legs"]["cpu_ms_median"] + cpu["suli_page"]["cpu_ms_median"], 2
    )
    assert cpu["suli_search_cpu_ms_before"] == round(
        cpu["suli_legs_exact"]["cpu_ms_median"] + cpu["suli_page_highlighted"]["cpu_ms_median"], 2
    )
    assert 0 <= cpu["pages_with_words_check"] <= cpu["page_requests"]
    # Replayed from the tape (the same results, else it stops): two requests a search.
    assert 0 < core["queries"] <= 8 and 1 <= core["requests_per_search"] <= 2  # distinct texts
    assert len(core["cpu_ms_per_search"]) == 2 and core["cpu_ms_median"] > 0
    assert report["errors"] == []
    rows = {r["phase"]: r for r in report["rows"]}
    assert list(rows) == ["cluster", "load", "settle", "latency", "writes", "recall",
                          "resources", "growth"]  # fmt: skip
    assert [json.loads(line)["phase"] for line in out.read_text().splitlines()] == list(rows)
    assert all(len(r["load_avg_start"]) == 3 and len(r["load_avg_end"]) == 3 for r in rows.values())
    assert rows["cluster"]["data_nodes"] >= 1 and rows["cluster"]["nodes"]
    load = rows["load"]
    assert load["loaded"] == n and load["items"] == n and load["items_per_s"] > 0
    assert load["acls_written"] == 1000 and load["segments"]["total"] >= 1
    assert rows["settle"]["timed_out"] is False
    for phase in ("latency", "writes"):
        sides = rows[phase]["sides"]
        assert set(sides) == {"raw_msearch", "raw_legs_and_page", "suli_core", "suli_http"}
        assert all(s["n"] == 20 and s["p50_ms"] > 0 for s in sides.values())
        assert {"acl", "msearch", "vector_took"} <= set(rows[phase]["core_phases_p50_ms"])
    writes = rows["writes"]
    assert writes["writer"]["indexed"] > 0 and writes["write_failures"] == 0
    assert writes["deleted_after"] == writes["writer"]["indexed"]  # the index holds n again
    levels = rows["recall"]["levels"]
    assert list(levels) == ["prn_v30", "prn_v10", "prn_v1", "prn_v01"]
    assert [lv["visible_items"] for lv in levels.values()] == [600, 200, 20, 2]
    assert all(0 <= lv["min"] <= lv["mean"] <= 1 for lv in levels.values())
    res = rows["resources"]
    assert res["docs"] == n and res["store_total_mb"] > 0
    assert all(nd["heap_used_mb"] > 0 for nd in res["nodes"].values())
    assert "skipped" in rows["growth"]  # one size: nothing to grow from


def test_scale_cluster_concurrency_measures_suli_alone_without_neural_search(
    opensearch_url: str, tmp_path: Path
) -> None:
    """The test node has no neural-search (the 3.5 line here has none): the concurrency phase
    measures `suli serve` alone, with no native side and no ratio, instead of failing."""
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    try:
        report = scale_cluster.main(
            ["--url", opensearch_url, "--sizes", "300", "--replicas", "0", "--prefix", prefix,
             "--data-root", str(tmp_path / "data"), "--centres", "10", "--queries", "4",
             "--phases", "load", "concurrency", "--levels", "1", "--concurrency-seconds", "1",
             "--serve-workers", "1", "--prime-settle", "0", "--out", str(tmp_path / "rows.jsonl")]
        )  # fmt: skip
    finally:
        OpenSearch(opensearch_url).indices.delete(index=f"{prefix}-*")
    assert report["errors"] == []
    assert not has_native_hybrid(OpenSearch(opensearch_url))
    row = {r["phase"]: r for r in report["rows"]}["concurrency"]
    assert row["prime_errors"] == {"suli_http": {}, "suli_http_get": {}}
    (level,) = row["levels"]
    assert "native_hybrid" not in level and level["qps_ratio_suli_over_native"] is None
    for side in ("suli_http", "suli_http_get"):  # POST with a body, GET with the query in the URL
        got = level[side]
        assert got["errors"] == 0 and got["ok"] == got["requests"] > 0 and got["qps"] > 0


def test_concurrency_reports_qps_latency_and_no_errors_on_both_sides(
    neural_search_cluster: devcluster.Cluster,
) -> None:
    """`suli serve` in its own process and the native hybrid query, 1 then 2 closed-loop
    clients for 2 s each: every field present and sane, no error on either side."""
    url, alias = neural_search_cluster.url, "bench-hybrid"
    assert has_native_hybrid(OpenSearch(url))  # so the scale bench's concurrency phase has both
    backend = native_hybrid.ensure_corpus(url, alias, 60)  # shared with the test above
    backend.put_principals([overhead.PRINCIPAL])
    token = create_token(backend, overhead.PRINCIPAL.id)
    backend.refresh()
    queries = list(load_queries(set(load_qrels("test"))).values())[:4]
    vis = concurrency.visibility_of_token(url, alias, f"{alias}-acl", token)
    assert vis == visibility_for(overhead.PRINCIPAL, backend.acls(WORKSPACE))
    env = {"SULI_OPENSEARCH_URL": url, "SULI_INDEX_ALIAS": alias, "SULI_ACL_INDEX": f"{alias}-acl"}
    with concurrency.suli_service(env) as suli_url:
        report = concurrency.run_levels(
            suli_url, token, url, alias, queries, overhead.query_vectors(queries), vis,
            levels=(1, 2), seconds=2, warmup=0.3,
        )  # fmt: skip
    assert report["prime_errors"] == {"suli_http": {}, "suli_http_get": {}, "native_hybrid": {}}
    assert [row["clients"] for row in report["levels"]] == [1, 2]
    for row in report["levels"]:
        for side in ("suli_http", "suli_http_get", "native_hybrid"):
            got = row[side]
            assert (got["errors"], got["warmup_errors"], got["error_kinds"]) == (0, 0, {}), got
            assert got["ok"] == got["requests"] > 0 and got["warmup_requests"] > 0, got
            assert got["elapsed_s"] >= 2
            assert got["qps"] == pytest.approx(got["ok"] / got["elapsed_s"], rel=0.01)
            assert got["qps"] > 0
            assert 0 < got["p50_ms"] <= got["p99_ms"]
            assert got["client_cpu_s"] > 0 and got["client_cores"] > 0
        assert row["qps_ratio_suli_over_native"] == round(
            row["suli_http"]["qps"] / row["native_hybrid"]["qps"], 3
        )
        assert row["qps_ratio_suli_get_over_native"] == round(
            row["suli_http_get"]["qps"] / row["native_hybrid"]["qps"], 3
        )


def test_isolation_bench_measures_cost_and_leaks_on_a_tiny_run(
    opensearch_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"test-iso-{uuid.uuid4().hex[:8]}"
    isolation.main(["--url", opensearch_url, "--workspaces", "3", "--items-per-workspace", "4",
                    "--rounds", "2", "--trials", "12", "--prefix", prefix])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    cost = out["cost"]
    assert cost["items"] == 12
    assert cost["shared"]["indices"] == 1
    assert cost["isolated"]["indices"] == 4  # the (empty) shared index plus one per workspace
    assert cost["isolated"]["shards"] > cost["shared"]["shards"]
    leak = out["leak_share"]
    assert leak["across_workspaces_shared"] == 1.0  # shared statistics: a certain leak
    assert leak["across_boards_isolated"] == 1.0  # the residual isolation leaves
    assert out["embedded_leak_share_across_workspaces"] == 1.0
    assert not OpenSearch(opensearch_url).indices.get(index=f"{prefix}-*")


def test_typos_bench_reports_both_sets_and_the_clauses_help_typod_queries(tmp_path: Path) -> None:
    """The word-leg typo bench on the embedded store (NFCorpus dev, fake vectors): both query
    sets measured with the clauses off and on, and on the typo'd copy they recover score."""
    report = typos.main(["--backend", "embedded", "--db", str(tmp_path / "typos.db")])
    assert report["queries"] > report["changed"] > 0
    for name in ("clean", "typo"):
        got = report[name]
        assert 0 < got["ndcg@10 before"] <= 1 and 0 < got["ndcg@10 after"] <= 1
        assert got["p50 ms before"] > 0 and got["p50 ms after"] > 0
    assert report["typo"]["ndcg@10 after"] > report["typo"]["ndcg@10 before"]
    assert report["recovered"] == round(
        report["typo"]["ndcg@10 after"] / report["clean"]["ndcg@10 after"], 3
    )


def test_reindex_bench_times_each_method_under_queries(opensearch_url: str) -> None:
    """Three reindexes of 60 sample items (server copy, scan, scan re-embedding), each under a
    search loop; every index it made is dropped."""
    report = reindex.main(["--url", opensearch_url, "--items", "60", "--model-items", "0"])
    runs = report["runs"]
    assert [(r["method"], r["re_embed"]) for r in runs] == [
        ("server", False), ("scan", False), ("scan", True)
    ]  # fmt: skip
    for run in runs:
        assert run["items"] == 60 and run["items_per_s"] > 0
        assert run["queries"]["queries"] > 0 and run["queries"]["failed"] == 0
    assert not OpenSearch(opensearch_url).indices.get(index="bench-reindex-*")


def test_floor_bench_reports_every_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor calibration on 30 NFCorpus documents with the fake embedder: every floor of
    the grid reported, the nonsense set counted on both stores."""
    monkeypatch.setattr(floor, "CACHE", tmp_path / "vectors.sqlite")
    report = floor.main(
        ["--db", str(tmp_path / "nf.db"), "--embedder", "fake", "--limit-docs", "30", "--json"]
    )
    assert [r["floor"] for r in report["floors"]] == floor.FLOORS
    n = len(floor.nonsense_queries())
    for r in report["floors"]:
        assert 0 <= r["nonsense_with_results_sample"] <= n
        assert 0 <= r["nonsense_with_results_nfcorpus"] <= n
        assert 0 <= r["dev_ndcg@10"] <= 1
    assert report["dev_no_floor"]["queries"] > 0


def test_embedded_bench_times_every_kind_of_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedded.main(["--sizes", "300", "--queries", "3", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    for kind in ("hybrid search (both legs)", "text leg only", "vector leg only",
                 "facets, repeated", "vector search after a write"):  # fmt: skip
        assert kind in out, kind
    assert "load average" in out
