"""The FastAPI app: routers per resource, bad input as 422 naming its field (404 for unknown names) in the API's
field names (api/errors.py), request-size limits (Content-Length, and chunked bodies counted as they stream:
api/limits.py), Prometheus metrics (5xx included), the probe job queue started with the app, and /docs and /redoc
served from the package (fastapi-offline: no CDN).

    uvicorn --factory api.main:create_app     (or `planner serve`)
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from api.auth import BearerToken, HostAllowList, allowed_hosts, refusal
from api.deps import Forbidden
from api.errors import detail, validation_detail
from api.jobs import JobQueue
from api.limits import BodyLimit
from api.metrics import Metrics
from api.routes import catalog, ops, plans, probes, web
from api.sandbox import Busy, Deadline, OverMemory, Pool
from api.settings import Settings, get_settings
from planner.errors import BadInput, UnknownName
from planner.evidence import db as sql


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    if why := refusal(settings):  # what `planner serve` refuses to start, refused under uvicorn --factory too
        raise BadInput(why)
    from planner.evidence.store import default_path

    store = settings.store or default_path()
    queue = JobQueue(store, settings.probe_timeout_s, settings=settings)
    metrics = Metrics()
    pool = Pool(settings.work_processes, settings.work_memory_mib, settings.heavy_slots, preload=("api.work",))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        pool.start()
        queue.start()
        yield
        queue.stop()
        pool.stop()

    # FastAPI's own /docs and /redoc load their scripts from a CDN: blank on a closed network
    app = FastAPIOffline(
        title="memplan",
        version="0.1.0",
        lifespan=lifespan,
        description="Memory planner and OOM-avoidance advisor for training (vision-)language models.",
    )
    app.state.queue, app.state.metrics, app.state.settings, app.state.pool = queue, metrics, settings, pool
    app.dependency_overrides[get_settings] = lambda: settings
    for r in (web.router, plans.router, catalog.router, probes.router, ops.router):  # web: the page and what it asks
        app.include_router(r)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)  # chunked bodies: counted as they stream
    app.add_middleware(BearerToken, token=settings.api_token)  # with a token: every path but the page's and docs'
    app.add_middleware(HostAllowList, allowed_hosts=allowed_hosts(settings))  # other Host names: 400 (DNS rebinding)

    @app.middleware("http")
    async def limits_and_metrics(request: Request, call_next):
        t0 = time.perf_counter()
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > settings.max_body_bytes):
            response = JSONResponse({"detail": f"request body over {settings.max_body_bytes} bytes"}, 413)
        else:
            try:
                response = await deadline(request, call_next, settings.request_timeout_s)
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

    @app.exception_handler(Deadline)
    async def cut_short(request: Request, e: Deadline):
        limit = getattr(request.state, "deadline_s", settings.request_timeout_s)
        return JSONResponse(
            {"detail": f"{request.url.path} was cut short: planning ran past its {limit:g} s deadline"}, 504
        )

    @app.exception_handler(Busy)
    async def busy(_: Request, e: Busy):
        return JSONResponse({"detail": f"{e}: try again later"}, 429, headers={"Retry-After": "5"})

    @app.exception_handler(OverMemory)
    async def over_memory(_: Request, e: OverMemory):
        limit = f"{settings.work_memory_mib} MiB (MEMPLAN_WORK_MEMORY_MIB)"
        return JSONResponse(detail(BadInput(f"{e}: the request needs more than {limit}"), "value_error"), 422)

    async def store_unavailable(_: Request, e: Exception):
        """The store is corrupt, locked or unreachable: a 503 within the request's store wait (api/jobs.py)."""
        return JSONResponse({"detail": f"the probe store is unavailable: {sql.reason(e)}"}, 503, {"Retry-After": "5"})

    for kind in (sql.StoreUnavailable, *sql.errors()):
        app.add_exception_handler(kind, store_unavailable)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError):
        return JSONResponse(validation_detail(e.errors()), 422)

    app.mount("/static", StaticFiles(directory=Path(__file__).with_name("web")), name="static")

    return app


async def deadline(request: Request, call_next, default_s: float):
    """call_next, cut short with a 504 past the request's deadline: `request.state.deadline_s` where the route set
    one (a planning call: api/routes/plans.py), else `default_s`, plus 2 s for the answer to be written."""
    t0 = time.monotonic()
    task = asyncio.ensure_future(call_next(request))
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.5)
        if done:
            return task.result()
        limit = getattr(request.state, "deadline_s", default_s)
        if time.monotonic() - t0 > limit + 2:
            task.cancel()
            what = f"{request.method} {request.url.path}"
            return JSONResponse({"detail": f"{what} was cut short: it ran past its {limit:g} s deadline"}, 504)
