"""What isolating term statistics per workspace costs, and what it leaves open.

    SULI_OPENSEARCH_URL=http://127.0.0.1:9200 python -m bench.isolation [--workspaces 100]

Three measurements, printed as one JSON object:
- cost: the same items (W workspaces x N items, FakeEmbedder) loaded into a shared index and
  with SULI_ISOLATE_WORKSPACES=true: shards, primary store bytes, and hybrid-search latency of
  random workspaces' principals, the two layouts interleaved round by round (ratio isolated /
  shared of the p50 and p99);
- leak: the planted-pair attack (two items in A that differ in one word each; which of the two
  words B's private items hold decides the order under shared statistics), the share of trials
  whose order follows B's secret: across workspaces on a shared index, across workspaces
  isolated, and across boards inside one isolated workspace (the residual isolation leaves);
- embedded: the same cross-workspace attack on the embedded store (one FTS5 table).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from opensearchpy import OpenSearch

from suli.backends.embedded import EmbeddedBackend
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.models import BoardAcl, Item, Principal
from suli.search_params import search_request
from suli.service import Searcher
from suli.settings import Settings

CONSONANTS = "bcdfghjklmnpqrstvwxz"  # no vowels: the stemmer leaves every word whole
WORDS = ("deploy", "rollback", "canary", "budget", "review", "migration", "incident", "runbook",
         "release", "pipeline")  # fmt: skip


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(CONSONANTS) for _ in range(10))


def _searcher(backend: Any, settings: Settings, emb: FakeEmbedder) -> Searcher:
    return Searcher(backend, emb, settings)


def _os_searcher(url: str, alias: str, home: Path, isolated: bool) -> Searcher:
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
    return _searcher(backend, s, emb)


def _load(searcher: Searcher, items: list[Item]) -> None:
    vectors = searcher.embedder.embed_documents([i.embed_text() for i in items])
    for start in range(0, len(items), 500):
        chunk = list(zip(items, vectors, strict=True))[start : start + 500]
        out = searcher.backend.upsert(chunk)
        assert not out.rejected, out.rejected
    searcher.backend.refresh()


def _corpus(workspaces: int, per: int, rng: random.Random) -> list[Item]:
    return [
        Item(
            f"itm_{n:04d}",
            f"ws_{w:03d}",
            " ".join(rng.sample(list(WORDS), 3)),
            body=" ".join(rng.choices(WORDS, k=30)),
        )
        for w in range(workspaces)
        for n in range(per)
    ]


def _index_stats(client: OpenSearch, prefix: str) -> dict[str, int]:
    stats = client.indices.stats(index=f"{prefix}*", metric="store,docs")
    shards = client.cat.shards(index=f"{prefix}*", format="json")
    return {
        "indices": len([i for i in stats["indices"] if not i.endswith("-acl")]),
        "shards": len([s for s in shards if "-acl" not in s["index"]]),
        "primary_store_bytes": sum(
            v["primaries"]["store"]["size_in_bytes"]
            for k, v in stats["indices"].items()
            if "-acl" not in k
        ),
    }


def _drop(client: OpenSearch, prefix: str) -> None:
    """Delete every index whose name starts with prefix, a few names per request (a URL that
    names a hundred indices is past the engine's 4 KB line limit)."""
    names = list(client.indices.get(index=f"{prefix}*", expand_wildcards="all"))
    for start in range(0, len(names), 20):
        client.indices.delete(index=",".join(names[start : start + 20]))


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cost(
    url: str, workspaces: int, per: int, rounds: int, home: Path, prefix: str
) -> dict[str, Any]:
    rng = random.Random(7)
    items = _corpus(workspaces, per, rng)
    principals = [Principal(f"prn_{w:03d}", f"ws_{w:03d}") for w in range(workspaces)]
    client = OpenSearch(hosts=[url], timeout=120)
    out: dict[str, Any] = {"workspaces": workspaces, "items": len(items)}
    layouts = {}
    prefixes = {}
    for name, isolated in (("shared", False), ("isolated", True)):
        alias = f"{prefix}-{name}-{uuid4().hex[:8]}"
        prefixes[name] = alias
        s = _os_searcher(url, alias, home, isolated)
        s.backend.put_principals(principals)
        t0 = time.perf_counter()
        _load(s, items)
        out[f"{name}_load_s"] = round(time.perf_counter() - t0, 1)
        layouts[name] = s
        out[name] = _index_stats(client, alias)
    ms: dict[str, list[float]] = {"shared": [], "isolated": []}
    for r in range(rounds):
        order = ["shared", "isolated"] if r % 2 == 0 else ["isolated", "shared"]
        for name in order:
            s = layouts[name]
            for q in range(20):
                who = s.principal(principals[(r * 20 + q) % workspaces].id)
                req = search_request(" ".join(rng.sample(list(WORDS), 2)))
                t0 = time.perf_counter()
                s.search(who, req)
                ms[name].append((time.perf_counter() - t0) * 1000)
    for name, xs in ms.items():
        out[f"{name}_p50_ms"] = round(statistics.median(xs), 2)
        out[f"{name}_p99_ms"] = round(_pct(xs, 0.99), 2)
    out["p50_ratio_isolated_over_shared"] = round(out["isolated_p50_ms"] / out["shared_p50_ms"], 3)
    out["p99_ratio_isolated_over_shared"] = round(out["isolated_p99_ms"] / out["shared_p99_ms"], 3)
    for s in layouts.values():
        s.backend.close()
    for alias in prefixes.values():
        _drop(client, alias)
    client.close()
    return out


def _plant(trials: int, seed: int, across: str) -> tuple[list[Item], list[tuple[str, str, str]]]:
    """A's pairs (workspace-wide in ws_a) and the secret holders: in ws_b (`workspaces`) or on
    a board of ws_a the attacker cannot see (`boards`)."""
    rng = random.Random(seed)
    items: list[Item] = []
    plan = []
    for n in range(trials):
        x, y = _word(rng), _word(rng)
        secret = rng.choice([x, y])
        plan.append((x, y, secret))
        items += [Item(f"itm_{n:03d}_a", "ws_a", "log", body=x),
                  Item(f"itm_{n:03d}_b", "ws_a", "log", body=y)]  # fmt: skip
        for k in range(rng.randint(1, 3)):
            if across == "workspaces":
                items.append(Item(f"itm_s{n:03d}_{k}", "ws_b", "log", body=f"{secret} private"))
            else:
                private = Item(f"itm_s{n:03d}_{k}", "ws_a", "log", body=f"{secret} private",
                               board="brd_private")  # fmt: skip
                items.append(private)
    return items, plan


def _leak_share(searcher: Searcher, items: list[Item], plan: list[tuple[str, str, str]]) -> float:
    searcher.backend.put_principals(
        [Principal("prn_a", "ws_a"), Principal("prn_b", "ws_b"), Principal("prn_owner", "ws_a")]
    )
    searcher.backend.put_acls([BoardAcl("brd_private", "ws_a", "Private", ("prn_owner",), ())])
    _load(searcher, items)
    who = searcher.principal("prn_a")
    follows = 0
    for n, (x, y, secret) in enumerate(plan):
        got = [r.id for r in searcher.search(who, search_request(f"{x} {y}", mode="text")).results]
        assert sorted(got) == [f"itm_{n:03d}_a", f"itm_{n:03d}_b"], got  # never the private ones
        rarer_first = f"itm_{n:03d}_{'b' if secret == x else 'a'}"
        follows += got[0] == rarer_first
    return follows / len(plan)


def leaks(url: str, trials: int, home: Path, prefix: str) -> dict[str, float]:
    out = {}
    for name, isolated, across in (
        ("across_workspaces_shared", False, "workspaces"),
        ("across_workspaces_isolated", True, "workspaces"),
        ("across_boards_isolated", True, "boards"),
    ):
        alias = f"{prefix}-leak-{uuid4().hex[:8]}"
        s = _os_searcher(url, alias, home, isolated)
        items, plan = _plant(trials, 11, across)
        out[name] = _leak_share(s, items, plan)
        s.backend.close()
        client = OpenSearch(hosts=[url], timeout=60)
        _drop(client, alias)
        client.close()
    # Half the trials follow the secret by chance when the order is the tie-break's (id order
    # puts `_a` first, and the secret is x or y at random): a share near 0.5 means no signal,
    # 1.0 a certain leak.
    return out


def embedded_leak(trials: int, home: Path) -> float:
    s = Settings(home=home, embedded_path=home / "iso.db", embedder="fake", backend="embedded")
    emb = FakeEmbedder()
    backend = EmbeddedBackend(s.sqlite_path, emb.dimension, model=emb.name)
    items, plan = _plant(trials, 11, "workspaces")
    share = _leak_share(_searcher(backend, s, emb), items, plan)
    backend.close()
    return share


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("SULI_OPENSEARCH_URL", "http://127.0.0.1:9200"))
    ap.add_argument("--workspaces", type=int, default=100)
    ap.add_argument("--items-per-workspace", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument(
        "--prefix", default="bench-iso", help="Names of the indices made (dropped after)."
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        result = {
            "load_before": os.getloadavg(),
            "cost": cost(
                args.url, args.workspaces, args.items_per_workspace, args.rounds, home, args.prefix
            ),
            "leak_share": leaks(args.url, args.trials, home, args.prefix),
            "embedded_leak_share_across_workspaces": embedded_leak(args.trials, home),
            "load_after": os.getloadavg(),
        }
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
