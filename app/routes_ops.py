"""Operations routes (no token): liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.deps import RuntimeDep
from app.runtime import run_blocking
from app.schemas import HealthOut, ReadyOut, error_responses
from suli.errors import BackendUnavailable, SuliError
from suli.service import Deadline

router = APIRouter(tags=["operations"])

READY_TIMEOUT_S = 5.0  # a readiness probe must answer well within a probe's usual period


@router.get("/healthz", response_model=HealthOut, summary="Liveness: the process answers")
async def healthz() -> dict[str, Any]:
    """Never touches OpenSearch: a dead backend must not get the service restarted."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses=error_responses(503),
    summary="Readiness: OpenSearch reachable and the items alias present",
)
async def readyz(runtime: RuntimeDep) -> dict[str, Any]:
    """200 only when the backend answers and its index (alias) exists; 503 otherwise."""
    deadline = Deadline(min(READY_TIMEOUT_S, runtime.settings.deadline_s))
    try:
        searcher = await run_blocking(runtime.searcher, deadline=deadline)
        info = await run_blocking(searcher.backend.ping, deadline=deadline)
    except SuliError as e:
        raise BackendUnavailable(f"not ready: {e.message}") from e
    except Exception as e:  # any client fault here means "not ready", never a 500
        raise BackendUnavailable(f"not ready: {e.__class__.__name__}: {e}") from e
    if "index" in info and not info["index"]:
        raise BackendUnavailable(f"not ready: alias {info.get('alias')!r} points at no index")
    model = searcher.embedder.name
    if info.get("model") and info["model"] != model:
        # After a reindex to another model, query vectors from this process would not match.
        raise BackendUnavailable(
            f"not ready: index {info['index']!r} holds vectors of model {info['model']!r} but "
            f"this service embeds queries with {model!r}; restart it with SULI_EMBEDDER set to match"
        )
    return {"status": "ready", "backend": info}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
