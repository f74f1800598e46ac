"""Scale bench on a 3-node cluster with replicas: load, steady state, writes, recall, resources.

The run the lead makes, alone on a quiet machine (each size loads once, then is reused):

    python -m bench.scale_cluster --sizes 100000 1000000 --out bench/results/scale_cluster.jsonl
    python -m bench.scale_cluster --sizes 1000000 --kind uniform --out ...     # uniform vectors
    python -m bench.scale_cluster --sizes 1000000 --phases settle latency     # resume later
    python -m bench.scale_cluster --url http://host:9200 --sizes 100000       # own cluster
    python -m bench.scale_cluster --sizes 100000 --no-load-replicas --no-load-refresh
                                            # load with replicas 1 and a 1 s refresh throughout

Phases (`--phases`, in this order; each prints one JSON line to stdout and appends it to
`--out`, progress goes to stderr; a failed phase is recorded with `error` and the run goes on,
except when the cluster or the load fails):

- cluster: start (or reuse) a devcluster of `--nodes` nodes in its own state dir (default
  ~/.cache/suli/bench-cluster, ports 9241-9243, `--heap` 2g, the newest JDK >= 21 that
  devcluster picks), or use `--url`. Reports the JDK per node, whether the node was started with
  jdk.incubator.vector and whether its log says "Java vector incubator API enabled".
  Without this phase and without `--url` the cluster in the state dir must already run.
- load: the data set of bench.clustered (generated once, cached), an index created by Suli's
  OpenSearchBackend (alias `<prefix>-<kind>-<n>`, `--shards` default one per data node,
  `--replicas` 1), filled with Backend.upsert in batches from `--load-threads` threads, with
  replicas 0 and refresh_interval -1 during the load (OpenSearch's bulk-load advice), then the
  index's own settings back. Reports items/s, seconds to green, segments. An index holding
  exactly n items is reused; an interrupted load resumes from its checkpoint (in
  `<data-root>/progress/`). Board ACLs (1000 boards) and the LEVELS principals are written too.
- settle: waits, without force-merge, until the index reports no running merge for
  `--settle-quiet` seconds (default 60); reports the wait and the segments per shard.
- latency: `--queries` real NFCorpus questions (real MiniLM vectors, precomputed) as principal
  `--principal`: Suli core (Searcher.search), Suli HTTP (the real app under uvicorn) and raw
  `_msearch` of the same two bodies, interleaved query by query; p50/p99, ratios to raw, the
  core's phase clocks.
- writes: the latency phase again while another process feeds `--write-rate` new items a
  second through the indexer (indexer.pipeline.index_stream over a pipe, lines carrying their
  own `vector` and `vector_model`); reports the achieved rate and failures. The written items
  (ids `itm_w...`) are deleted afterwards, so the index holds n items again.
- recall: filtered recall@10 of the vector leg exactly as Suli builds it (visibility inside
  the k-NN clause, k = candidate depth) against an exact numpy top 10 over the items each
  principal of bench.clustered.LEVELS may see (30 / 10 / 1 / 0.1 %); mean and minimum.
- resources: heap used/max and RSS per node, store size of the index (primaries, total) and
  bytes per million items.
- concurrency: NOT in the default phases (needs `--plugins neural-search` on the nodes):
  bench.concurrency.run_levels against `suli serve` and the native hybrid query.
- growth: p50/p99 growth from the smallest to the largest size in `--out` (latency and
  writes phases of this kind), per side, and a projection to 10M items (latency on the power
  law through those sizes, load hours at the largest load's rate, disk at its bytes per item).

Every phase records os.getloadavg() at its start and end.

One module per phase (cluster, load, settle, latency, writes, recall, resources, concurrency,
growth); size.py holds what the phases of one size share, record.py the results file and run.py
the command line.
"""

from bench.scale_cluster.run import main

__all__ = ["main"]
