"""Operations: ``/healthz`` (the process runs), ``/readyz`` (the store answers), ``/metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from memgas.service.deps import principal
from memgas.service.keys import Principal
from memgas.service.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The server process is up (no key needed)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(request: Request) -> JSONResponse:
    """The store can be read: ready to serve (no key needed); 503 while it cannot."""
    try:
        request.app.state.memgas.memory.store.has_user("readyz")
    except Exception as exc:  # any failure to read means not ready; say which, in one line
        return JSONResponse(Health(status="unavailable", detail=f"{type(exc).__name__}: {exc}"[:300]).model_dump(),
                            status_code=503)
    return JSONResponse(Health(status="ok").model_dump())


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, who: Principal = Depends(principal)) -> PlainTextResponse:
    """Request counts and latencies, adds, searches, answers, LLM calls and tokens, what the search-index cache
    holds, and, on a PostgreSQL store with replicas, where its reads ran (admin key)."""
    who.require_admin()
    state = request.app.state.memgas
    extra = {}
    llm = state.memory.llm_usage()
    if llm is not None:
        extra = {"llm_calls": llm["calls"], "llm_cached_calls": llm["cached"], "llm_failures": llm["failures"],
                 "llm_prompt_tokens": llm["prompt_tokens"], "llm_completion_tokens": llm["completion_tokens"]}
    routed = getattr(state.memory.store, "reads", None)  # a PostgresStore's: replica, primary_after_wait, primary
    if routed is not None:
        extra.update({f"store_reads_{where}": n for where, n in routed.items()})
    held = state.memory.index_cache()
    gauges = {"index_cache_bytes": held["bytes"], "index_cache_users": held["users"],
              "index_builds": held["builds"], "index_snapshot_loads": held["snapshot_loads"]}
    return PlainTextResponse(state.metrics.render(extra, gauges), media_type="text/plain; version=0.0.4")
