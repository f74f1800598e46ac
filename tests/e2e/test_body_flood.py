"""Huge bodies against a real `suli serve`: answered at once, and the server's memory stays flat.

Before the body limit, FastAPI read and parsed a whole body before the token was checked: one
tokenless 300 MB POST grew the server by ~900 MB. Here 16 such bodies stream in parallel over
loopback (each bounded in time), then authenticated ones; every one is answered 401 or 413
while it is still being sent, the server stops reading it, and its peak RSS grows < 50 MB.
"""

from __future__ import annotations

import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .served import Served, serving

TOTAL = 300 << 20  # what each client means to send
CHUNK = 64 << 10
SEND_FOR_S = 10.0  # a client stops sending after this, answered or not
ANSWER_S = 3.0  # "at once": well under what sending 300 MB takes
MAX_SENT = 32 << 20  # the socket buffers on both ends, far short of the 300 MB
MAX_GROWTH_KIB = 50 << 10


@dataclass(frozen=True)
class Outcome:
    status: int | None
    seconds: float
    sent: int


def _head(token: str | None, chunked: bool) -> bytes:
    lines = ["POST /api/v1/search HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {TOTAL}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _send_huge(port: int, token: str | None, chunked: bool) -> Outcome:
    """Stream up to TOTAL body bytes while watching for the answer; stop at the answer."""
    frame = b" " * CHUNK
    if chunked:
        frame = b"%x\r\n" % CHUNK + frame + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(_head(token, chunked))
        s.setblocking(False)
        t0 = time.monotonic()
        got, sent, pending = b"", 0, memoryview(frame)
        sending = True
        while time.monotonic() - t0 < SEND_FOR_S and b"\r\n\r\n" not in got:
            readable, writable, _ = select.select([s], [s] if sending else [], [], 0.2)
            if readable:
                try:
                    data = s.recv(65536)
                except ConnectionResetError:
                    break
                if not data:
                    break
                got += data
            if writable and sending:
                try:
                    n = s.send(pending)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    sending = False
                    continue
                sent += n
                pending = pending[n:] or memoryview(frame)
                sending = sent < TOTAL
        seconds = time.monotonic() - t0
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else None
    return Outcome(status, seconds, sent)


@pytest.fixture
def served(tmp_path: Path) -> Served:
    with serving(tmp_path) as s:
        yield s  # type: ignore[misc]


def _warm(served: Served) -> None:
    """Every code path once (imports, the token lookup) before memory is measured."""
    auth = {"Authorization": f"Bearer {served.tokens['ana']}"}
    assert httpx.post(f"{served.url}/api/v1/search", json={"q": "deploy"}, headers=auth).is_success
    assert httpx.post(f"{served.url}/api/v1/search", json={"q": "x"}).status_code == 401
    assert _send_huge(served.port, served.tokens["ana"], True).status == 413


def test_huge_bodies_are_answered_at_once_and_memory_stays_flat(served: Served) -> None:
    _warm(served)
    served.reset_peak()
    before = served.rss_kib()
    kinds = [(None, False), (None, True), ("suli_guessed", False), ("suli_guessed", True)]
    with ThreadPoolExecutor(16) as pool:
        tokenless = list(pool.map(lambda k: _send_huge(served.port, *k), kinds * 4))
    token = served.tokens["ana"]
    authed = [_send_huge(served.port, token, chunked) for chunked in (False, True)]
    growth = served.peak_kib() - before

    for (tok, chunked), out in zip(kinds * 4, tokenless, strict=True):
        expected = 401 if chunked else 413  # a declared 300 MB is refused before the token
        assert (tok, chunked, out.status) == (tok, chunked, expected)
    assert [out.status for out in authed] == [413, 413]
    for out in tokenless + authed:
        assert out.seconds < ANSWER_S, out
        assert out.sent < MAX_SENT, out  # the server stopped reading; nothing like 300 MB
    assert growth < MAX_GROWTH_KIB, f"peak RSS grew by {growth} KiB"

    auth = {"Authorization": f"Bearer {token}"}
    r = httpx.post(f"{served.url}/api/v1/search", json={"q": "deploy"}, headers=auth)
    assert r.status_code == 200 and r.json()["results"]
