"""SULI_ISOLATE_WORKSPACES on a real node: a workspace's ranking learns nothing of another's.

The attack: workspace A plants two items that differ only in one word each (x in one, y in
the other) and searches "x y". With shared term statistics the item whose word is rarer in
the whole shard ranks first, so A learns whether B's private items hold x or y. Isolated,
A's index holds only A's items: both words are equally rare there, the scores tie and the
order is always the tie-break's (item id), whatever B holds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opensearchpy import OpenSearch

from cli.main import cli
from indexer.reindex import Reindexer
from suli.backends.opensearch import OpenSearchBackend
from suli.backends.opensearch.workspaces import workspace_alias
from suli.embedding import FakeEmbedder
from suli.models import Item, Principal
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

TRIALS = 200
CONSONANTS = "bcdfghjklmnpqrstvwxz"  # no vowels: the stemmer leaves every word whole


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(CONSONANTS) for _ in range(10))


def _plant(seed: int) -> tuple[list[Item], list[tuple[str, str, str]]]:
    """A's pairs and B's secrets: (x, y, the one of them B's items hold) per trial."""
    rng = random.Random(seed)
    items: list[Item] = []
    trials = []
    for n in range(TRIALS):
        x, y = _word(rng), _word(rng)
        secret = rng.choice([x, y])
        trials.append((x, y, secret))
        items += [Item(f"itm_{n:03d}_a", "ws_a", "log", body=x),
                  Item(f"itm_{n:03d}_b", "ws_a", "log", body=y)]  # fmt: skip
        items += [Item(f"itm_b{n:03d}_{k}", "ws_b", "log", body=f"{secret} private")
                  for k in range(rng.randint(1, 3))]  # fmt: skip
    return items, trials


def _searcher(url: str, alias: str, home: Path, isolated: bool) -> Searcher:
    s = Settings(
        opensearch_url=url,
        index_alias=alias,
        acl_index=f"{alias}-acl",
        home=home,
        embedder="fake",
        isolate_workspaces=isolated,
    )
    emb = FakeEmbedder()
    backend = OpenSearchBackend(s, emb.dimension, emb.name)
    backend.ensure_ready()
    backend.put_principals([Principal("prn_a", "ws_a"), Principal("prn_b", "ws_b")])
    return Searcher(backend, emb, s)


def _load(searcher: Searcher, items: list[Item]) -> None:
    vectors = searcher.embedder.embed_documents([i.embed_text() for i in items])
    out = searcher.backend.upsert(list(zip(items, vectors, strict=True)))
    assert not out.rejected and len(out.indexed) == len(items)
    searcher.backend.refresh()


def _orders(searcher: Searcher, trials: list[tuple[str, str, str]]) -> list[list[str]]:
    who = searcher.principal("prn_a")
    return [
        [r.id for r in searcher.search(who, search_request(f"{x} {y}", mode="text")).results]
        for x, y, _ in trials
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_planted_pair_learns_nothing_across_workspaces_when_isolated(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path, seed: int
) -> None:
    items, trials = _plant(seed)
    isolated = _searcher(opensearch_url, make_index_name(), tmp_path, isolated=True)
    _load(isolated, items)
    for n, order in enumerate(_orders(isolated, trials)):
        assert order == [f"itm_{n:03d}_a", f"itm_{n:03d}_b"], trials[n]

    # The same plant on a shared index: the order follows B's secret every time (the leak
    # the setting closes, so the check above could fail).
    shared = _searcher(opensearch_url, make_index_name(), tmp_path, isolated=False)
    _load(shared, items)
    for n, order in enumerate(_orders(shared, trials)):
        x, _, secret = trials[n]
        rarer_first = "b" if secret == x else "a"
        assert order[0] == f"itm_{n:03d}_{rarer_first}", trials[n]
    isolated.backend.close()
    shared.backend.close()


def test_each_workspace_gets_its_index_on_first_write_and_reads_only_it(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path, os_client: OpenSearch
) -> None:
    alias = make_index_name()
    searcher = _searcher(opensearch_url, alias, tmp_path, isolated=True)
    backend = searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    a, b = searcher.principal("prn_a"), searcher.principal("prn_b")
    # No index for ws_a yet: its searches answer, with nothing.
    empty = searcher.search(a, search_request("anything"))
    assert empty.results == () and empty.degraded == () and empty.total == 0
    assert backend.delete("ws_a", ["itm_x"]).missing == ("itm_x",)
    assert not os_client.indices.exists_alias(name=workspace_alias(alias, "ws_a"))

    _load(searcher, [Item("itm_1", "ws_a", "harbour crane"), Item("itm_1", "ws_b", "harbour")])
    for ws in ("ws_a", "ws_b"):
        got = os_client.count(index=workspace_alias(alias, ws))["count"]
        assert got == 1, ws
    assert os_client.count(index=alias)["count"] == 0  # the shared index holds nothing
    assert [r.title for r in searcher.search(a, search_request("harbour")).results] == [
        "harbour crane"
    ]
    assert [r.title for r in searcher.search(b, search_request("harbour")).results] == ["harbour"]
    assert backend.count() == 2
    assert sorted((i.workspace, i.id) for i in backend.all_items()) == [
        ("ws_a", "itm_1"),
        ("ws_b", "itm_1"),
    ]
    assert set(backend.workspace_aliases().values()) == {"ws_a", "ws_b"}
    wanted = [("ws_a", "itm_1"), ("ws_b", "itm_1"), ("ws_c", "itm_1")]  # ws_c: no index
    assert set(backend.stored_hashes(wanted)) == {("ws_a", "itm_1"), ("ws_b", "itm_1")}
    assert backend.delete("ws_b", ["itm_1"]).indexed == ("itm_1",)
    backend.refresh()
    assert searcher.search(b, search_request("harbour")).results == ()
    backend.close()


def test_reindex_and_rollback_work_on_a_workspace_index(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path, os_client: OpenSearch
) -> None:
    alias = make_index_name()
    searcher = _searcher(opensearch_url, alias, tmp_path, isolated=True)
    backend = searcher.backend
    assert isinstance(backend, OpenSearchBackend)
    _load(searcher, [Item(f"itm_{n}", "ws_a", f"buoy {n}") for n in range(30)])
    (view,) = backend.workspace_views()
    first = sorted(os_client.indices.get_alias(name=view.alias))
    engine = Reindexer(view, searcher.embedder, tmp_path / "rejects")
    report = engine.run(engine.plan())
    assert report.verification["problems"] == []
    after = sorted(os_client.indices.get_alias(name=view.alias))
    assert after != first and after[0].startswith(f"{view.alias}-v")
    assert (
        os_client.indices.get_mapping(index=after[0])[after[0]]["mappings"]["_meta"]["workspace"]
        == "ws_a"
    )
    a = searcher.principal("prn_a")
    assert searcher.search(a, search_request("buoy", limit=25)).total == 30
    back = engine.rollback(engine.plan_rollback())
    assert back.verification["problems"] == []
    assert sorted(os_client.indices.get_alias(name=view.alias)) == first
    assert searcher.search(a, search_request("buoy", limit=25)).total == 30
    backend.close()


def test_suli_reindex_rollback_and_status_cover_every_workspace_index(
    opensearch_url: str, make_index_name: Callable[[], str], tmp_path: Path, os_client: OpenSearch
) -> None:
    alias = make_index_name()
    searcher = _searcher(opensearch_url, alias, tmp_path, isolated=True)
    _load(
        searcher, [Item(f"itm_{n}", ws, f"pier {n}") for n in range(6) for ws in ("ws_a", "ws_b")]
    )
    env = {
        "SULI_OPENSEARCH_URL": opensearch_url,
        "SULI_INDEX_ALIAS": alias,
        "SULI_ACL_INDEX": f"{alias}-acl",
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(tmp_path),
        "SULI_ISOLATE_WORKSPACES": "true",
    }

    def suli(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, [*args, "--json"], env=env)
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.stdout))

    ws_aliases = {workspace_alias(alias, w) for w in ("ws_a", "ws_b")}
    before = {a: sorted(os_client.indices.get_alias(name=a)) for a in ws_aliases}
    status = suli("status")
    assert {r["alias"]: r["docs"] for r in status["workspaces"]} == dict.fromkeys(ws_aliases, 6)
    runs = suli("reindex")["aliases"]
    assert [r["plan"]["alias"] for r in runs] == [alias, *sorted(ws_aliases)]
    assert all(r["report"]["verification"]["problems"] == [] for r in runs)
    for a in ws_aliases:
        (now,) = os_client.indices.get_alias(name=a)
        assert [now] != before[a]
    status = suli("status")
    assert all(r["older"] == before[r["alias"]] for r in status["workspaces"])
    back = suli("reindex", "--rollback")["aliases"]
    assert {r["rollback"]["alias"] for r in back} == {alias, *ws_aliases}
    assert {a: sorted(os_client.indices.get_alias(name=a)) for a in ws_aliases} == before
    # Served from the indices rolled back to, each workspace its own six.
    for who in ("prn_a", "prn_b"):
        got = searcher.search(searcher.principal(who), search_request("pier", limit=25))
        assert got.total == 6 and got.degraded == ()
    searcher.backend.close()
