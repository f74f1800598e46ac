"""The shared store (SULI_SHARED_STORE) under faults, with a real redis-server (issue 33 item 6):
readiness follows it, errors name it, and the cursor secret it keeps is never silently split.

Embedded store behind each app (the rules are the edge's, the same on either backend); two
apps over one store stand for two replicas.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from app.main import create_app
from app.shared_store import SECRET_KEY
from suli.settings import Settings

from .helpers import opener, seed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A real redis-server on a fixed loopback port, no persistence; stop and start again."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed (.ci/run installs Debian's redis-server)"
        self.binary, self.folder, self.port = binary, folder, _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, "redis-server exited"
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            except redis.RedisError:
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Replica:
    def __init__(self, client: TestClient, tokens: dict[str, str]) -> None:
        self.client = client
        self.tokens = tokens

    def get(self, path: str, who: str | None = "ana", **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return self.client.get(path, params=params, headers=headers)

    def cursor(self) -> str:
        r = self.get("/api/v1/search", limit=1)  # browse, one a page: there is a next page
        assert r.status_code == 200, r.text
        nxt: str = r.json()["next"]
        assert nxt
        return nxt


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    """Factory: an app (a replica) over one seeded embedded store and the given settings."""
    base: dict[str, Any] = {
        "backend": "embedded",
        "embedded_path": tmp_path / "suli.db",
        "embedder": "fake",
    }
    settings = Settings(**base, home=tmp_path / "home-seed")
    searcher = opener()(settings)
    try:
        tokens = seed(searcher)
    finally:
        searcher.backend.close()
    with ExitStack() as stack:
        n = 0

        def make(**overrides: Any) -> Replica:
            nonlocal n
            n += 1  # each replica its own home, so only the store can share a cursor secret
            own = Settings(**base, home=tmp_path / f"home-{n}", **overrides)
            application = create_app(own, opener=opener())
            client = stack.enter_context(TestClient(application, raise_server_exceptions=False))
            return Replica(client, tokens)

        yield make


def test_readyz_follows_the_shared_store(
    store: RedisServer, replicas: Callable[..., Replica]
) -> None:
    one = replicas(shared_store=store.url)
    assert one.get("/readyz", who=None).status_code == 200
    store.stop()
    r = one.get("/readyz", who=None)
    assert r.status_code == 503, r.text
    assert "shared store" in r.json()["error"]["message"]
    r = one.get("/api/v1/facets")  # every route fails closed, naming the store
    assert r.status_code == 503 and "shared" in r.text and "OpenSearch" not in r.text
    store.start()
    assert one.get("/readyz", who=None).status_code == 200


def test_a_store_down_at_start_is_named_not_opensearch(
    store: RedisServer, replicas: Callable[..., Replica]
) -> None:
    store.stop()
    one = replicas(shared_store=store.url)
    for path in ("/readyz", "/api/v1/facets", "/api/v1/search"):
        r = one.get(path, q="index")
        assert r.status_code == 503, (path, r.text)
        assert "OpenSearch" not in r.text, (path, r.text)
        assert "shared store" in r.json()["error"]["message"], (path, r.text)


def test_a_store_emptied_gets_the_running_secret_back(
    store: RedisServer, replicas: Callable[..., Replica]
) -> None:
    first = replicas(shared_store=store.url)
    made = first.cursor()
    store.client().flushall()
    assert first.get("/readyz", who=None).status_code == 200  # writes its secret back
    second = replicas(shared_store=store.url)  # started after: reads that secret
    assert second.get("/api/v1/search", limit=1, cursor=made).status_code == 200
    assert first.get("/api/v1/search", limit=1, cursor=second.cursor()).status_code == 200


def test_a_secret_written_by_a_newer_replica_is_taken_by_the_running_ones(
    store: RedisServer, replicas: Callable[..., Replica]
) -> None:
    first = replicas(shared_store=store.url)
    first.cursor()
    store.client().flushall()
    second = replicas(shared_store=store.url)  # the store was empty: it wrote a new secret
    newer = store.client().get(SECRET_KEY)
    assert first.get("/readyz", who=None).status_code == 200  # notices, takes it
    assert store.client().get(SECRET_KEY) == newer
    assert first.get("/api/v1/search", limit=1, cursor=second.cursor()).status_code == 200
    assert second.get("/api/v1/search", limit=1, cursor=first.cursor()).status_code == 200


def test_a_configured_secret_is_never_the_stores(
    store: RedisServer, replicas: Callable[..., Replica]
) -> None:
    first = replicas(shared_store=store.url, cursor_secret="configured-secret")
    made = first.cursor()
    store.client().set(SECRET_KEY, "something-else")
    assert first.get("/readyz", who=None).status_code == 200
    assert first.get("/api/v1/search", limit=1, cursor=made).status_code == 200
    assert store.client().get(SECRET_KEY) == b"something-else"
