"""Schemathesis against the running query service: generated requests from its own OpenAPI spec.

Starts the app under uvicorn (a thread of this process) over a fresh uuid-named index on the
configured OpenSearch (or a fresh embedded file with --backend embedded), seeds a small world,
then sends generated requests (valid and invalid) to every operation until --requests have been
sent or --time-box seconds have passed. It reports the status counts and every failed check; the
run fails on any 5xx other than the documented 503/504 fault paths, on an undocumented status,
on a 4xx whose body is not the one JSON error shape, on a body that does not match its
documented schema, or on a wrong content type. tests/api/test_fuzz.py runs the same loop in CI.

Run from the repo root:
  .venv/bin/python -m bench.fuzz_api [--backend opensearch|embedded] [--opensearch-url URL]
      [--requests 1000] [--seed 1] [--time-box 600]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Literal

import hypothesis
import hypothesis.errors
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given
from opensearchpy import OpenSearch
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from indexer.pipeline import index_items
from suli.auth import create_token
from suli.core import open_backend
from suli.embedding import FakeEmbedder
from suli.models import BoardAcl, Principal
from suli.service import Searcher
from suli.settings import Settings
from suli.validate import parse_item

WS = "ws_fuzz"
# OpenSearch down / past the deadline: documented answers, not bugs
DOCUMENTED_FAULTS = frozenset({503, 504})
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


def seed(settings: Settings) -> dict[str, str]:
    """A small world: three principals, two boards, 30 items; tokens for a reader and an admin."""
    emb = FakeEmbedder()
    searcher = Searcher(open_backend(settings, emb), emb, settings)
    b = searcher.backend
    try:
        b.put_principals(
            [
                Principal("prn_reader", WS, "person", ("grp_a",)),
                Principal("prn_admin", WS, "person", ()),
                Principal("prn_other", WS, "agent", ()),
            ]
        )
        b.put_acls(
            [BoardAcl("brd_a", WS, "A", (), ("grp_a",)), BoardAcl("brd_b", WS, "B", ("prn_other",))]
        )
        words = ["deploy", "rollback", "schema", "index", "token", "cache", "alias", "budget"]
        items = [
            parse_item(
                {
                    "id": f"itm_{i:03d}",
                    "workspace": WS,
                    "title": f"{words[i % 8]} {words[(i * 3) % 8]} note {i}",
                    "body": " ".join(words[(i + k) % 8] for k in range(12)),
                    "board": [None, "brd_a", "brd_b"][i % 3],
                    "outcome": ["approved", "failed", "in-progress", None][i % 4],
                    "tags": [words[i % 8]],
                    "references": [f"itm_{(i + 1) % 30:03d}"],
                    "last_activity_at": f"2026-01-{1 + i % 28:02d}T10:00:00Z",
                }
            )
            for i in range(30)
        ]
        summary = index_items(list(enumerate(items)), b, emb)
        assert summary.indexed == 30, summary.to_json()
        b.refresh()
        return {
            "reader": create_token(b, "prn_reader"),
            "admin": create_token(b, "prn_admin", admin=True),
        }
    finally:
        b.close()


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """The app under uvicorn on a free port, in a thread; yields its base URL."""
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("uvicorn did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


class TimeBoxOver(Exception):
    """Raised inside a generated case once the run's time box is spent: stops generation."""


def error_shape(response: Any) -> str | None:
    """Why a 4xx body is not the one JSON error shape {"error": {"code", "message"[, "field"]}}."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} body is not JSON: {response.text[:200]!r}"
    err = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(err, dict) and isinstance(err.get("code"), str) and err.get("message")):
        return f"{response.status_code} body lacks error.code/error.message: {response.text[:300]}"
    if not isinstance(err["message"], str) or not isinstance(err.get("field", ""), str):
        return f"{response.status_code} error.message/field not strings: {response.text[:300]}"
    return None


class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.statuses: collections.Counter[int] = collections.Counter()
        self.by_op: collections.Counter[str] = collections.Counter()
        self.failures: dict[str, str] = {}  # first failure per (operation, kind)
        self.server_errors = 0
        self.transport_errors = 0


def fuzz_operation(
    op: Any,
    mode: GenerationMode,
    n: int,
    headers: dict[str, str],
    tally: Tally,
    seed_: int,
    end: float = float("inf"),
    faults: frozenset[int] = DOCUMENTED_FAULTS,
) -> None:
    """Up to n generated cases of one operation; `end`: perf_counter time the run must stop at;
    `faults`: 5xx statuses that are documented fault answers (none, on a healthy backend)."""
    label = op.label

    @hypothesis.seed(seed_)
    @hypothesis.settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: we collect, not minimise
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        if time.perf_counter() > end:
            raise TimeBoxOver
        try:
            response = case.call(headers=headers, timeout=60)
        except Exception as e:  # a request the client itself cannot send (e.g. bad header)
            tally.transport_errors += 1
            tally.failures.setdefault(f"{label} transport", f"{type(e).__name__}: {e}")
            return
        tally.sent += 1
        tally.by_op[label] += 1
        tally.statuses[response.status_code] += 1
        if response.status_code >= 500 and response.status_code not in faults:
            tally.server_errors += 1
            tally.failures.setdefault(
                f"{label} {response.status_code}",
                f"{case.as_curl_command()}\n{response.text[:500]}",
            )
        try:
            case.validate_response(response, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as e:  # schemathesis' FailureGroup is the latter
            key = f"{label} {mode.value} {type(e).__name__}"
            tally.failures.setdefault(key, f"{case.as_curl_command()}\n{str(e)[:800]}")
        if why := error_shape(response):
            tally.failures.setdefault(f"{label} error shape", f"{case.as_curl_command()}\n{why}")

    # No invalid input exists for an operation without parameters (e.g. /healthz).
    with contextlib.suppress(hypothesis.errors.Unsatisfiable, TimeBoxOver):
        run()


def is_write(op: Any) -> bool:
    """Writes go with the admin token (PUT, DELETE, POST /items); reads with a reader's."""
    return bool(op.method.upper() in ("PUT", "DELETE") or op.path == "/api/v1/items")


def fuzz_all(
    schema: Any,
    tokens: dict[str, str],
    requests: int,
    seed_: int = 1,
    time_box_s: float = 600.0,
    faults: frozenset[int] = DOCUMENTED_FAULTS,
) -> Tally:
    """Rounds over every operation, valid and invalid input, until `requests` were sent or the
    time box is spent (the caller checks which)."""
    ops = [r.ok() for r in schema.get_all_operations()]
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    reader = {"Authorization": f"Bearer {tokens['reader']}"}
    tally = Tally()
    end = time.perf_counter() + time_box_s
    rounds = 0
    while tally.sent < requests and time.perf_counter() < end:
        per_op = max(10, (requests - tally.sent) // (2 * len(ops)) + 5)
        for op in ops:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                headers = admin if is_write(op) else reader
                fuzz_operation(op, mode, per_op, headers, tally, seed_ + rounds, end, faults)
        rounds += 1
    return tally


def report(tally: Tally, elapsed: float) -> str:
    lines = [f"requests sent: {tally.sent} in {elapsed:.0f}s ({len(tally.by_op)} operations)"]
    lines += [f"  {n:5d}  {label}" for label, n in sorted(tally.by_op.items())]
    lines.append("statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items())))
    lines.append(
        f"5xx other than the allowed faults: {tally.server_errors}; "
        f"client-side transport errors: {tally.transport_errors}"
    )
    if tally.failures:
        lines.append(f"\n{len(tally.failures)} distinct failed checks:")
        lines += [f"--- {key}\n{text}\n" for key, text in tally.failures.items()]
    return "\n".join(lines)


def settings_for(
    backend: Literal["embedded", "opensearch"], name: str, home: Path, opensearch_url: str
) -> Settings:
    """A fresh store of its own: a uuid-named alias on OpenSearch, or a file under home."""
    return Settings(
        backend=backend,
        opensearch_url=opensearch_url,
        index_alias=name,
        acl_index=f"{name}-acl",
        embedded_path=home / f"{name}.db",
        embedder="fake",
        home=home,
        rate_per_minute=1_000_000,
        rate_per_day=10_000_000,
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=["opensearch", "embedded"], default="opensearch")
    ap.add_argument(
        "--opensearch-url", default=os.environ.get("SULI_OPENSEARCH_URL", "http://127.0.0.1:9260")
    )
    ap.add_argument(
        "--requests", type=int, default=1000, help="stop after at least this many requests"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-box", type=float, default=600.0, help="seconds; fails if reached")
    args = ap.parse_args()

    name = f"fuzz-{uuid.uuid4().hex}"
    with TemporaryDirectory() as home:
        settings = settings_for(args.backend, name, Path(home), args.opensearch_url)
        t0 = time.perf_counter()
        try:
            tokens = seed(settings)
            with serve(settings) as url:
                schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
                tally = fuzz_all(schema, tokens, args.requests, args.seed, args.time_box)
        finally:
            if args.backend == "opensearch":
                client = OpenSearch(hosts=[args.opensearch_url], timeout=60)
                found = client.indices.get(index=f"{name}*", ignore_unavailable=True)
                if found:
                    client.indices.delete(index=",".join(found), ignore=[404])
                client.close()
        elapsed = time.perf_counter() - t0

    print(f"backend: {args.backend}")
    print(report(tally, elapsed))
    ok = tally.server_errors == 0 and not tally.failures and tally.sent >= args.requests
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
