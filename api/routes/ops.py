"""GET /healthz and GET /metrics: served on the event loop (`async def`, never the threadpool plans and checks use),
from memory and from the store's state as the job queue's monitor last read it (api/health.py), so both answer at
once whatever the store, the plans or the checks are doing."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz(request: Request) -> dict:
    """ok, or degraded with the reason while the store cannot be read or written (the job workers retry with
    backoff meanwhile, and this says ok again by itself once a reading or a write succeeds); the queue depth, the
    age of the store reading it comes from (read every second), the device slots and the executor."""
    return request.app.state.queue.monitor.health()


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus(request: Request) -> str:
    """Counters from memory; the queue depth from the last store reading, NaN while the store cannot be read (the
    metrics must still answer then: that is when they are needed)."""
    queue = request.app.state.queue
    return request.app.state.metrics.render(queue.monitor.reading.depth, dict(queue.outcomes), queue.store_errors)
