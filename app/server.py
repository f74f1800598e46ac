"""Running the service under uvicorn, hardened: bounded connections, header/body timeouts, the
service's own logging, and a process that exits non-zero when its event loop dies.

Why each piece exists: ~1,100 tokenless connections that each sent half a request line used up
the file descriptors; the accept error was logged through a Rich handler a
dependency had attached to the root logger, which itself failed (it imports a module, i.e. opens
a file), the exception escaped the event loop and killed it, and the process kept listening with
no loop (idle non-daemon worker threads kept the interpreter from exiting). Here:
- GuardedH11Protocol refuses connections past a cap derived from the fd limit and past a
  smaller cap per client address (one address holding ~900 half-open connections kept other
  users at 503 most of the time), closes a connection whose request head (or body) does not
  arrive in time, and stops reading a body the app answered without reading (401, 413);
- LOGGING is a dictConfig set up by `serve` itself, with plain stderr handlers;
- new_event_loop() returns a loop whose exception handler never raises and whose death ends the
  process with exit code 1, so a supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app import logs
from suli.settings import Settings

log = logging.getLogger("suli.server")

EXIT_LOOP_DIED = 1
# File descriptors kept out of the connection budget: the SQLite files of each worker thread,
# the OpenSearch connection pool, the model files, logs and pipes. Measured: 15 at rest with the
# embedded store; a quarter of the limit (at least 64) leaves room for the thread pool's SQLite
# connections under load.
FD_RESERVE_MIN = 64
MAX_BACKLOG = 2048  # uvicorn's default listen backlog
REFUSED_LOG_EVERY_S = 10.0  # one warning per period while connections are refused, not a flood
# Per client address, unless set: a quarter of the connection cap, so at least four clients
# can each use their whole share; 32 at least, so a browser or a pool behind NAT is not cut off.
PER_CLIENT_SHARE = 4
PER_CLIENT_MIN = 32
# A body the app answered without reading (401, 413): reading stops and the connection closes
# after this long, enough for the client to read the answer (closing at once, with its bytes
# unread, would reset the connection and could drop the answer before the client read it).
LINGER_S = 1.0

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _raw_response(status: bytes, headers: bytes, body: bytes) -> bytes:
    """A whole HTTP/1.1 response written straight to the socket (no app, no h11 state)."""
    head = b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return head + headers + b"content-length: %d\r\n\r\n" % len(body) + body


_REFUSED = _raw_response(
    b"503 Service Unavailable",
    b"retry-after: 1\r\n",
    b'{"error":{"code":"overloaded","message":"too many open connections; retry in a moment"}}',
)
_CLIENT_REFUSED = _raw_response(
    b"429 Too Many Requests",
    b"retry-after: 1\r\n",
    b'{"error":{"code":"too_many_connections","message":'
    b'"too many open connections from your address; close some or retry in a moment"}}',
)
_TIMED_OUT = _raw_response(
    b"408 Request Timeout",
    b"",
    b'{"error":{"code":"request_timeout","message":"the request did not arrive in time"}}',
)


@dataclass(frozen=True)
class FdBudget:
    """How the open-file limit is shared: open connections, and one accept burst on top.

    asyncio accepts up to `backlog` sockets in one go before any protocol can refuse one, so a
    burst must fit in what the open connections leave, else accept() itself fails with EMFILE.
    """

    connections: int
    backlog: int


# One IPv6 client usually holds a whole /64 (SLAAC, privacy addresses): counting per address
# let one host spread its connections over as many addresses as it liked.
IPV6_CLIENT_PREFIX = 64


def client_key(host: str) -> str:
    """What the per-client cap counts under: an IPv4 address, or an IPv6 address's /64."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(address)


def per_client_cap(setting: int | None, connections: int) -> int:
    """Connections one client address may hold: the setting, else a share of the cap."""
    cap = setting if setting is not None else max(PER_CLIENT_MIN, connections // PER_CLIENT_SHARE)
    return max(1, min(cap, connections))


def is_trusted(host: str, proxies: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in net for net in proxies)


def fd_budget(max_connections: int, fd_limit: int | None = None) -> FdBudget:
    """The setting's connection cap, lowered to what the fd limit can hold."""
    if fd_limit is None:
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if fd_limit == resource.RLIM_INFINITY or fd_limit <= 0:
        return FdBudget(max_connections, MAX_BACKLOG)
    budget = max(2, fd_limit - max(FD_RESERVE_MIN, fd_limit // 4))
    backlog = max(1, min(MAX_BACKLOG, budget // 8))
    return FdBudget(max(1, min(max_connections, budget - backlog)), backlog)


class ServeConfig(uvicorn.Config):
    """uvicorn's Config plus our limits (pickled as a whole to worker processes)."""

    def __init__(
        self,
        *args: Any,
        max_connections: int,
        header_timeout_s: float,
        body_timeout_s: float,
        body_total_timeout_s: float | None = None,
        max_connections_per_client: int | None = None,
        trusted_proxies: tuple[Network, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.max_connections_per_client = max_connections_per_client
        self.trusted_proxies = trusted_proxies
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.body_total_timeout_s = body_total_timeout_s


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap and request head/body timeouts.

    uvicorn only times out idle keep-alive connections between requests: a client that sends
    half a request head holds its socket forever. Here the head must be complete within
    header_timeout_s of the connection (or of its first byte on a kept-alive connection), the
    body may pause at most body_timeout_s between reads, and the whole body must arrive within
    body_total_timeout_s of its head (a sender of one byte every 20 s held its connection for as
    long as it liked while the pause timer restarted on every byte); otherwise 408 and close.
    """

    _last_refused_log = 0.0
    _refused = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._guard: asyncio.TimerHandle | None = None
        self._body_guard: asyncio.TimerHandle | None = None  # the whole body's deadline
        self._counted: str | None = None  # the client address this connection is counted under
        super().connection_made(transport)
        cap = getattr(self.config, "max_connections", None)
        if cap is not None and len(self.connections) > cap:
            self._refuse(_REFUSED, f"connection limit reached ({len(self.connections) - 1} open)")
            return
        if not self._admit_client():
            return
        self._arm(self._header_timeout)

    def _admit_client(self) -> bool:
        """Count the connection under its peer address (an IPv6 peer under its /64: client_key);
        refuse it past the per-client cap.

        A trusted proxy is exempt: its connections carry many clients, so the cap per client
        belongs at the proxy (docs/operations.md, "Behind a load balancer").
        """
        per_client = getattr(self.config, "max_connections_per_client", None)
        host = self.client[0] if self.client else None
        if per_client is None or host is None:
            return True
        if is_trusted(host, getattr(self.config, "trusted_proxies", ())):
            return True
        key = client_key(host)
        counts = _open_per_client(self.server_state)
        if counts[key] >= per_client:
            self._refuse(_CLIENT_REFUSED, f"per-client connection limit reached ({key})")
            return False
        counts[key] += 1
        self._counted = key
        return True

    @property
    def _header_timeout(self) -> float:
        return float(getattr(self.config, "header_timeout_s", 10.0))

    def _refuse(self, answer: bytes, why: str) -> None:
        """At a cap: answer at once and close, keeping the fd budget for work in flight."""
        cls = GuardedH11Protocol
        cls._refused += 1
        now = time.monotonic()
        if now - cls._last_refused_log >= REFUSED_LOG_EVERY_S:
            log.warning("%s: refused %d connection(s) since the last warning", why, cls._refused)
            cls._last_refused_log, cls._refused = now, 0
        self.transport.write(answer)
        self.transport.close()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._guard = self.loop.call_later(seconds, self._on_guard)

    def _disarm(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._arm(float(getattr(self.config, "body_timeout_s", 30.0)))  # idle between reads
            self._arm_body()
        elif state is h11.IDLE:
            self._disarm_body()
            if self._guard is None:  # the first bytes of a new head on a kept-alive connection
                self._arm(self._header_timeout)
        else:
            self._disarm()  # the request arrived whole: the app's own deadline applies now
            self._disarm_body()

    def _arm_body(self) -> None:
        """Start the whole body's clock once, when its first bytes (or its head) arrive."""
        total = getattr(self.config, "body_total_timeout_s", None)
        if total is not None and self._body_guard is None:
            self._body_guard = self.loop.call_later(float(total), self._on_body_deadline)

    def _disarm_body(self) -> None:
        if self._body_guard is not None:
            self._body_guard.cancel()
            self._body_guard = None

    def _on_body_deadline(self) -> None:
        self._body_guard = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:  # the app is not reading: not the client's fault
            self._body_guard = self.loop.call_later(self._header_timeout, self._on_body_deadline)
            return
        self._disarm()
        cycle = getattr(self, "cycle", None)
        if cycle is None or not cycle.response_started:  # the app has not answered: say why
            self.transport.write(_TIMED_OUT)
        self.transport.close()

    def _on_guard(self) -> None:
        self._guard = None
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            return
        if self.flow.read_paused:  # the app is not reading: not the client's fault
            self._arm(self._header_timeout)
            return
        if self.conn.our_state is h11.IDLE:
            self.transport.write(_TIMED_OUT)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # Answered before the body arrived (401, 413): read no more of it, close shortly.
            self.flow.pause_reading()
            self._disarm()
            self._disarm_body()
            self._guard = self.loop.call_later(LINGER_S, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_body()
        if self._counted is not None:
            counts = _open_per_client(self.server_state)
            counts[self._counted] -= 1
            if counts[self._counted] <= 0:
                del counts[self._counted]
            self._counted = None
        super().connection_lost(exc)


def _open_per_client(state: object) -> Counter[str]:
    """Open connections per client address, kept with the server's own connection set."""
    counts: Counter[str] | None = getattr(state, "suli_per_client", None)
    if counts is None:
        counts = Counter()
        state.suli_per_client = counts  # type: ignore[attr-defined]
    return counts


def _report(message: str) -> None:
    """Log; when logging itself fails (no fds left), write the line straight to fd 2."""
    try:
        log.error(message)
    except Exception:
        with contextlib.suppress(OSError):  # nowhere left to say it; the loop must live on
            os.write(2, f"suli: {message}\n".encode(errors="replace"))


def _exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's error reporter: never raises (a raising handler is what killed the loop)."""
    exc = context.get("exception")
    detail = f": {exc.__class__.__name__}: {exc}" if exc is not None else ""
    _report(f"event loop: {context.get('message', 'error')}{detail}")


def die(message: str) -> None:
    """End the process now with EXIT_LOOP_DIED; os._exit because idle non-daemon threads (the
    thread pool) would otherwise keep a process with no loop alive and listening."""
    _report(message)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(EXIT_LOOP_DIED)


class SupervisedLoop(asyncio.SelectorEventLoop):
    """An event loop whose death ends the process non-zero (a supervisor then restarts it)."""

    def __init__(self) -> None:
        super().__init__()
        self.set_exception_handler(_exception_handler)

    def run_forever(self) -> None:
        try:
            super().run_forever()
        except Exception as e:  # KeyboardInterrupt and SystemExit keep their usual meaning
            die(f"event loop died: {e.__class__.__name__}: {e}")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's loop factory (`loop="app.server:new_event_loop"`)."""
    return SupervisedLoop()


def logging_config(level: str, log_format: str = "text") -> dict[str, Any]:
    """The service's logging on stderr: plain lines for people or JSON lines to ship
    (SULI_LOG_FORMAT), one line per request from app.logs. uvicorn's access lines are off: they
    carry the raw query string, i.e. a caller's query text. The OpenSearch client's request
    lines show only at debug."""
    upper = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"suli": {"()": logs.formatter_class(log_format)}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "suli",
                "stream": "ext://sys.stderr",
            },
        },
        "root": {"handlers": ["stderr"], "level": upper},
        "loggers": {
            "uvicorn": {"handlers": [], "level": upper, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": upper, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "opensearch": {"level": "DEBUG" if upper == "DEBUG" else "WARNING"},
            "urllib3": {"level": "DEBUG" if upper == "DEBUG" else "WARNING"},
        },
    }


def build_config(
    settings: Settings, host: str, port: int, workers: int, log_level: str
) -> ServeConfig:
    fds = fd_budget(settings.max_connections)
    return ServeConfig(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        log_config=logging_config(log_level, settings.log_format),
        access_log=False,
        loop="app.server:new_event_loop",
        http=GuardedH11Protocol,
        # uvicorn answers 503 to requests past this many connections or tasks in flight; our
        # protocol refuses connections past the cap before that.
        limit_concurrency=fds.connections + 1,
        backlog=fds.backlog,
        timeout_keep_alive=settings.keep_alive_s,
        # X-Forwarded-* are read by the app itself, from SULI_TRUSTED_PROXIES only (create_app);
        # uvicorn's own default would believe any local process.
        proxy_headers=False,
        max_connections=fds.connections,
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        body_total_timeout_s=settings.body_total_timeout_s,
        max_connections_per_client=per_client_cap(
            settings.max_connections_per_client, fds.connections
        ),
        trusted_proxies=settings.trusted_proxy_networks,
    )


def run(settings: Settings, host: str, port: int, workers: int, log_level: str) -> None:
    """Serve until stopped; what uvicorn.run does, with our Config and protocol."""
    from uvicorn.supervisors import Multiprocess

    config = build_config(settings, host, port, workers, log_level)
    server = uvicorn.Server(config)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
            return
        server.run()
    except KeyboardInterrupt:  # Ctrl-C after a graceful shutdown: a normal stop, as in uvicorn.run
        return
    if not server.started:
        sys.exit(3)  # uvicorn's STARTUP_FAILURE
