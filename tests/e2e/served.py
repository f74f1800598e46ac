"""A real `suli serve` subprocess on a free loopback port, over a seeded embedded store.

For the tests that attack the HTTP edge itself (body floods, connection floods): they need the
real protocol, the real limits and a process whose memory can be read from /proc.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from api.helpers import opener, seed

from suli.settings import Settings

START_S = 90.0


@dataclass
class Served:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    tokens: dict[str, str]
    log: Path

    def rss_kib(self) -> int:
        return _status_kib(self.proc.pid, "VmRSS")

    def peak_kib(self) -> int:
        return _status_kib(self.proc.pid, "VmHWM")

    def reset_peak(self) -> None:
        """Start the peak (VmHWM) again from the current RSS (Linux clear_refs, value 5)."""
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} for {pid}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(
    proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float = START_S
) -> None:
    """Until a started `suli serve` answers /healthz; its log in the failure if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "suli serve did not start"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


def _fd_limit(limit: int | None) -> Callable[[], None] | None:
    if limit is None:
        return None

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower


@contextlib.contextmanager
def serving(home: Path, *, fd_limit: int | None = None, **env_settings: str) -> Iterator[Served]:
    """Seed an embedded store in home, start `suli serve` over it, stop it (kill) at the end."""
    base = {"SULI_HOME": str(home), "SULI_BACKEND": "embedded", "SULI_EMBEDDER": "fake"}
    settings = Settings(backend="embedded", embedder="fake", home=home)
    searcher = opener()(settings)
    try:
        tokens = seed(searcher)
    finally:
        searcher.backend.close()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SULI_")}
    env.update(base)
    env.update({f"SULI_{k.upper()}": v for k, v in env_settings.items()})
    suli = Path(sys.executable).with_name("suli")
    log_path = home / "serve.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(suli), "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=_fd_limit(fd_limit),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, url, log_path)
        yield Served(url, port, proc, tokens, log_path)
    finally:
        proc.kill()
        proc.wait(30)
        log.close()
