"""Load test of the query service: N items, a uvicorn service in a second process, C clients.

Indexes --items synthetic items (FakeEmbedder by default, for speed) into a fresh uuid-named
alias on the configured OpenSearch, starts `uvicorn app.main:create_app --factory` as a separate
process over it, then drives it with --clients concurrent clients for --duration seconds: a mix
of searches (GET and POST, with and without filters), browses and related-item calls, each as
one of 16+ principals with their own token. Reports QPS, p50/p90/p99 latency and errors.

Run from the repo root:
  .venv/bin/python -m bench.load [--items 10000] [--clients 16] [--duration 60] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from opensearchpy import OpenSearch

from indexer.pipeline import index_items
from suli.auth import create_token
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.models import BoardAcl, Principal
from suli.settings import Settings
from suli.validate import parse_item

WS = "ws_load"
BOARDS = 20
GROUPS = 8
_WORD_TEXT = (
    "deploy rollback pipeline schema index alias token cache budget latency replica shard "
    "cluster node vector search ranking outcome review approval draft release canary metric "
    "dashboard alert incident runbook migration database query filter facet snippet embed "
    "model batch queue worker retry backoff timeout deadline quota limit audit access board "
    "member group agent station workflow artifact record spec design test coverage fixture "
    "mapping analyzer stemmer tokenizer highlight fragment reindex snapshot restore backup "
    "storage disk memory cpu thread process socket proxy gateway router handler middleware"
)
WORDS = _WORD_TEXT.split()
OUTCOMES = ("approved", "completed", "in-progress", "superseded", "rejected", "failed", "abandoned")


def synthetic_items(n: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        title = " ".join(rng.choices(WORDS, k=rng.randint(3, 7)))
        body = " ".join(rng.choices(WORDS, k=rng.randint(25, 70)))
        board = None if i % 4 == 0 else f"brd_{i % BOARDS:02d}"
        out.append(
            {
                "id": f"itm_{i:06d}",
                "workspace": WS,
                "kind": "artifact" if i % 3 else "work-record",
                "title": title.capitalize(),
                "body": body,
                "outcome": OUTCOMES[i % len(OUTCOMES)],
                "board": board,
                "agent": f"prn_agent{i % 5}",
                "tags": rng.sample(WORDS, 2),
                "references": [f"itm_{rng.randrange(n):06d}"] if i % 5 == 0 else [],
                "last_activity_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T12:00:00Z",
                "url": f"https://app.example/items/itm_{i:06d}",
            }
        )
    return out


def build(settings: Settings, n_items: int, n_principals: int, seed: int) -> list[str]:
    """Index the items, principals and board ACLs; one token per principal."""
    rng = random.Random(seed)
    emb = FakeEmbedder()
    backend = open_backend(settings, emb)
    try:
        principals = [
            Principal(f"prn_user{i:02d}", WS, "person", (f"grp_{i % GROUPS}",))
            for i in range(n_principals)
        ]
        backend.put_principals(principals)
        backend.put_acls(
            [
                BoardAcl(f"brd_{b:02d}", WS, f"Board {b}", (), (f"grp_{b % GROUPS}",))
                for b in range(BOARDS)
            ]
        )
        t0 = time.perf_counter()
        items = synthetic_items(n_items, rng)
        done = 0

        def progress(summary: Any) -> None:
            nonlocal done
            if summary.read - done >= 2000 or summary.read == n_items:
                done = summary.read
                print(
                    f"  indexed {summary.read}/{n_items} ({time.perf_counter() - t0:.0f}s)",
                    flush=True,
                )

        summary = index_items(
            ((n, parse_item(d)) for n, d in enumerate(items)),
            backend,
            emb,
            on_progress=progress,
            batch_size=500,
        )
        if summary.indexed != n_items:
            raise SystemExit(f"indexing lost items: {summary.to_json()}")
        backend.refresh()
        print(f"indexed {n_items} items in {time.perf_counter() - t0:.1f}s", flush=True)
        return [create_token(backend, p.id) for p in principals]
    finally:
        backend.close()


def start_service(
    settings: Settings, home: str, port: int, workers: int
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SULI_BACKEND": "opensearch",
        "SULI_OPENSEARCH_URL": str(settings.opensearch_url),
        "SULI_INDEX_ALIAS": settings.index_alias,
        "SULI_ACL_INDEX": settings.acl_index,
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": home,
        "SULI_RATE_PER_MINUTE": "1000000",
        "SULI_RATE_PER_DAY": "100000000",
    }
    cmd = [
        sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    return subprocess.Popen(cmd, env=env)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit("the service exited during start-up")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise SystemExit("the service did not become ready")


def one_request(rng: random.Random, n_items: int) -> tuple[str, str, str, dict[str, Any]]:
    """(kind, method, path, params-or-body) for one request of the mix."""
    roll = rng.random()
    q = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
    if roll < 0.55:
        return "search", "GET", "/api/v1/search", {"q": q}
    if roll < 0.75:
        body = {"q": q, "outcome": ["approved", "completed"], "limit": 20, "explain": True}
        return "search+filters", "POST", "/api/v1/search", body
    if roll < 0.85:
        return "browse", "GET", "/api/v1/search", {"kind": "artifact"}
    return "related", "POST", "/api/v1/related", {"item_id": f"itm_{rng.randrange(n_items):06d}"}


async def client_loop(
    url: str,
    token: str,
    n_items: int,
    stop_at: float,
    warm_until: float,
    seed: int,
    out: dict[str, Any],
) -> None:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        while (now := time.monotonic()) < stop_at:
            kind, method, path, data = one_request(rng, n_items)
            t0 = time.perf_counter()
            try:
                if method == "GET":
                    r = await client.get(path, params=data)
                else:
                    r = await client.post(path, json=data)
                status = str(r.status_code)
                # 404 on related is not an error: the random item may be on a board we cannot see.
                ok = r.status_code == 200 or (kind == "related" and r.status_code == 404)
            except httpx.HTTPError as e:
                status, ok = type(e).__name__, False
            ms = (time.perf_counter() - t0) * 1000
            if now < warm_until:
                continue
            out["lat"].append(ms)
            out["kinds"][kind].append(ms)
            out["statuses"][status] += 1
            if not ok:
                out["errors"] += 1


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def drive(
    url: str, tokens: list[str], clients: int, duration: float, warmup: float, n_items: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lat": [],
        "kinds": collections.defaultdict(list),
        "statuses": collections.Counter(),
        "errors": 0,
    }
    start = time.monotonic()
    warm_until = start + warmup
    stop_at = warm_until + duration
    await asyncio.gather(
        *(
            client_loop(url, tokens[i % len(tokens)], n_items, stop_at, warm_until, 1000 + i, out)
            for i in range(clients)
        )
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--opensearch-url", default=os.environ.get("SULI_OPENSEARCH_URL", "http://127.0.0.1:9260")
    )
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds driven but not measured")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the index afterwards")
    args = ap.parse_args()

    name = f"load-{uuid.uuid4().hex[:12]}"
    client = OpenSearch(hosts=[args.opensearch_url], timeout=60)
    with TemporaryDirectory() as home:
        settings = Settings(
            backend="opensearch",
            opensearch_url=args.opensearch_url,
            index_alias=name,
            acl_index=f"{name}-acl",
            embedder="fake",
            home=Path(home),
        )
        proc = None
        try:
            print(f"index {name} on {args.opensearch_url}", flush=True)
            tokens = build(settings, args.items, max(16, args.clients), args.seed)
            url = f"http://127.0.0.1:{args.port}"
            proc = start_service(settings, home, args.port, args.workers)
            wait_ready(url, proc)
            print(
                f"driving {url} with {args.clients} clients for {args.duration:g}s (+{args.warmup:g}s warm-up)",
                flush=True,
            )
            out = asyncio.run(
                drive(url, tokens, args.clients, args.duration, args.warmup, args.items)
            )
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
            if not args.keep:
                found = client.indices.get(index=f"{name}*", ignore_unavailable=True)
                if found:
                    client.indices.delete(index=",".join(found), ignore=[404])
            client.close()

    lat = out["lat"]
    print(
        f"\nitems {args.items}, clients {args.clients}, workers {args.workers}, measured {args.duration:g}s"
    )
    print(f"requests {len(lat)}, QPS {len(lat) / args.duration:.1f}")
    print(
        f"latency ms: p50 {pct(lat, 50):.0f}, p90 {pct(lat, 90):.0f}, p99 {pct(lat, 99):.0f}, max {max(lat, default=0):.0f}, mean {statistics.fmean(lat) if lat else 0:.0f}"
    )
    for kind, values in sorted(out["kinds"].items()):
        print(
            f"  {kind:15s} n={len(values):6d}  p50 {pct(values, 50):6.0f}  p99 {pct(values, 99):6.0f}"
        )
    print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(out["statuses"].items())))
    print(f"errors: {out['errors']}")
    return 0 if out["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
