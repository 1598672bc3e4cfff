"""The FastAPI app: routers per resource, bad input as 422 naming its field (404 for unknown names) in the API's
field names (api/errors.py), request-size limits (Content-Length, and chunked bodies counted as they stream:
api/limits.py), Prometheus metrics (5xx included), the probe job queue started with the app, and /docs and /redoc
served from the package (fastapi-offline: no CDN).

    uvicorn --factory api.main:create_app     (or `planner serve`)
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from api.deps import Forbidden
from api.errors import detail, validation_detail
from api.jobs import JobQueue
from api.limits import BodyLimit
from api.metrics import Metrics
from api.routes import catalog, plans, probes, web
from api.settings import Settings, get_settings
from planner.errors import BadInput, UnknownName


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    from planner.evidence.store import default_path

    store = settings.store or default_path()
    queue = JobQueue(store, settings.probe_timeout_s, settings=settings)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        queue.start()
        yield
        queue.stop()

    # FastAPI's own /docs and /redoc load their scripts from a CDN: blank on a closed network
    app = FastAPIOffline(
        title="memplan",
        version="0.1.0",
        lifespan=lifespan,
        description="Memory planner and OOM-avoidance advisor for training (vision-)language models.",
    )
    app.state.queue, app.state.metrics, app.state.settings = queue, metrics, settings
    app.dependency_overrides[get_settings] = lambda: settings
    for r in (web.router, plans.router, catalog.router, probes.router):  # web: the page and what it asks besides
        app.include_router(r)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)  # chunked bodies: counted as they stream

    @app.middleware("http")
    async def limits_and_metrics(request: Request, call_next):
        t0 = time.perf_counter()
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > settings.max_body_bytes):
            response = JSONResponse({"detail": f"request body over {settings.max_body_bytes} bytes"}, 413)
        else:
            try:
                response = await call_next(request)
            except Exception:  # the server answers 500: count it before the error handler does
                metrics.observe(
                    request.method,
                    getattr(request.scope.get("route"), "path", "unmatched"),
                    500,
                    time.perf_counter() - t0,
                )
                raise
        route = request.scope.get("route")
        metrics.observe(
            request.method, getattr(route, "path", "unmatched"), response.status_code, time.perf_counter() - t0
        )
        return response

    @app.exception_handler(UnknownName)
    async def unknown(_: Request, e: UnknownName):
        return JSONResponse(detail(e, "not_found"), 404)

    @app.exception_handler(Forbidden)
    async def forbidden(_: Request, e: Forbidden):
        return JSONResponse(detail(e, "forbidden"), 403)

    @app.exception_handler(BadInput)
    async def bad_input(_: Request, e: BadInput):
        return JSONResponse(detail(e, "value_error"), 422)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError):
        return JSONResponse(validation_detail(e.errors()), 422)

    app.mount("/static", StaticFiles(directory=Path(__file__).with_name("web")), name="static")

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict:
        """ok, or degraded with the reason while the store cannot be read or written (the job workers
        retry with backoff meanwhile, and this says ok again by itself once a write succeeds)."""
        from planner.evidence.db import errors

        try:
            depth = queue.depth()
        except errors() as e:
            depth, reason = None, f"the store cannot be read: {e.__class__.__name__}: {e}"
        else:
            ok, error = queue.healthy()
            reason = None if ok else f"the store cannot be written: {error}"
        executor = queue.scheduler.kind if queue.scheduler else "local"
        return {
            "status": "degraded" if reason else "ok",
            "reason": reason,
            "queue_depth": depth,
            "slots": queue.slots,
        } | {"executor": executor}

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def prometheus() -> str:
        """Counters from memory; the queue depth from the store, NaN while the store cannot be read (the
        metrics must still answer then: that is when they are needed)."""
        from planner.evidence.db import errors

        try:
            depth = queue.depth()
        except errors():
            depth = None
        return metrics.render(depth, dict(queue.outcomes), queue.store_errors)

    return app
