"""Builders of the HTTP API tests: seeded worlds over the real OpenSearch, fault injectors, a TCP proxy."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from indexer.pipeline import index_items
from suli.auth import create_token
from suli.core import open_backend
from suli.embedding import Embedder, FakeEmbedder, FloatArray
from suli.models import BoardAcl, Principal
from suli.service import Reranker, Searcher
from suli.settings import Settings
from suli.validate import parse_item

WS = "ws_main"
OTHER_WS = "ws_other"
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)

PRINCIPALS = (
    Principal("prn_ana", WS, "person", ("grp_eng",)),
    Principal("prn_bob", WS, "person", ()),
    Principal("prn_admin", WS, "person", ()),
    Principal("prn_eve", OTHER_WS, "person", ()),
)
ACLS = (
    BoardAcl("brd_eng", WS, "Engineering", (), ("grp_eng",)),
    BoardAcl("brd_secret", WS, "Secret", ("prn_bob",), ()),
)


def raw_item(item_id: str, title: str, body: str = "", **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": item_id,
        "workspace": WS,
        "title": title,
        "body": body,
        "last_activity_at": T0.isoformat(),
        "url": f"https://app.example/items/{item_id}",
        "provenance": {"source": "api-test"},
    }
    data.update(fields)
    return data


# Ana sees: workspace-wide items and brd_eng. Bob sees: workspace-wide, brd_secret, his upload.
ITEMS = (
    raw_item(
        "itm_rollback",
        "Deploy pipeline rollback guide",
        "How to roll back a failed deploy of the pipeline.",
        outcome="approved",
        tags=["deploy"],
    ),
    raw_item(
        "itm_checklist",
        "Deploy checklist for database migrations",
        "Run the migration checklist before each deploy.",
        outcome="completed",
        board="brd_eng",
        references=["itm_rollback", "itm_secret"],
        agent="prn_agent1",
    ),
    raw_item(
        "itm_secret",
        "Secret deploy plan for payroll",
        "Payroll deploy plan, confidential.",
        outcome="approved",
        board="brd_secret",
        tags=["payroll"],
    ),
    raw_item(
        "itm_bobnotes",
        "Bob personal deploy notes",
        "Notes about deploy timing.",
        uploader="prn_bob",
    ),
    raw_item(
        "itm_old",
        "Old deploy runbook",
        "The previous deploy runbook.",
        outcome="superseded",
        superseded_by="itm_secret",
    ),
    raw_item(
        "itm_other",
        "Deploy guide of another workspace",
        "Deploy steps elsewhere.",
        workspace=OTHER_WS,
        outcome="approved",
    ),
    raw_item("itm_hidden", "Hidden deploy draft", "A hidden deploy draft.", hidden=True),
)

Opener = Callable[[Settings], Searcher]


def opener(embedder: Embedder | None = None, reranker: Reranker | None = None) -> Opener:
    """Builds the app's Searcher over the real backend, with an injectable embedder/reranker."""

    def open_(settings: Settings) -> Searcher:
        emb = embedder or FakeEmbedder()
        return Searcher(open_backend(settings, emb), emb, settings, reranker)

    return open_


def seed(searcher: Searcher, items: tuple[dict[str, Any], ...] = ITEMS) -> dict[str, str]:
    """Principals, ACLs and items; returns a token per principal (prn_admin's is an admin)."""
    backend = searcher.backend
    backend.put_principals(PRINCIPALS)
    backend.put_acls(ACLS)
    summary = index_items(
        [(n, parse_item(d)) for n, d in enumerate(items)], backend, searcher.embedder
    )
    assert summary.indexed == len(items) and not summary.rejected
    backend.refresh()
    return {
        p.id.removeprefix("prn_"): create_token(backend, p.id, admin=p.id == "prn_admin")
        for p in PRINCIPALS
    }


@dataclass(frozen=True)
class World:
    """A seeded index (alias + ACL index) and the tokens of its principals."""

    settings: Settings
    tokens: dict[str, str]


def settings_for(url: str, name: str, home: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "backend": "opensearch",
        "opensearch_url": url,
        "index_alias": name,
        "acl_index": f"{name}-acl",
        "embedder": "fake",
        "home": home,
        "rate_per_minute": 100_000,
        "rate_per_day": 1_000_000,
    }
    values.update(overrides)
    return Settings(**values)


def make_world(url: str, name: str, home: Path, items: tuple[dict[str, Any], ...] = ITEMS) -> World:
    settings = settings_for(url, name, home)
    searcher = opener()(settings)
    try:
        return World(settings, seed(searcher, items))
    finally:
        searcher.backend.close()


def make_embedded_world(home: Path, items: tuple[dict[str, Any], ...] = ITEMS) -> World:
    """The same seeded world in an embedded store file under `home` (the default backend)."""
    settings = Settings(
        backend="embedded",
        embedded_path=home / "store.db",
        embedder="fake",
        home=home,
        rate_per_minute=100_000,
        rate_per_day=1_000_000,
    )
    searcher = opener()(settings)
    try:
        return World(settings, seed(searcher, items))
    finally:
        searcher.backend.close()


def drop(client: OpenSearch, name: str) -> None:
    """Delete the alias's physical indices and the ACL index (named: no wildcard deletes)."""
    found = client.indices.get(index=f"{name}*", expand_wildcards="all", ignore_unavailable=True)
    if found:
        client.indices.delete(index=",".join(found), ignore=[404])


@dataclass
class Api:
    client: TestClient
    app: FastAPI
    settings: Settings
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    @property
    def searcher(self) -> Searcher:
        return self.app.state.runtime.searcher()  # type: ignore[no-any-return]

    def search(self, who: str, **params: Any) -> Any:
        r = self.client.get("/api/v1/search", params=params, headers=self.auth(who))
        assert r.status_code == 200, r.text
        return r.json()


# ---- faults ------------------------------------------------------------------------------


class FailingEmbedder(FakeEmbedder):
    """Indexes like FakeEmbedder; every query embedding fails (a broken model at query time)."""

    def embed_query(self, text: str) -> FloatArray:
        raise RuntimeError("model crashed")


class SlowEmbedder(FakeEmbedder):
    """Query embeddings take `delay` seconds; `started` and `done` mark one call."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.started = threading.Event()
        self.done = threading.Event()

    def embed_query(self, text: str) -> FloatArray:
        self.started.set()
        time.sleep(self.delay)
        try:
            return super().embed_query(text)
        finally:
            self.done.set()


class SlowReranker:
    name = "slow"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def rerank(
        self,
        query_vector: Sequence[float] | None,
        ranked: list[str],
        vectors: dict[str, list[float]],
    ) -> list[str]:
        time.sleep(self.delay)
        return list(reversed(ranked))


class BrokenReranker:
    name = "broken"

    def rerank(
        self,
        query_vector: Sequence[float] | None,
        ranked: list[str],
        vectors: dict[str, list[float]],
    ) -> list[str]:
        raise ValueError("reranker bug")


class TcpProxy:
    """A TCP forwarder in front of the real node that a test can switch off and on again.

    Off closes the listening socket and every open connection, so the node looks gone; on
    listens again on the same port, so the service's client finds it back by itself.
    """

    def __init__(self, target: str) -> None:
        parsed = urlsplit(target)
        self.target = (parsed.hostname or "127.0.0.1", parsed.port or 9200)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not (Linux).
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed: switched off
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def assert_error_shape(
    resp: Any, status: int, code: str, field: str | None = None
) -> dict[str, Any]:
    """The one error shape: {"error": {"code", "message", "field"?}} as JSON, nothing else."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"]
    allowed = {"code", "message", "field", "limit", "retry_after"}
    assert set(err) <= allowed, err
    if field is not None:
        assert err["field"] == field, err
    return err  # type: ignore[no-any-return]


# ---- guarded servers -----------------------------------------------------------------------


KEEP_ALIVE_GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def held_connection(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A kept-alive connection to a guarded server that has answered one request (its app says
    `ok`): the answer proves the server holds and counts it, where a bare connect may still sit
    in the accept queue."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    s.sendall(KEEP_ALIVE_GET)
    answer = b""
    while not answer.endswith(b"ok") and len(answer) < 4096:
        answer += s.recv(4096) or b"<closed>"
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    return s


def answer_once_freed(port: int, refused: bytes, timeout: float = 10.0) -> bytes:
    """The answer to a one-request connection once it is not `refused` (a status line's start),
    or the last one after `timeout` s: a server learns of closed connections asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b"".join(iter(lambda: _recv_or_end(s), b""))
        if not answer.startswith(refused) or time.monotonic() > deadline:
            return answer


def _recv_or_end(s: socket.socket) -> bytes:
    try:
        return s.recv(4096)
    except (TimeoutError, ConnectionResetError):
        return b""


async def read_body_ok(
    scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
) -> None:
    """An ASGI app that reads a request's whole body, then answers 200 "ok"."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@contextlib.contextmanager
def threaded_server(
    config: Any,
    sock: socket.socket | None = None,
    *,
    start_timeout_s: float = 30.0,
    stop_timeout_s: float = 10.0,
) -> Iterator[Any]:
    """A `uvicorn.Server` on `config` in a daemon thread (serving `sock` when given), yielded
    once it has started; told to exit and joined at the end."""
    import uvicorn

    server = uvicorn.Server(config)
    run_args = {"sockets": [sock]} if sock is not None else {}
    thread = threading.Thread(target=server.run, kwargs=run_args, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the server did not start under uvicorn", pytrace=False)
        time.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(stop_timeout_s)


def guarded_servers(
    default_app: Callable[..., Any] = read_body_ok,
) -> Iterator[Callable[..., int]]:
    """Fixture body: a factory of guarded servers (app, limits) on free loopback ports, each
    returning its port; every server is stopped at the end."""
    from app.server import GuardedH11Protocol, ServeConfig

    with contextlib.ExitStack() as stack:

        def start(app: Callable[..., Any] | None = None, **limits: Any) -> int:
            limits = {"max_connections": 100, "header_timeout_s": 10.0, "body_timeout_s": 30.0,
                      **limits}  # fmt: skip
            config = ServeConfig(
                app or default_app,
                host="127.0.0.1",
                port=0,
                http=GuardedH11Protocol,
                log_level="warning",
                **limits,
            )
            server = stack.enter_context(threaded_server(config))
            return int(server.servers[0].sockets[0].getsockname()[1])

        yield start
