"""The hardened uvicorn set-up (app.server): connection cap, head/body timeouts, logging, loop.

A trivial ASGI app under a real uvicorn server in a thread of this process, on loopback.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

from app.server import fd_budget, logging_config

from .helpers import answer_once_freed, held_connection


def _connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        s.sendall(data)
    return s


def _read_all(s: socket.socket) -> bytes:
    """Everything until the server closes (or 5 s pass)."""
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


def test_half_sent_head_gets_408_and_is_closed(guarded: Callable[..., int]) -> None:
    port = guarded(header_timeout_s=0.3)
    t0 = time.monotonic()
    with _connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n") as s:
        answer = _read_all(s)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - t0 < 4


def test_silent_connection_is_closed_after_the_header_timeout(guarded: Callable[..., int]) -> None:
    port = guarded(header_timeout_s=0.3)
    with _connect(port) as s:
        assert _read_all(s).startswith(b"HTTP/1.1 408 ")


def test_stalled_body_is_closed_after_the_body_timeout(guarded: Callable[..., int]) -> None:
    port = guarded(body_timeout_s=0.3)
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"
    t0 = time.monotonic()
    with _connect(port, head) as s:
        answer = _read_all(s)
    assert b"200" not in answer  # the app never got its whole body
    assert time.monotonic() - t0 < 4


def test_whole_requests_are_served_and_kept_alive(guarded: Callable[..., int]) -> None:
    port = guarded(header_timeout_s=0.3)
    with _connect(port) as s:
        for i in range(3):  # one connection, idle longer than the head timeout between requests
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b"ok") and len(answer) < 4096:
                answer += s.recv(4096) or b"<closed>"
            assert (i, answer[:13]) == (i, b"HTTP/1.1 200 ")
            time.sleep(0.4)


def test_connections_past_the_cap_get_503_and_the_cap_frees_up(
    guarded: Callable[..., int],
) -> None:
    port = guarded(max_connections=3)
    held = [held_connection(port) for _ in range(3)]
    with _connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") as extra:
        answer = _read_all(extra)
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"retry-after: 1" in answer.lower()
    for s in held:
        s.close()
    answer = answer_once_freed(port, b"HTTP/1.1 503 ")
    assert answer.startswith(b"HTTP/1.1 200 "), answer


def test_fd_budget_keeps_connections_and_an_accept_burst_under_the_limit() -> None:
    for limit in (128, 256, 1024, 65536):
        budget = fd_budget(10_000, limit)
        assert budget.connections + budget.backlog + 64 <= limit
        assert budget.connections >= 1
    assert fd_budget(100, 65536).connections == 100


def test_building_the_app_leaves_the_root_logger_alone() -> None:
    """The MCP SDK's constructor calls logging.basicConfig with a Rich handler (finding 1)."""
    from app.main import create_app
    from suli.settings import Settings

    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    root.handlers[:] = []  # as in a fresh process (pytest adds its own capture handlers)
    try:
        create_app(Settings(backend="embedded", embedder="fake"))
        assert root.handlers == []
        assert root.level == level
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


def test_serve_logging_is_ours_after_the_app_is_built() -> None:
    """In a fresh process: our dictConfig, then the app; the root has only our stderr handler."""
    script = textwrap.dedent(
        """
        import logging, logging.config
        from app.server import logging_config
        from app.main import create_app
        from suli.settings import Settings
        logging.config.dictConfig(logging_config("info"))
        ours = list(logging.getLogger().handlers)
        create_app(Settings(backend="embedded", embedder="fake"))
        after = logging.getLogger().handlers
        assert after == ours and len(ours) == 1, after
        assert type(ours[0]) is logging.StreamHandler, ours
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert logging_config("info")["root"]["handlers"] == ["stderr"]


_DYING_LOOP = """
import asyncio, threading, sys
from app.server import new_event_loop
# An idle non-daemon thread, like the thread pool's: it kept the dead process alive before.
threading.Thread(target=threading.Event().wait).start()
async def main():
    loop = asyncio.get_running_loop()
    def broken_select(timeout=None):
        raise OSError(24, "Too many open files")
    loop._selector.select = broken_select
    await asyncio.sleep(1)
with asyncio.Runner(loop_factory=new_event_loop) as runner:
    runner.run(main())
"""

_NOISY_CALLBACK = """
import asyncio, logging
from app.server import new_event_loop
class Broken(logging.Handler):
    def emit(self, record):
        raise OSError(24, "Too many open files")
    def handleError(self, record):
        raise OSError(24, "Too many open files")
logging.getLogger().addHandler(Broken())
async def main():
    loop = asyncio.get_running_loop()
    loop.call_soon(lambda: 1 / 0)  # reported through a logging that fails
    await asyncio.sleep(0.2)
    print("loop alive")
with asyncio.Runner(loop_factory=new_event_loop) as runner:
    runner.run(main())
"""


def test_a_dead_event_loop_ends_the_process_non_zero() -> None:
    done = subprocess.run([sys.executable, "-c", _DYING_LOOP], capture_output=True, timeout=60)
    assert done.returncode == 1
    assert b"event loop died" in done.stderr


def test_a_failing_log_handler_does_not_kill_the_loop() -> None:
    done = subprocess.run([sys.executable, "-c", _NOISY_CALLBACK], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"loop alive" in done.stdout
    assert b"ZeroDivisionError" in done.stderr  # said on fd 2 when logging could not
