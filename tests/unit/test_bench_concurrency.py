"""bench.concurrency's load loop against a tiny local HTTP server: every answer is counted.

The server is a stand-in for any HTTP endpoint (pure code: what is checked is the client's
counting, not OpenSearch or Suli behaviour, which tests/integration/test_bench_smoke.py runs).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import concurrency
from suli.visibility import Visibility

_served = itertools.count()


class _Flaky(BaseHTTPRequestHandler):
    """Every 5th answer a 503, every 7th a 200 with a degraded leg, the rest complete."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the bench expects
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stalls

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        n = next(_served)
        status, body = 200, b'{"results":[],"degraded":[]}'
        if n % 5 == 4:
            status, body = 503, b'{"error":"busy"}'
        elif n % 7 == 6:
            body = b'{"results":[],"degraded":[{"leg":"vector"}]}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        # A GET side's request: no body; the query is in the path.
        assert self.path.startswith("/api/v1/search?q=")
        body = b'{"results":[],"degraded":[]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_errors_and_partial_answers_are_counted_never_dropped(flaky_url: str) -> None:
    side = concurrency.Side(
        "suli_http", (flaky_url,), "/api/v1/search", (b'{"q":"a"}', b'{"q":"b"}'),
        {"Content-Type": "application/json"}, concurrency.suli_complete,
    )  # fmt: skip
    start = next(_served)
    tallies, elapsed = concurrency.run_block(side, clients=3, seconds=0.6, warmup=0.2)
    got = concurrency.summarise(tallies, elapsed)
    served = next(_served) - start - 1
    # Every request the server answered is in the report: warm-up, successes or errors.
    assert got["warmup_requests"] + got["requests"] == served
    assert got["requests"] == got["ok"] + got["errors"]
    assert got["error_kinds"].get("HTTP 503", 0) > 0
    assert got["error_kinds"].get("partial answer", 0) > 0
    assert sum(got["error_kinds"].values()) == got["errors"]
    assert got["qps"] == pytest.approx(got["ok"] / got["elapsed_s"], rel=0.01)  # both rounded
    assert got["elapsed_s"] >= 0.6


def test_a_get_side_sends_each_query_in_its_url(flaky_url: str) -> None:
    sides = concurrency.build_sides(
        flaky_url, "tok", ["http://127.0.0.1:9"], "idx", ["a b", "c&d"], {"a b": [0.0], "c&d": [1.0]},
        Visibility("ws", "prn", frozenset()), depth=5, limit=3, pipeline="p",
    )  # fmt: skip
    get = sides["suli_http_get"]
    assert get.paths == ("/api/v1/search?q=a+b&limit=3", "/api/v1/search?q=c%26d&limit=3")
    assert len(get) == 2 and get.headers["Authorization"] == "Bearer tok"
    assert concurrency.prime(get) == {}  # both answered 200 with a whole answer
    tallies, elapsed = concurrency.run_block(get, clients=2, seconds=0.3, warmup=0.1)
    got = concurrency.summarise(tallies, elapsed)
    assert got["ok"] == got["requests"] > 0 and got["errors"] == 0


def test_a_refused_connection_is_an_error_of_its_side() -> None:
    side = concurrency.Side(
        "native_hybrid", ("http://127.0.0.1:9",), "/x/_search", (b"{}",), {},
        concurrency.opensearch_complete,
    )  # fmt: skip
    tallies, elapsed = concurrency.run_block(side, clients=2, seconds=0.2, warmup=0.0)
    got = concurrency.summarise(tallies, elapsed)
    assert got["ok"] == 0 and got["errors"] == got["requests"] > 0
    assert set(got["error_kinds"]) == {"ConnectionRefusedError"}
    assert got["qps"] == 0 and got["p50_ms"] is None


def test_an_opensearch_answer_with_a_failed_shard_or_a_timeout_is_not_complete() -> None:
    head = b'{"took":3,"timed_out":false,"_shards":{"total":3,"successful":3,"skipped":0,'
    assert concurrency.opensearch_complete(head + b'"failed":0},"hits":{}}')
    assert not concurrency.opensearch_complete(head + b'"failed":1},"hits":{}}')
    assert not concurrency.opensearch_complete(head.replace(b"false", b"true") + b'"failed":0}}')


def test_bad_run_settings_are_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="levels"):
        concurrency.run_levels("http://x", "t", "http://x", "i", ["q"], {"q": [0.0]}, None,  # type: ignore[arg-type]
                               levels=(0,))  # fmt: skip
    with pytest.raises(ValueError, match="queries"):
        concurrency.run_levels("http://x", "t", "http://x", "i", [], {}, None)  # type: ignore[arg-type]
