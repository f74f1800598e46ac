"""OpenSearch clients, the core's errors for transport faults, and the per-read time budget."""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import opensearchpy
import orjson
from opensearchpy import OpenSearch
from opensearchpy.serializer import JSONSerializer

from suli.backends.opensearch import tls
from suli.deadline import in_force
from suli.errors import BackendUnavailable, DeadlineExceeded, InvalidInput
from suli.settings import Settings

T = TypeVar("T")

POOL_MAXSIZE = 32  # kept-alive connections per node (the service's thread pool is 40 wide)
# The shortest client timeout a read is sent with; a failed leg is asked again only when at
# least this much of the request's time is left (a shorter ask could not be answered anyway).
MIN_TIMEOUT_S = 0.05


class _OneLine(logging.Filter):
    """Keeps opensearch-py's line about a failed attempt, drops its traceback.

    Every failure reaches the caller as a core error the edge logs once; a traceback per
    attempt only costs: with a node frozen, dozens of them rendered at once held the log
    handler's lock long enough to push 504s far past their deadline.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


_transport_log = logging.getLogger("opensearch")
if not any(isinstance(f, _OneLine) for f in _transport_log.filters):
    _transport_log.addFilter(_OneLine())


# Non-str keys as strings, as the stdlib encoder writes them; datetimes and dataclasses go to
# JSONSerializer.default like before (its isoformat(), its refusal), and so do numpy values
# (orjson would write a float32 as its shortest float32 text, 0.1, where the stdlib path writes
# the float64 it converts to, 0.10000000149011612: one value to OpenSearch, not the same text).
_ORJSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


class OrjsonSerializer(JSONSerializer):
    """opensearch-py's JSON serializer through orjson: every answer of the engine is parsed
    here and every request body written. The stdlib's parser is the service's largest single
    Python cost in py-spy's profile; measured in CPU time (bench/service_cpu.py --parts) orjson
    reads the query set's answers in 0.46-0.59x the time, about 0.3 ms of the ~13 ms a query.

    The text is the same JSON as JSONSerializer's (compact, UTF-8 not escaped): the same
    characters but for a float's exponent form (1e-7 for 1e-07, 0.000015 for 1.5e-05, the
    same number), and a NaN or infinity, which the stdlib writes as the non-JSON NaN and orjson
    as null (Suli sends neither: vectors are normalised). What orjson refuses to write (an integer
    beyond 64 bits) or read (NaN, a lone surrogate) goes to the stdlib: nothing fails that
    did not before. One reading differs: an integer outside [-2**63, 2**64) reads as a float;
    OpenSearch's own numbers (took, counts, seq_no, versions) are Java longs, and Suli's
    documents hold no other numbers."""

    def loads(self, s: str) -> Any:
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError:
            return super().loads(s)

    def dumps(self, data: Any) -> Any:
        if isinstance(data, str):
            return data
        try:
            return orjson.dumps(data, default=self.default, option=_ORJSON_OPTIONS).decode()
        except TypeError:
            return super().dumps(data)  # a huge int; what neither can write raises its error


SERIALIZER = OrjsonSerializer()


def make_client(settings: Settings, *, max_retries: int = 1) -> OpenSearch:
    """A client for settings.opensearch_url (comma-separated hosts allowed)."""
    assert settings.opensearch_url
    hosts = [h.strip() for h in settings.opensearch_url.split(",") if h.strip()]
    auth = None
    if settings.opensearch_user:
        pw = settings.opensearch_password.get_secret_value() if settings.opensearch_password else ""
        auth = (settings.opensearch_user, pw)
    return OpenSearch(
        hosts=hosts,
        http_auth=auth,
        verify_certs=settings.opensearch_verify_certs,
        ca_certs=settings.opensearch_ca_certs,
        client_cert=settings.opensearch_client_cert,
        client_key=settings.opensearch_client_key,
        timeout=settings.opensearch_timeout_s,
        max_retries=max_retries,
        retry_on_timeout=False,
        http_compress=False,
        # One pooled connection per concurrent caller: the query service runs searches in a
        # thread pool, and urllib3's default pool of 1 would open (and drop) a new TCP
        # connection for nearly every concurrent request.
        pool_maxsize=POOL_MAXSIZE,
        serializer=SERIALIZER,
    )


def wrap(call: Callable[[], T], what: str) -> T:
    """Run one client call, turning transport faults into the core's errors."""
    try:
        return call()
    except opensearchpy.ConnectionTimeout as e:
        raise DeadlineExceeded(f"OpenSearch did not answer {what} in time") from e
    except opensearchpy.ConnectionError as e:
        secured = tls.connection_fault(e)
        if secured:
            raise BackendUnavailable(f"OpenSearch connection failed ({what}): {secured}") from e
        raise BackendUnavailable(f"OpenSearch is unreachable ({what}): {e.info or e}") from e
    except tls.REFUSED as e:
        raise BackendUnavailable(tls.refusal(e, what)) from e
    except opensearchpy.NotFoundError as e:
        raise BackendUnavailable(
            f"OpenSearch index missing ({what}); run `suli index` first"
        ) from e
    except opensearchpy.TransportError as e:
        status = e.status_code if isinstance(e.status_code, int) else 0
        if status == 400 and "regexp" in str(e.info):
            raise InvalidInput("regex: pattern is too complex or not valid here", "regex") from e
        if status in (429,) or status >= 500:
            raise BackendUnavailable(f"OpenSearch failed {what} (status {status})") from e
        raise


class Connection:
    """What every part of the backend shares: settings, the two clients, where the items live,
    and the time budget of one read. The parts hold one and never copy its clients."""

    def __init__(self, settings: Settings, dimension: int, model: str = "") -> None:
        self.settings = settings
        self.dimension = dimension
        self.model = model
        self.alias = settings.index_alias
        self.acl_index = settings.acl_index
        self.client = make_client(settings, max_retries=1)
        # Writes: the transport never retries; the bulk layer owns all retries.
        self.write_client = make_client(settings, max_retries=0)
        # Every workspace in an index of its own (suli.backends.opensearch.workspaces).
        self.isolated = settings.isolate_workspaces
        self.workspace: str | None = None  # set on a view of one workspace's index

    def view(self, alias: str, workspace: str) -> Connection:
        """The same clients on one workspace's own alias, read and written as if it were the
        shared one (what `suli reindex` and its rollback work on)."""
        view = copy.copy(self)
        view.alias = alias
        view.workspace = workspace
        view.isolated = False
        return view

    def time_left(self, timeout_s: float | None = None, since: float | None = None) -> float:
        """Seconds one read may take (<= 0 when none): the client's default timeout, cut to
        `timeout_s` (counted from `since`, a monotonic time) and to the deadline in force."""
        left = self.settings.opensearch_timeout_s
        if timeout_s:
            spent = time.monotonic() - since if since is not None else 0.0
            left = min(left, timeout_s - spent)
        deadline = in_force()
        if deadline is not None:
            left = min(left, deadline.left())
        return left

    def read_params(
        self, timeout_s: float | None = None, since: float | None = None
    ) -> dict[str, Any]:
        """Per-request parameters of one read: the client gives up when the request's time is
        up, and (`timeout`, for search bodies) OpenSearch stops the search by then too, so no
        work is left running past the request's deadline. DeadlineExceeded when none is left."""
        left = self.time_left(timeout_s, since)
        if left <= 0:
            raise DeadlineExceeded("request exceeded its deadline before OpenSearch was asked")
        left = max(left, MIN_TIMEOUT_S)
        params: dict[str, Any] = {"request_timeout": left}
        if timeout_s or in_force() is not None:
            params["timeout"] = f"{max(int(left * 1000), 50)}ms"
        return params

    def search(
        self,
        body: dict[str, Any],
        what: str,
        index: str | None = None,
        timeout_s: float | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any]:
        """One search; `missing_ok`: an index or alias not made yet answers with no hits."""
        params = self.read_params(timeout_s)
        params.pop("timeout", None)
        if missing_ok:
            params["ignore_unavailable"] = "true"
        return wrap(
            lambda: self.client.search(index=index or self.alias, body=body, params=params), what
        )

    def close(self) -> None:
        self.client.close()
        self.write_client.close()


@contextlib.contextmanager
def counting(client: OpenSearch) -> Iterator[list[str]]:
    """The requests `client` sends while inside ("METHOD endpoint"), counted at each pooled
    connection's `perform_request` (the round trips of a search, for tests and benches:
    nothing stands in for the engine)."""
    sent: list[str] = []
    conns = list(client.transport.connection_pool.connections)
    for conn in conns:
        real = conn.perform_request

        def counted(method: str, url: str, *a: Any, _real: Any = real, **kw: Any) -> Any:
            sent.append(f"{method} {url.split('?')[0].rsplit('/', 1)[-1]}")
            return _real(method, url, *a, **kw)

        conn.perform_request = counted
    try:
        yield sent
    finally:
        for conn in conns:
            del conn.perform_request  # the class's method again
