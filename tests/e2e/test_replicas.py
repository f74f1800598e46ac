"""Several service processes behave as one: shared rate limits and cursors (real Redis, two real
`suli serve` processes over one store), and /metrics summed over `--workers 2`."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

START_S = 90.0
LIMIT = 8  # searches per principal per minute, across every process
SUITE_WS = "ws_rep"
ITEMS = [
    {
        "id": f"itm_r{i}",
        "workspace": SUITE_WS,
        "kind": "artifact",
        "title": f"Replica runbook part {i}",
        "body": "how to roll a replica of the query service",
        "outcome": "approved",
    }
    for i in range(6)
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{url} did not start: {log.read_text()}"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free loopback port, no persistence; it fails, never skips."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (.ci/run installs Debian's redis-server)"
    port = _free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, "redis-server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@dataclass
class World:
    env: dict[str, str]
    token: str
    home: Path


def _suli(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    suli = Path(sys.executable).with_name("suli")
    out = subprocess.run(
        [str(suli), *args], env=env, input=stdin, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """One embedded store with a principal, its token and six items every process serves."""
    home = tmp_path_factory.mktemp("replicas")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    env.update(SULI_HOME=str(home), SULI_BACKEND="embedded", SULI_EMBEDDER="fake")
    principals = home / "principals.json"
    principals.write_text(json.dumps([{"id": "prn_rep", "workspace": SUITE_WS, "kind": "person"}]))
    _suli(env, "principal", "load", str(principals))
    items = home / "items.jsonl"
    items.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    _suli(env, "index", str(items))
    token = _suli(env, "token", "create", "prn_rep").strip().split()[-1]
    return World(env, token, home)


@pytest.fixture
def serve(world: World) -> Iterator[object]:
    """A factory of `suli serve` processes; every one is stopped at the end of the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(extra: dict[str, str], *args: str) -> str:
        port = _free_port()
        env = {**world.env, **extra}
        log = world.home / f"serve-{port}.log"
        suli = Path(sys.executable).with_name("suli")
        proc = subprocess.Popen(
            [str(suli), "serve", "--port", str(port), "--log-level", "warning", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        _wait(url, proc, log)
        return url

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _search(url: str, token: str, **params: object) -> httpx.Response:
    return httpx.get(
        f"{url}/api/v1/search",
        params={"q": "replica runbook", **params},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def test_a_limit_of_n_admits_at_most_n_across_two_replicas(
    world: World, redis_url: str, serve: object
) -> None:
    shared = {"SULI_SHARED_STORE": redis_url, "SULI_RATE_PER_MINUTE": str(LIMIT)}
    a, b = serve(shared), serve(shared)  # type: ignore[operator]
    statuses = [
        _search(url, world.token).status_code for _ in range(LIMIT * 3 // 2) for url in (a, b)
    ]
    assert len(statuses) == 3 * LIMIT  # driven at three times the limit
    assert statuses.count(200) == LIMIT, statuses  # all inside one minute: exactly the limit
    assert set(statuses) == {200, 429}
    refused = _search(b, world.token)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1


def test_without_a_shared_store_each_process_counts_its_own(world: World, serve: object) -> None:
    """The contrast that makes the test above mean something: the same drive, no store."""
    alone = {"SULI_RATE_PER_MINUTE": str(LIMIT)}
    a, b = serve(alone), serve(alone)  # type: ignore[operator]
    statuses = [_search(url, world.token).status_code for _ in range(LIMIT) for url in (a, b)]
    assert statuses.count(200) == 2 * LIMIT


def test_a_cursor_from_one_replica_is_accepted_by_the_other(
    world: World, redis_url: str, tmp_path: Path, serve: object
) -> None:
    # Separate homes: no cursor-secret file in common, only the shared store.
    shared = {"SULI_SHARED_STORE": redis_url}
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    db = str(world.home / "suli.db")
    a = serve({**shared, "SULI_HOME": str(home_a), "SULI_EMBEDDED_PATH": db})  # type: ignore[operator]
    b = serve({**shared, "SULI_HOME": str(home_b), "SULI_EMBEDDED_PATH": db})  # type: ignore[operator]
    first = _search(a, world.token, limit=2)
    assert first.status_code == 200, first.text
    body = first.json()
    cursor = body["next"]
    assert cursor
    second = _search(b, world.token, limit=2, cursor=cursor)
    assert second.status_code == 200, second.text
    page2 = [r["id"] for r in second.json()["results"]]
    assert page2 and not set(page2) & {r["id"] for r in body["results"]}


def test_metrics_count_every_worker(world: World, serve: object) -> None:
    url = serve({}, "--workers", "2")  # type: ignore[operator]
    for _ in range(20):
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    pattern = re.compile(r'^suli_http_requests_total\{[^}]*route="/healthz"[^}]*\} (\S+)$', re.M)
    # Each scrape lands on either worker; every one must report both workers' requests.
    for _ in range(6):
        text = httpx.get(f"{url}/metrics", timeout=10).text
        counted = sum(float(v) for v in pattern.findall(text))
        assert counted >= 20, text[:2000]
