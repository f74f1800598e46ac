"""Zero-downtime reindex on the real 3-node cluster: queries and writes go on during the copy
and the swap, nothing goes missing; `suli reindex --rollback` brings the previous results back."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner
from opensearchpy import OpenSearch
from ops_support import (
    PRINCIPAL,
    QueryClients,
    duplicate_ids,
    env_for,
    items,
    latency_line,
    seed,
    settings_for,
    stored,
    wrong_content,
)

import devcluster
from cli.main import cli
from indexer.inventory import live_index
from indexer.reindex import Reindexer
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import Item
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

QUERY_CLIENTS = 8  # concurrent query clients during the reindex


class Writer(threading.Thread):
    """Adds, changes and deletes items through the alias in a loop, remembering what must be."""

    def __init__(self, s: Settings, expected: dict[str, Item]) -> None:
        super().__init__(daemon=True)
        embedder = FakeEmbedder()
        self.embedder = embedder
        self.backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
        self.expected = expected
        self.go = threading.Event()
        self.halt = threading.Event()
        self.rounds = 0
        self.retries = 0
        self.rejected: dict[str, str] = {}
        self.errors: list[str] = []
        self.victims = [i for i in expected if i.startswith("itm_")]  # never a marker item

    def _upsert(self, batch: list[Item]) -> None:
        vectors = self.embedder.embed_documents([it.embed_text() for it in batch])
        out = self.backend.upsert([(it, vectors[n]) for n, it in enumerate(batch)])
        self.retries += out.retries
        self.rejected.update(out.rejected)
        for it in batch:
            self.expected[it.id] = it

    def _change_and_delete(self, n: int, new: list[Item]) -> None:
        changed = self.expected[self.victims[2 * n]]
        self._upsert([*new, Item(changed.id, changed.workspace, f"changed {n}")])
        gone = self.victims[2 * n + 1]
        out = self.backend.delete(self.expected[gone].workspace, [gone])
        self.retries += out.retries
        self.rejected.update(out.rejected)
        self.expected.pop(gone)

    def run(self) -> None:
        self.go.wait()
        while not self.halt.is_set():
            n = self.rounds
            try:
                new = [
                    Item(f"new_{n}_{k}", "ws_acme", f"written during reindex {n} {k}")
                    for k in range(3)
                ]
                if 2 * n + 1 < len(self.victims):
                    self._change_and_delete(n, new)
                else:  # a slow copy outlasted the victims: adds only
                    self._upsert(new)
            except Exception as e:  # reported by the test, never swallowed
                self.errors.append(f"{e.__class__.__name__}: {e}")
            self.rounds += 1
            self.halt.wait(0.2)

    def stop(self) -> None:
        self.halt.set()
        self.go.set()
        self.join(timeout=300)
        self.backend.close()


def test_reindex_under_queries_and_writes_loses_nothing(
    three_node_cluster: devcluster.Cluster,
    make_index_name: Callable[[], str],
    tmp_path: Path,
) -> None:
    cluster = three_node_cluster
    cluster.wait_green()
    s = settings_for(cluster.urls, make_index_name(), tmp_path)
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    data = items(1000)
    seed(backend, embedder, data)
    expected = {it.id: it for it in data}
    writer = Writer(s, expected)
    copying: list[int] = []

    def progress(phase: str, done: int, total: int | None) -> None:
        if phase == "copy":
            copying.append(writer.rounds)
            if total and done >= total * 0.3:
                writer.go.set()  # writes start a third of the way into the copy

    clients = QueryClients(s, QUERY_CLIENTS)
    clients.start()
    writer.start()
    try:
        engine = Reindexer(backend, embedder, tmp_path / "rejects", on_progress=progress, page=100)
        plan = engine.plan(method="scan")
        assert (plan.re_embed, plan.docs) == (False, len(data))
        start = time.monotonic()
        report = engine.run(plan)
        end = time.monotonic()
        before = writer.rounds
        while writer.rounds < before + 3 and not writer.errors:  # some writes after the swap too
            writer.halt.wait(0.1)
    finally:
        writer.stop()
        stats = clients.stop()
    print(
        f"reindex ({end - start:.0f}s): {QUERY_CLIENTS} clients, "
        f"{latency_line(stats, start, end)}, failed {len(stats.failures)}; writes "
        f"{writer.rounds} rounds of 4 upserts + 1 delete ({writer.rounds * 5 / (end - start):.0f}"
        f"/s), re-sent {writer.retries}, caught up {report.caught_up}"
    )
    assert writer.errors == [] and writer.rejected == {}
    assert stats.failures == []
    assert clients.ok() > 0
    assert copying[-1] > 0  # writes really happened while the copy ran
    assert report.caught_up > 0 and report.deleted > 0
    assert report.verification["problems"] == []
    assert live_index(backend.client, s.index_alias) == report.target != plan.source
    client = backend.client
    client.indices.refresh(index=s.index_alias)
    docs = stored(client, s.index_alias)
    assert sorted(set(expected) - set(docs)) == []
    assert sorted(set(docs) - set(expected)) == []
    assert duplicate_ids(client, s.index_alias) == []
    assert wrong_content(docs, expected) == []
    backend.close()


QUERIES = ["deploy rollback", "incident latency", "saved searches", "billing retro", "zq1marker"]


def _results(searcher: Searcher) -> dict[str, list[str]]:
    principal = searcher.principal(PRINCIPAL)
    return {
        q: [r.id for r in searcher.search(principal, search_request(q, limit=25)).results]
        for q in QUERIES
    }


def test_rollback_restores_previous_index_and_results(
    three_node_cluster: devcluster.Cluster,
    make_index_name: Callable[[], str],
    tmp_path: Path,
) -> None:
    cluster = three_node_cluster
    # No replicas: a primary and its replica merge segments on their own, so they break score
    # ties in their own document order and may order equal-scored results differently.
    s = settings_for(cluster.urls, make_index_name(), tmp_path, replicas=0)
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    seed(backend, embedder, items(600))
    # The sample has many exact BM25 ties, broken by document order inside a shard; a merge
    # changes that order. One merged segment per shard, made visible now, keeps it fixed.
    backend.client.indices.forcemerge(index=s.index_alias, params={"max_num_segments": 1})
    backend.client.indices.refresh(index=s.index_alias)
    searcher = Searcher(backend, embedder, s)
    previous = live_index(backend.client, s.index_alias)
    before = _results(searcher)
    assert all(before.values())
    runner = CliRunner()
    env = env_for(s)
    # A new shape (one shard, so other BM25 statistics) and new vectors.
    out = runner.invoke(cli, ["reindex", "--shards", "1", "--re-embed", "--json"], env=env)
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body["plan"]["re_embed"] and body["plan"]["method"] == "scan"
    current = body["report"]["target"]
    assert live_index(backend.client, s.index_alias) == current != previous
    out = runner.invoke(cli, ["reindex", "--rollback", "--json"], env=env)
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert (body["rollback"]["previous"], body["rollback"]["written_since_swap"]) == (previous, 0)
    assert live_index(backend.client, s.index_alias) == previous
    assert _results(searcher) == before
    assert _write_blocked(backend.client, current) and not _write_blocked(backend.client, previous)
    backend.close()


def _write_blocked(client: OpenSearch, index: str) -> bool:
    got = client.indices.get_settings(index=index, name="index.blocks.write")
    return str(got[index]["settings"].get("index", {}).get("blocks", {}).get("write")) == "true"
