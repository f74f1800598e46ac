"""Operations routes (no token): liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import hmac
import logging
import os
from typing import Any, NoReturn

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from app.deps import RuntimeDep
from app.ratelimit import SharedStoreUnavailable
from app.runtime import Runtime, run_blocking
from app.schemas import Health, Ready, error_responses
from app.tokens import client_address
from suli.backends.base import as_store
from suli.errors import BackendUnavailable, SuliError, Unauthorized
from suli.service import Deadline

log = logging.getLogger(__name__)
router = APIRouter(tags=["operations"])


class NotReady(BackendUnavailable):
    """A readiness answer: its message is already free of internals (app.errors.public_error)."""

    public = True


READY_TIMEOUT_S = 5.0  # a readiness probe must answer well within a probe's usual period


@router.get(
    "/healthz",
    operation_id="healthz",
    response_model=Health,
    responses=error_responses(422),
    summary="Liveness: the process answers",
)
async def healthz() -> dict[str, Any]:
    """Never touches OpenSearch: a dead backend must not get the service restarted."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=Ready,
    responses=error_responses(422, 503),
    summary="Readiness: the backend answers and its index is usable",
)
async def readyz(runtime: RuntimeDep) -> dict[str, Any]:
    """200 only when the backend answers and its index (alias) exists, and the shared store
    (SULI_SHARED_STORE) answers when one is set; 503 otherwise.

    It needs no token, so it names no internals (item counts, store path, index or model names,
    URLs): a reason in a few words; the details go to the service log.
    """
    deadline = Deadline(min(READY_TIMEOUT_S, runtime.settings.deadline_s))
    try:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)
        info = await run_blocking(as_store(searcher.backend).ping, deadline=deadline)
    except SharedStoreUnavailable as e:  # the searcher is built only once the store answers
        _not_ready("the shared store (SULI_SHARED_STORE) does not answer", e.message)
    except SuliError as e:
        _not_ready(f"the {_backend(runtime)} does not answer", e.message)
    except Exception as e:  # any client fault here means "not ready", never a 500
        _not_ready(f"the {_backend(runtime)} does not answer", f"{e.__class__.__name__}: {e}")
    try:
        await run_blocking(runtime.check_shared_store, deadline=deadline)
    except SuliError as e:
        # With a shared store every route fails closed without it: take this replica out.
        _not_ready("the shared store (SULI_SHARED_STORE) does not answer", e.message)
    if "index" in info and not info["index"]:
        _not_ready("the items index is missing", f"alias {info.get('alias')!r} points at no index")
    model = searcher.embedder.name
    if info.get("model") and info["model"] != model:
        # After a reindex to another model, query vectors from this process would not match.
        _not_ready(
            "the index was built with another embedding model than this service uses",
            f"index {info['index']!r} holds vectors of model {info['model']!r} but this service "
            f"embeds queries with {model!r}; restart it with SULI_EMBEDDER set to match",
        )
    return {"status": "ready"}


def _backend(runtime: Runtime) -> str:
    """The search backend by the name an operator knows it."""
    return "embedded store" if runtime.settings.backend == "embedded" else "OpenSearch backend"


def _not_ready(reason: str, detail: str) -> NoReturn:
    log.warning("not ready: %s", detail)
    raise NotReady(f"not ready: {reason}")


@router.get(
    "/metrics",
    operation_id="metrics",
    responses=error_responses(401, 422),
    summary="Prometheus metrics (`Authorization: Bearer <SULI_METRICS_TOKEN>` when that is set)",
    response_class=Response,
)
def metrics(request: Request, runtime: RuntimeDep) -> Response:
    """A plain `def`: FastAPI runs it in the thread pool, so rendering the exposition never
    holds the event loop (inside an async route, two scrape loops stalled every search)."""
    _check_metrics_token(request, runtime)
    return Response(generate_latest(_registry(runtime)), media_type=CONTENT_TYPE_LATEST)


def _check_metrics_token(request: Request, runtime: Runtime) -> None:
    """401 unless the request carries SULI_METRICS_TOKEN (when set) as its bearer token."""
    expected = runtime.settings.metrics_token
    if expected is None:
        return
    address = client_address(request.scope)
    runtime.bad_tokens.peek(address)  # an address guessing the token waits, as on the API
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    want = expected.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), want):
        runtime.bad_tokens.check(address)
        raise Unauthorized("/metrics needs the metrics token (header `Authorization: Bearer ...`)")


def _registry(runtime: Runtime) -> CollectorRegistry:
    """This app's registry; under `suli serve --workers N`, every worker's counters summed
    (prometheus_client's multiprocess mode: each worker writes its values to a shared folder)."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return runtime.metrics.registry
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry
