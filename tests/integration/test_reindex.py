"""`suli reindex`, `suli indices` and `suli status` on one real OpenSearch node.

Covered here (the 3-node behaviour under load is in tests/cluster/test_ops_*.py): the
server-side copy, a model change with re-embedding, resuming an interrupted copy, writes the
write block refuses landing in the new index, rollback with writes made since the swap,
refused documents, dry runs and the bad inputs of the commands.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy import OpenSearch

import mappings
from cli import sample
from cli.main import cli
from indexer.inventory import live_index, physical_indices, read_meta
from indexer.reindex import Reindexer
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.hnsw import Hnsw
from suli.embedding import Embedder, FakeEmbedder
from suli.errors import IndexingError, InvalidInput
from suli.models import Item
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

N = 300


@dataclass
class World:
    settings: Settings
    backend: OpenSearchBackend
    embedder: Embedder
    env: dict[str, str]
    tmp: Path

    def engine(self, embedder: Embedder | None = None, **kw: object) -> Reindexer:
        embedder = embedder or self.embedder
        backend = OpenSearchBackend(self.settings, embedder.dimension, embedder.name)
        return Reindexer(backend, embedder, self.tmp / "rejects", **kw)  # type: ignore[arg-type]

    def upsert(self, data: list[Item], embedder: Embedder | None = None) -> None:
        embedder = embedder or self.embedder
        backend = OpenSearchBackend(self.settings, embedder.dimension, embedder.name)
        vectors = embedder.embed_documents([it.embed_text() for it in data])
        out = backend.upsert([(it, vectors[n]) for n, it in enumerate(data)])
        assert not out.rejected
        backend.client.indices.refresh(index=self.settings.index_alias)
        backend.close()


@pytest.fixture
def world(
    opensearch_url: str,
    make_index_name: Callable[[], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[World]:
    """An alias over N sample items (fake embedder), with the sample's principals and ACLs."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "other.rejects.jsonl").write_text('{"line": 1}\n')
    monkeypatch.chdir(cwd)  # `suli status` reads $SULI_HOME/rejects, never the cwd
    alias = make_index_name()
    s = Settings(
        opensearch_url=opensearch_url,
        index_alias=alias,
        acl_index=f"{alias}-acl",
        embedder="fake",
        home=tmp_path,
    )
    embedder = FakeEmbedder()
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    backend.ensure_ready()
    ws = sample.build(N)
    backend.put_principals(ws.principals)
    backend.put_acls(ws.acls)
    env = {
        "SULI_OPENSEARCH_URL": opensearch_url,
        "SULI_INDEX_ALIAS": alias,
        "SULI_ACL_INDEX": f"{alias}-acl",
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(tmp_path),
    }
    w = World(s, backend, embedder, env, tmp_path)
    w.upsert(ws.items)
    yield w
    backend.close()


def _suli(w: World, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=w.env)
    return result.exit_code, result.stdout, result.stderr


def _ids(client: OpenSearch, index: str) -> set[str]:
    client.indices.refresh(index=index)
    resp = client.search(index=index, body={"size": 10_000, "_source": ["id"]})
    return {h["_source"]["id"] for h in resp["hits"]["hits"]}


def test_dry_run_changes_nothing_and_server_copy_swaps(world: World) -> None:
    client = world.backend.client
    before = [p.name for p in physical_indices(client, world.settings.index_alias)]
    code, out, _ = _suli(world, "reindex", "--dry-run", "--json")
    assert code == 0
    plan = json.loads(out)["plan"]
    assert (plan["method"], plan["re_embed"], plan["docs"]) == ("server", False, N)
    assert [p.name for p in physical_indices(client, world.settings.index_alias)] == before
    # A principal of before visibility documents (issue 11.4): the reindex builds its document.
    acl_index, vis = world.settings.acl_index, "vis:" + sample.build(N).principals[0].id
    client.delete(index=acl_index, id=vis, refresh=True)
    code, out, err = _suli(world, "reindex", "--json")
    assert code == 0, err
    assert client.exists(index=acl_index, id=vis)
    report = json.loads(out)["report"]
    assert report["copied"] == N and report["verification"]["problems"] == []
    assert live_index(client, world.settings.index_alias) == report["target"]
    assert _ids(client, report["target"]) == _ids(client, report["source"])
    meta = read_meta(client, report["target"])
    assert meta["mapping_version"] == mappings.mapping_version()
    assert meta["live_since"]["previous"] == report["source"]


def test_model_change_re_embeds_and_searches_with_the_new_model(world: World) -> None:
    new_model = FakeEmbedder(dimension=256)
    engine = world.engine(new_model)
    plan = engine.plan()
    assert plan.re_embed and plan.method == "scan" and plan.dimension == 256
    report = engine.run(plan)
    assert report.verification["problems"] == [] and report.copied == N
    meta = read_meta(world.backend.client, report.target)
    assert (meta["model"], meta["dimension"]) == ("fake-hash-256", 256)
    backend = OpenSearchBackend(world.settings, 256, new_model.name)
    searcher = Searcher(backend, new_model, world.settings)
    r = searcher.search(searcher.principal("prn_ana"), search_request("deploy", limit=5))
    assert r.results and not r.degraded  # the vector leg runs on 256-dimension vectors
    backend.close()


def test_interrupted_copy_resumes_where_it_stopped(world: World) -> None:
    class Crash(Exception):
        pass

    def crash_midway(phase: str, done: int, total: int | None) -> None:
        if phase == "copy" and done >= N // 2:
            raise Crash

    engine = world.engine(page=50, on_progress=crash_midway)
    plan = engine.plan(method="scan")
    with pytest.raises(Crash):
        engine.run(plan)
    client = world.backend.client
    (building,) = [p for p in physical_indices(client, world.settings.index_alias) if not p.live]
    assert building.reindex and building.reindex["phase"] == "copying"
    assert N // 2 <= building.reindex["copied"] < N and building.reindex["cursor"]
    with pytest.raises(InvalidInput) as refused:
        world.engine().plan()  # a second run must not start beside it
    assert refused.value.field == "resume"
    late = [Item("late_1", sample.WORKSPACE, "written while the copy was stopped")]
    world.upsert(late)
    code, out, err = _suli(world, "reindex", "--resume", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["plan"]["target"] == building.name
    assert live_index(client, world.settings.index_alias) == building.name
    assert "late_1" in _ids(client, building.name)
    assert len(_ids(client, building.name)) == N + 1


class _ResendSeen(logging.Handler):
    """Sets `seen` when the bulk layer logs a re-send round (its one WARNING per round)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("re-sending "):
            self.seen.set()


def test_writes_refused_by_the_block_land_in_the_new_index(world: World) -> None:
    """The mechanism the swap relies on: a blocked write is re-sent and follows the alias."""
    client = world.backend.client
    alias = world.settings.index_alias
    old = live_index(client, alias)
    new = world.backend.create_physical()
    client.indices.add_block(index=old, block="write")
    outcome: list[object] = []
    item = Item("during_block", sample.WORKSPACE, "written while the alias moves")
    vector = world.embedder.embed_documents([item.embed_text()])[0]
    backing_off = _ResendSeen()
    bulk_log = logging.getLogger(
        "suli.backends.opensearch"
    )  # the package: every layer logs below it
    bulk_log.addHandler(backing_off)
    try:
        writer = threading.Thread(
            target=lambda: outcome.append(world.backend.upsert([(item, vector)]))
        )
        writer.start()
        # The writer met the block: its re-send round is announced before its back-off sleep.
        assert backing_off.seen.wait(60), "the blocked write was never re-sent"
    finally:
        bulk_log.removeHandler(backing_off)
    client.indices.update_aliases(
        body={
            "actions": [
                {"remove": {"index": old, "alias": alias}},
                {"add": {"index": new, "alias": alias}},
            ]
        }
    )
    writer.join(timeout=120)
    (out,) = outcome
    assert out.indexed == ("during_block",) and out.rejected == {} and out.retries > 0  # type: ignore[attr-defined]
    assert "during_block" in _ids(client, new)
    assert "during_block" not in _ids(client, old)


def test_rollback_carries_over_writes_made_since_the_swap(world: World) -> None:
    client = world.backend.client
    alias = world.settings.index_alias
    searcher = Searcher(world.backend, world.embedder, world.settings)
    principal = searcher.principal("prn_ana")
    before = searcher.search(principal, search_request("incident", limit=10))
    code, out, err = _suli(world, "reindex", "--json")
    assert code == 0, err
    report = json.loads(out)["report"]
    world.upsert([Item("after_swap", sample.WORKSPACE, "zqafterswap written to the new index")])
    code, out, _ = _suli(world, "reindex", "--rollback", "--dry-run", "--json")
    assert code == 0
    assert json.loads(out)["rollback"]["written_since_swap"] == 1
    code, out, err = _suli(world, "reindex", "--rollback", "--json")
    assert code == 0, err
    assert live_index(client, alias) == report["source"]
    assert "after_swap" in _ids(client, report["source"])
    hits = searcher.search(principal, search_request("zqafterswap", limit=5)).results
    assert [r.id for r in hits] == ["after_swap"]
    after = searcher.search(principal, search_request("incident", limit=10))
    # The same items come back; their order may move among near-equal scores, because the
    # carried-over write changes the old index's term statistics (BM25 idf and lengths).
    assert {r.id for r in after.results} == {r.id for r in before.results}
    assert after.total == before.total
    # A second rollback goes forward again, to the index the first one left.
    code, out, err = _suli(world, "reindex", "--rollback", "--json")
    assert code == 0, err
    assert live_index(client, alias) == report["target"]


def test_rollback_to_another_model_needs_force_when_writes_would_be_lost(world: World) -> None:
    engine = world.engine(FakeEmbedder(dimension=256))
    report = engine.run(engine.plan())
    world.upsert([Item("new_model_item", sample.WORKSPACE, "after the swap")], FakeEmbedder(256))
    with pytest.raises(InvalidInput) as refused:
        world.engine(FakeEmbedder(dimension=256)).rollback(
            world.engine(FakeEmbedder(dimension=256)).plan_rollback()
        )
    assert refused.value.field == "force"
    assert live_index(world.backend.client, world.settings.index_alias) == report.target
    # With the previous model configured, the item is embedded again and carried over.
    back = world.engine()  # fake-hash-384, the previous index's model
    rplan = back.plan_rollback()
    assert rplan.mode == "re-embed"
    back.rollback(rplan)
    assert live_index(world.backend.client, world.settings.index_alias) == report.source
    assert "new_model_item" in _ids(world.backend.client, report.source)


def test_a_document_the_new_mapping_refuses_stops_before_the_swap(
    opensearch_url: str,
    make_index_name: Callable[[], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alias = make_index_name()
    s = Settings(
        opensearch_url=opensearch_url, index_alias=alias, acl_index=f"{alias}-acl", home=tmp_path
    )
    client = OpenSearch(hosts=[opensearch_url])
    # An older index whose `tags` were text: a 40 kB tag was fine there, but is an "immense
    # term" for the keyword `tags` of the current mapping.
    body = mappings.items_index(384, model="fake-hash-384")
    body["mappings"]["properties"]["tags"] = {"type": "text"}
    body["mappings"]["_meta"]["mapping_version"] = 1
    old = f"{alias}-v1-20250101000000000000"
    client.indices.create(index=old, body=body)
    client.indices.put_alias(index=old, name=alias)
    embedder = FakeEmbedder()
    docs = [Item(f"ok_{n}", sample.WORKSPACE, f"fine {n}") for n in range(20)]
    docs.append(Item("bad_tag", sample.WORKSPACE, "huge tag", tags=("x" * 40_000,)))
    backend = OpenSearchBackend(s, embedder.dimension, embedder.name)
    assert not backend.upsert(
        [(it, embedder.embed_query(it.embed_text())) for it in docs], index=old
    ).rejected
    engine = Reindexer(backend, embedder, tmp_path / "rejects")
    with pytest.raises(IndexingError):
        engine.run(engine.plan(method="scan"))
    assert live_index(client, alias) == old  # nothing swapped
    (rejects,) = (tmp_path / "rejects").glob("reindex-*.jsonl")
    (line,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert line["id"] == "bad_tag" and "immense term" in line["reason"]
    env = {"SULI_OPENSEARCH_URL": opensearch_url, "SULI_INDEX_ALIAS": alias}
    env |= {"SULI_HOME": str(tmp_path), "SULI_EMBEDDER": "fake"}
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "other.rejects.jsonl").write_text('{"line": 1}\n')
    monkeypatch.chdir(cwd)  # `suli status` reads $SULI_HOME/rejects, never the cwd
    status = json.loads(CliRunner().invoke(cli, ["status", "--json"], env=env).stdout)
    assert status["rejects"]["total"] == 1
    assert any("unfinished reindex" in n for n in status["notes"])
    backend.close()
    client.close()


def test_indices_lists_and_drops_only_old_indices(world: World) -> None:
    code, out, err = _suli(world, "reindex", "--json")
    assert code == 0, err
    report = json.loads(out)["report"]
    code, out, _ = _suli(world, "indices", "--json")
    rows = {r["name"]: r for r in json.loads(out)["indices"]}
    assert rows[report["target"]]["live"] and not rows[report["source"]]["live"]
    assert rows[report["source"]]["write_blocked"] and rows[report["target"]]["docs"] == N
    code, _, err = _suli(world, "indices", "drop", report["source"])
    assert code == 2 and "--yes" in err  # no terminal to ask: refused, nothing dropped
    code, out, _ = _suli(world, "indices", "--json")
    assert report["source"] in [r["name"] for r in json.loads(out)["indices"]]
    code, _, err = _suli(world, "indices", "drop", report["target"], "--yes")
    assert code == 2 and "live" in err
    code, _, err = _suli(world, "indices", "drop", world.settings.acl_index, "--yes")
    assert code == 2 and "not a physical index" in err
    code, _, err = _suli(world, "indices", "drop", report["source"], "--yes")
    assert code == 0, err
    code, out, _ = _suli(world, "indices", "--json")
    assert [r["name"] for r in json.loads(out)["indices"]] == [report["target"]]
    code, _, err = _suli(world, "reindex", "--rollback")
    assert code == 1 and "gone" in err


def test_status_reports_cluster_alias_model_and_rejects(world: World) -> None:
    rejects = world.tmp / "rejects"
    rejects.mkdir()
    (rejects / "run.rejects.jsonl").write_text('{"line": 3}\n{"line": 9}\n')
    code, out, _ = _suli(world, "status", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["cluster"]["status"] in ("green", "yellow") and body["nodes"]
    assert body["index"]["live"] and body["docs"] == N
    assert (body["index"]["model"], body["index"]["dimension"]) == ("fake-hash-384", 384)
    assert body["expected"]["mapping_version"] == mappings.mapping_version()
    assert body["rejects"]["total"] == 2
    code, out, _ = _suli(world, "status")
    assert code == 0 and "pending rejects: 2" in out and world.settings.index_alias in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["reindex", "--resume", "--rollback"], "rollback"),
        (["reindex", "--rollback", "--shards", "2"], "rollback"),
        (["reindex", "--rollback", "--merge"], "rollback"),
        (["reindex", "--force"], "force"),
        (["reindex", "--resume"], "resume"),
        (["reindex", "--shards", "0"], "shards"),
        (["reindex", "--method", "server", "--re-embed"], "method"),
    ],
)
def test_bad_reindex_options_exit_2_naming_the_option(
    world: World, args: list[str], field: str
) -> None:
    before = [p.name for p in physical_indices(world.backend.client, world.settings.index_alias)]
    code, _, err = _suli(world, *args)
    assert code == 2
    assert field in err
    assert [
        p.name for p in physical_indices(world.backend.client, world.settings.index_alias)
    ] == before


def _segments(client: OpenSearch, index: str) -> list[int]:
    """Searchable segments of each shard copy of index."""
    shards = client.indices.segments(index=index)["indices"][index]["shards"].values()
    return [copy["num_search_segments"] for copies in shards for copy in copies]


def test_merge_leaves_one_segment_per_shard_before_the_swap(world: World) -> None:
    client = world.backend.client
    alias = world.settings.index_alias
    seen: list[tuple[str, int, int | None]] = []
    before: list[int] = []

    def progress(phase: str, done: int, total: int | None) -> None:
        seen.append((phase, done, total))
        if phase == "copy":  # a refresh per page: many small segments, as a bulk load leaves
            target = next(p.name for p in physical_indices(client, alias) if not p.live)
            client.indices.refresh(index=target)
            before[:] = _segments(client, target)

    engine = world.engine(on_progress=progress, page=50)
    report = engine.run(engine.plan(method="scan", shards=2, merge=True))
    assert max(before) > 1  # setup: there was something to merge
    assert live_index(client, alias) == report.target  # the swap happened, after the merge
    assert _segments(client, report.target) == [1, 1]  # 2 shards, no replica on one node
    assert report.segments == 1 and report.merge_seconds is not None
    merges = [(done, total) for phase, done, total in seen if phase == "merge"]
    assert merges and merges[-1] == (2, 2)
    phases = [phase for phase, _, _ in seen]
    assert phases.index("merge") < phases.index("block")  # writes are not held while merging
    assert _ids(client, report.target) == _ids(client, report.source)


def test_merge_time_is_in_the_human_and_json_output(world: World) -> None:
    code, out, err = _suli(world, "reindex", "--merge", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["plan"]["merge"] is True
    code, out, err = _suli(world, "reindex", "--merge", "--json")
    assert code == 0, err
    report = json.loads(out)["report"]
    assert report["segments"] == 1 and report["merge_seconds"] >= 0
    code, out, err = _suli(world, "reindex", "--merge")
    assert code == 0, err
    assert "force-merge to 1 segment per shard" in err  # the plan, before the run
    assert "merged to 1 segment(s) per shard in " in out
    code, out, err = _suli(world, "reindex")
    assert code == 0, err
    assert "merged to" not in out  # without --merge, no merge and no line about one


def test_a_changed_vector_graph_is_noted_and_reindex_builds_it(world: World) -> None:
    """SULI_HNSW_* apply at index creation: status says the live graph differs, and `suli
    reindex` builds the new index with the configured one (the note then goes)."""
    world.env.update(SULI_HNSW_M="8", SULI_HNSW_EF_CONSTRUCTION="64", SULI_VECTOR_ENCODER="sq")
    code, out, err = _suli(world, "status", "--json")
    assert code == 0, err
    notes = [n for n in json.loads(out)["notes"] if "vector graph" in n]
    assert notes and "m=16" in notes[0] and "m=8" in notes[0] and "suli reindex" in notes[0]
    code, out, err = _suli(world, "reindex", "--json")
    assert code == 0, err
    target = json.loads(out)["report"]["target"]
    client = world.backend.client
    field = client.indices.get_mapping(index=target)[target]["mappings"]["properties"]["vector"]
    assert Hnsw.of_mapping(field) == Hnsw(8, 64, "sq")
    assert _ids(client, target) == {it.id for it in sample.build(N).items}
    code, out, err = _suli(world, "status", "--json")
    assert code == 0, err
    assert not [n for n in json.loads(out)["notes"] if "vector graph" in n]
