"""`suli index` against a node that stops answering writes: each timed-out bulk is retried with
back-off, and a run that cannot finish ends with its summary (indexed, rejected, not written)
and one clear line, exit 1, never a traceback.

The node is the real one; between it and Suli sits an HTTP relay that passes every request
through except the items index's `_bulk`, which it accepts and never answers (a node too busy
to answer within the client's timeout). Back-off sleeps are recorded instead of slept
(tenacity's documented hook), so the test does not wait out a minute of back-off.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit
from uuid import uuid4

import pytest
from click.testing import CliRunner
from opensearchpy import OpenSearch

from cli.main import cli
from suli.backends.opensearch import OpenSearchBackend
from suli.embedding import FakeEmbedder
from suli.settings import Settings

TIMEOUT_S = 1.0  # the client's timeout: a stalled bulk fails fast


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on a stalled request: expected here


class StallingRelay:
    """Relays HTTP to the node; requests whose path starts with `stall` are held unanswered."""

    def __init__(self, target: str, stall: str) -> None:
        parsed = urlsplit(target)
        upstream = (parsed.hostname or "127.0.0.1", parsed.port or 9200)
        self.stalled = 0
        self.release = threading.Event()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                if self.path.startswith(stall):
                    relay.stalled += 1
                    relay.release.wait(30)  # accepted, never answered (until the test ends)
                    self.close_connection = True
                    return
                conn = http.client.HTTPConnection(*upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def setup(
    opensearch_url: str, os_client: OpenSearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[StallingRelay, dict[str, str], list[float]]]:
    name = f"test-{uuid4().hex}"
    relay = StallingRelay(opensearch_url, f"/{name}/_bulk")
    slept: list[float] = []
    monkeypatch.setattr("tenacity.nap.time", SimpleNamespace(sleep=slept.append))
    # The index is made beforehand at the usual timeout: creating one on a busy node may take
    # longer than the short timeout the run gets.
    ready = Settings(opensearch_url=opensearch_url, index_alias=name, acl_index=f"{name}-acl")
    made = OpenSearchBackend(ready, FakeEmbedder().dimension, FakeEmbedder().name)
    made.ensure_ready()
    made.close()
    env = {
        "SULI_BACKEND": "opensearch",
        "SULI_OPENSEARCH_URL": relay.url,
        "SULI_INDEX_ALIAS": name,
        "SULI_ACL_INDEX": f"{name}-acl",
        "SULI_OPENSEARCH_TIMEOUT_S": str(TIMEOUT_S),
        "SULI_OPENSEARCH_BULK_TIMEOUT_S": str(TIMEOUT_S),
        "SULI_EMBEDDER": "fake",
        "SULI_HOME": str(tmp_path / "home"),
    }
    try:
        yield relay, env, slept
    finally:
        relay.close()
        found = os_client.indices.get(index=f"{name}*", expand_wildcards="all",
                                      ignore_unavailable=True)  # fmt: skip
        if found:
            os_client.indices.delete(index=",".join(found), ignore=[404])


def items_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "items.jsonl"
    lines = [json.dumps({"id": f"itm_{k}", "workspace": "ws", "title": f"note {k}"})
             for k in range(n)]  # fmt: skip
    path.write_text("\n".join([*lines, '{"id": "itm_bad"}']) + "\n")
    return path


def test_a_write_that_keeps_timing_out_ends_with_the_summary_not_a_traceback(
    setup: tuple[StallingRelay, dict[str, str], list[float]], tmp_path: Path
) -> None:
    relay, env, slept = setup
    src = items_file(tmp_path, 30)
    run = CliRunner().invoke(cli, ["index", "--workers", "0", str(src)], env=env)

    assert run.exit_code == 1, run.output
    assert run.exception is None or isinstance(run.exception, SystemExit), run.exception
    assert "Traceback" not in run.output
    # Retried with back-off: the client's timeout each time, growing waits between tries.
    assert relay.stalled >= 3, run.output
    assert len(slept) == relay.stalled - 1
    # Exponential with jitter: wait n is 0.5 s x 2^n (at most 15 s) plus up to 1 s; bands of
    # neighbours overlap, so each wait is checked against its own band, not against the last.
    for n, wait in enumerate(slept):
        base = min(15.0, 0.5 * 2**n)
        assert base <= wait <= base + 1.0, (n, slept)
    assert max(slept) > 4 * min(slept)
    # The summary, then one line saying why the run stopped and what was not written.
    assert "read 31, indexed 0, rejected 1" in run.stderr
    [stop] = [x for x in run.stderr.splitlines() if x.startswith("stopped (")]
    assert "did not answer" in stop and "30 items" in stop
    assert "30 lines read were not written" in stop
    # The rejects file still holds the bad line: nothing is lost silently.
    rejects = Path(str(src) + ".rejects.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in rejects] == ["itm_bad"]
