"""GuardedH11Protocol round four (issue 33): a body's whole read time is bounded, and IPv6
clients are capped per /64.

The body deadline runs under a real uvicorn server on loopback with a slow sender; the /64 cap
drives the protocol with fake transports (a test host has no spare IPv6 /64 to connect from).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

from app.server import GuardedH11Protocol, ServeConfig, build_config, client_key
from suli.settings import Settings

from .helpers import read_body_ok

BODY_BYTES = 400
PACE_S = 0.05  # the sender's pause between bytes: far under the per-pause timeout below


def test_a_slow_body_is_cut_off_by_its_whole_time(guarded: Callable[..., int]) -> None:
    """One byte at a time, each well within the pause timeout (30 s): the body as a whole must
    still arrive within body_total_timeout_s (1 s here; sending it all takes 20 s)."""
    port = guarded(body_timeout_s=30.0, body_total_timeout_s=1.0)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\n\r\n" % BODY_BYTES
        )
        sent = 0
        answer = b""
        try:
            while sent < BODY_BYTES:
                s.sendall(b"x")
                sent += 1
                time.sleep(PACE_S)  # pacing the slow sender (what is tested), not a wait
                s.setblocking(False)
                try:
                    answer += s.recv(4096)
                except BlockingIOError:
                    pass
                finally:
                    s.setblocking(True)
                if answer:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(30)
        try:
            while chunk := s.recv(4096):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert answer.startswith(b"HTTP/1.1 408 "), (sent, answer[:200])
    assert sent < BODY_BYTES, "the whole body was read"


def test_a_body_in_time_is_read_whole(guarded: Callable[..., int]) -> None:
    port = guarded(body_timeout_s=30.0, body_total_timeout_s=30.0)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n")
        s.sendall(b"abc")
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")


def test_serve_config_takes_the_body_total_timeout() -> None:
    config = build_config(Settings(body_total_timeout_s=7.5), "127.0.0.1", 0, 1, "warning")
    assert config.body_total_timeout_s == 7.5


# ---- item 8: IPv6 clients per /64 -----------------------------------------------------------


def test_client_keys() -> None:
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("unix-socket") == "unix-socket"


class FakeTransport(asyncio.Transport):
    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer
        self.written = b""
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {
            "peername": (self.peer, 40_000),
            "sockname": ("::1", 8000),
        }.get(name, default)

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def test_ipv6_addresses_of_one_64_share_one_cap() -> None:
    from uvicorn.server import ServerState

    loop = asyncio.new_event_loop()
    try:
        config = ServeConfig(
            read_body_ok,
            max_connections=100,
            max_connections_per_client=3,
            header_timeout_s=10.0,
            body_timeout_s=30.0,
        )
        config.load()
        state = ServerState()

        def connect(peer: str) -> FakeTransport:
            protocol = GuardedH11Protocol(config, state, {}, _loop=loop)
            transport = FakeTransport(peer)
            protocol.connection_made(transport)
            return transport

        held = [connect(f"2001:db8:1:2::{n:x}") for n in range(1, 4)]  # three addresses
        assert not any(t.closed for t in held)
        refused = connect("2001:db8:1:2:ffff::1")  # a fourth address of the same /64
        assert refused.closed and refused.written.startswith(b"HTTP/1.1 429 ")
        other = connect("2001:db8:1:3::1")  # the next /64 is another client
        assert not other.closed
    finally:
        loop.close()
