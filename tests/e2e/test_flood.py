"""A real `suli serve` under a connection flood with a low open-file limit (issue 14, finding 1).

Before the fix, half-sent request lines used up the fds, the accept error went through a Rich
logging handler that failed in turn, the event loop died and the process kept listening without
answering, for good. Now connections past the cap are refused, the flood's fds are returned when
it ends, and /healthz answers again at once.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .served import wait_ready

FD_LIMIT = 256
FLOOD = 400  # connections: well past what 256 fds can hold
FLOOD_TIME_S = 6.0  # the flood stops opening connections after this, whatever happened
HOLD_S = 1.0
RECOVER_S = 5.0
PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"  # no blank line: the head never ends


@dataclass
class Serve:
    url: str
    port: int
    proc: subprocess.Popen[bytes]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """`suli serve` on the embedded store, started with RLIMIT_NOFILE=256."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    env.update(SULI_HOME=str(tmp_path), SULI_BACKEND="embedded", SULI_EMBEDDER="fake")
    suli = Path(sys.executable).with_name("suli")
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [str(suli), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=_low_fd_limit,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url, tmp_path / "serve.log")
        yield Serve(url, port, proc)
    finally:
        proc.kill()
        proc.wait(30)
        log.close()


def _flood(port: int) -> int:
    """Open up to FLOOD connections that each send half a request head; returns how many."""
    held: list[socket.socket] = []
    stop = time.monotonic() + FLOOD_TIME_S
    try:
        for _ in range(FLOOD):
            if time.monotonic() > stop:
                break
            s = socket.socket()
            s.settimeout(0.2)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(PARTIAL)
            except OSError:  # refused or the backlog is full: the server is shedding load
                s.close()
                continue
            held.append(s)
        time.sleep(HOLD_S)
        return len(held)
    finally:
        for s in held:
            s.close()


def test_service_survives_a_flood_of_partial_requests_and_recovers(serve: Serve) -> None:
    opened = _flood(serve.port)
    assert opened > FD_LIMIT // 2  # the flood did reach the server's fd budget

    deadline = time.monotonic() + RECOVER_S
    answer: int | str = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{serve.url}/healthz", timeout=1).status_code
            if answer == 200:
                break
        except httpx.TransportError as e:
            answer = e.__class__.__name__
        time.sleep(0.1)
    assert answer == 200, f"/healthz after the flood: {answer}"
    assert serve.proc.poll() is None
    serve.proc.send_signal(signal.SIGINT)  # and it still stops cleanly, exit 0
    assert serve.proc.wait(30) == 0
