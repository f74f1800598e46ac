"""GuardedH11Protocol per client: a connection cap per address, trusted proxies exempt, and a
body the app answered without reading is not read on.

Trivial ASGI apps under a real uvicorn server in a thread of this process, on loopback; the
second client address is 127.0.0.2 (all of 127/8 is loopback).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Any

from app.server import LINGER_S, build_config, per_client_cap
from suli.settings import Settings

from .helpers import answer_once_freed, held_connection

App = Callable[..., Any]


async def _refuse_unread(
    scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
) -> None:
    """Answers 401 without reading the body, as the body limit does for a missing token."""
    if scope["type"] != "http":
        return
    await send(
        {"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"no"})


def _connect(port: int, source: str = "127.0.0.1", data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    if data:
        s.sendall(data)
    return s


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = s.recv(4096)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


GET = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def test_one_address_past_its_cap_gets_429_and_others_are_served(
    guarded: Callable[..., int],
) -> None:
    port = guarded(max_connections_per_client=3)
    held = [held_connection(port) for _ in range(3)]
    with _connect(port, data=GET) as extra:
        answer = _read_all(extra)
    assert answer.startswith(b"HTTP/1.1 429 ")
    assert b'"code":"too_many_connections"' in answer and b"retry-after: 1" in answer
    with _connect(port, "127.0.0.2", GET) as other:
        assert _read_all(other).startswith(b"HTTP/1.1 200 ")
    held.pop().close()  # a closed connection gives its place back
    assert answer_once_freed(port, b"HTTP/1.1 429 ").startswith(b"HTTP/1.1 200 ")
    for s in held:
        s.close()


def test_a_trusted_proxy_is_not_capped_per_address(guarded: Callable[..., int]) -> None:
    proxy = (ipaddress.ip_network("127.0.0.1/32"),)
    port = guarded(max_connections_per_client=3, trusted_proxies=proxy)
    held = [held_connection(port) for _ in range(5)]
    with _connect(port, data=GET) as extra:
        assert _read_all(extra).startswith(b"HTTP/1.1 200 ")
    for s in held:
        s.close()


def test_a_body_answered_unread_is_not_read_on_and_the_connection_closes(
    guarded: Callable[..., int],
) -> None:
    port = guarded(_refuse_unread)
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 300000000\r\n\r\n"
    with _connect(port, data=head) as s:
        s.settimeout(0.05)
        t0, sent, answer = time.monotonic(), 0, b""
        while time.monotonic() - t0 < LINGER_S + 3:
            try:
                sent += s.send(b" " * 65536)
            except TimeoutError:
                pass
            except OSError:  # reset once the server closed: it read no more
                break
            try:
                got = s.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            answer += got
            if not got:
                break
        closed_after = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert closed_after < LINGER_S + 2
    assert sent < 32 << 20  # the socket buffers, not the 300 MB


def test_the_per_client_cap_defaults_to_a_share_of_the_connection_cap() -> None:
    assert per_client_cap(None, 1000) == 250
    assert per_client_cap(None, 100) == 32
    assert per_client_cap(None, 10) == 10  # never more than the whole cap
    assert per_client_cap(5, 1000) == 5


def test_serve_config_takes_the_edge_settings() -> None:
    settings = Settings(
        embedder="fake", max_connections=400, trusted_proxies="10.0.0.0/8", backend="embedded"
    )
    config = build_config(settings, "127.0.0.1", 0, 1, "warning")
    assert config.max_connections_per_client == per_client_cap(None, config.max_connections)
    assert config.trusted_proxies == (ipaddress.ip_network("10.0.0.0/8"),)
    assert config.proxy_headers is False  # the app reads X-Forwarded-*, from trusted proxies only
