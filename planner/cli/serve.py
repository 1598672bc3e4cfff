"""`planner serve`: the REST API (FastAPI on uvicorn); flags override MEMPLAN_* environment settings."""

from __future__ import annotations

import argparse
import os
import sys

from planner.cli import advising, argtypes

SERVICE_WAIT_S = 1.0  # $MEMPLAN_STORE_WAIT_S for the server: how long one store call may wait for a lock
STARTUP_WAIT_S = 5.0  # the store's check before the server starts
GRACE_S = 10  # SIGTERM: requests still running this long are cut short


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--host", default=None, help="listen address (default 127.0.0.1; env MEMPLAN_HOST)")
    p.add_argument("--port", type=argtypes.int_in("--port", 1, 65535), default=None, help="default 8000 (MEMPLAN_PORT)")
    p.add_argument("--workers", type=argtypes.int_in("--workers", 1, 64), default=None, help="uvicorn worker processes")
    p.add_argument(
        "--model-dir",
        action="append",
        default=None,
        help="folder whose config.json files requests may name (repeatable; MEMPLAN_MODEL_DIRS as JSON)",
    )
    p.add_argument(
        "--data-dir",
        action="append",
        default=None,
        help="folder whose datasets and tokenizer folders requests may name (repeatable; MEMPLAN_DATA_DIRS)",
    )
    p.add_argument(
        "--fetch-models",
        action="store_true",
        default=None,
        help="fetch the config.json of a Hugging Face id a request names and memplan lacks (MEMPLAN_FETCH_MODELS=1; "
        "default off: a request does not make the server reach the network)",
    )
    p.add_argument(
        "--probe-timeout",
        type=argtypes.positive_int("--probe-timeout"),
        default=None,
        help="longest a probe job may run, seconds (default 600)",
    )
    p.add_argument(
        "--executor",
        choices=["local", "slurm", "ray"],
        default=None,
        help="where probe jobs run: this host's devices (default), Slurm (sbatch) or Ray Jobs (MEMPLAN_EXECUTOR)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a Host name clients use, besides loopback's and --host's (repeatable; MEMPLAN_ALLOWED_HOSTS as JSON)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="start beyond loopback without MEMPLAN_API_TOKEN, or on 0.0.0.0 answering any Host (MEMPLAN_INSECURE=1)",
    )
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json

    from planner.cli import extras
    from planner.errors import BadInput

    extras.require("planner serve", {m: "api" for m in ("fastapi", "fastapi_offline", "uvicorn", "pydantic_settings")})
    from api.auth import refusal, waived
    from api.settings import Settings

    flags = {
        "MEMPLAN_HOST": args.host,
        "MEMPLAN_PORT": args.port,
        "MEMPLAN_WORKERS": args.workers,
        "MEMPLAN_STORE": args.store,
        "MEMPLAN_PROBE_TIMEOUT_S": args.probe_timeout,
        "MEMPLAN_EXECUTOR": args.executor,
        "MEMPLAN_MODEL_DIRS": json.dumps(args.model_dir) if args.model_dir else None,
        "MEMPLAN_DATA_DIRS": json.dumps(args.data_dir) if args.data_dir else None,
        "MEMPLAN_ALLOWED_HOSTS": json.dumps(args.allowed_host) if args.allowed_host else None,
        "MEMPLAN_INSECURE": "1" if args.insecure else None,
        "MEMPLAN_FETCH_MODELS": "1" if args.fetch_models else None,
    }
    os.environ.update({k: str(v) for k, v in flags.items() if v is not None})  # read by each worker
    from pydantic import ValidationError

    from planner.config.spec import bad_input

    try:
        s = Settings()
    except ValidationError as e:
        raise BadInput(f"{bad_input(e)} (from the MEMPLAN_* environment)") from None
    if why := refusal(s):  # before the server is loaded: one line, exit 2
        raise BadInput(why, "host")
    if warning := waived(s):
        sys.stderr.write(f"planner: warning: {warning}\n")
    import uvicorn

    from api.executors import unavailable

    why = unavailable(s)
    if why:
        raise BadInput(f"--executor {s.executor}: {why}", "executor")
    from planner.evidence import db
    from planner.evidence.store import Store, default_path

    os.environ.setdefault(db.WAIT_ENV, str(SERVICE_WAIT_S))  # each worker's store calls: a 503, never a hang
    Store(s.store or default_path(), wait=STARTUP_WAIT_S).close()  # a bad store: one line, not each worker's trace
    uvicorn.run(
        "api.main:create_app",
        factory=True,
        host=s.host,
        port=s.port,
        workers=s.workers,
        timeout_graceful_shutdown=GRACE_S,  # then the job queue's own drain (api/jobs.py DRAIN_S)
    )
    return 0
