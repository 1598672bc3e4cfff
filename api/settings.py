"""Service settings from the environment (MEMPLAN_*) and `planner serve` flags, read once behind a
cached getter that tests override (app.dependency_overrides or create_app(settings))."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.sandbox import default_processes
from planner.errors import BadInput

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MIN_TOKEN_CHARS = 16  # a guard against "secret" and "changeme"; make one as MAKE_TOKEN says (43 characters)
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
HOST_NAME = re.compile(r"(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?|\[[0-9a-f:.]+\]")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMPLAN_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    store: str | Path | None = Field(
        default=None,
        description="probe store: a SQLite file, or a postgresql:// URL shared by replicas; default as the CLI's",
    )
    api_token: str | None = Field(
        default=None,
        description="bearer token every /v1 endpoint and /metrics then require (api/auth.py); 16+ characters, no spaces",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names clients may use besides the loopback names and --host (JSON list; '*.example.com' too)",
    )
    insecure: bool = Field(
        default=False, description="start beyond loopback without a token, or on 0.0.0.0 answering any Host name"
    )

    @field_validator("api_token")
    @classmethod
    def _token_is_a_secret(cls, token: str | None) -> str | None:
        """At least MIN_TOKEN_CHARS printable ASCII characters without spaces (never echoed: it is a secret)."""
        if token is None:
            return None
        if not token.strip():
            raise BadInput(f"MEMPLAN_API_TOKEN is empty: unset it, or set a secret ({MAKE_TOKEN})", "api_token")
        if len(token) < MIN_TOKEN_CHARS or not (token.isascii() and token.isprintable()) or " " in token:
            raise BadInput(
                f"MEMPLAN_API_TOKEN has {len(token)} characters: it needs {MIN_TOKEN_CHARS} or more printable ASCII "
                f"ones, no spaces ({MAKE_TOKEN})",
                "api_token",
            )
        return token

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        """Names as a Host header carries them, lower case (an IPv6 address in brackets), without port or scheme."""
        out = []
        for name in names:
            host = name.strip().lower()
            if ":" in host and not host.startswith("["):
                host = f"[{host}]"  # an IPv6 address: the Host header brackets it
            if host == "*":
                raise BadInput("--allowed-host '*' would answer any name: pass --insecure for that", "allowed_hosts")
            if not HOST_NAME.fullmatch(host):
                raise BadInput(
                    f"--allowed-host {name!r}: a host name, an IP address or '*.domain' (no scheme, port or path)",
                    "allowed_hosts",
                )
            out.append(host)
        return out

    model_dirs: list[Path] = Field(default_factory=list, description="folders a request may name config.json files in")
    data_dirs: list[Path] = Field(
        default_factory=list, description="folders a request may name datasets and tokenizers in"
    )
    fetch_models: bool = Field(
        default=False,
        description="fetch the config.json of a Hugging Face id a request names and memplan lacks (HF_ENDPOINT)",
    )
    workers: int = Field(default=1, ge=1, le=64, description="uvicorn worker processes")
    probe_timeout_s: int = Field(default=600, ge=1, le=24 * 3600, description="longest a probe job may run")
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    test_faults: bool = Field(default=False, description="accept inject_fault in probe jobs (tests only)")
    # where probe jobs run (api/executors): this host's device slots, or the cluster's scheduler
    executor: Literal["local", "slurm", "ray"] = "local"
    state_dir: Path | None = Field(
        default=None,
        description="local job folders and slot locks (default: beside a SQLite store, else the user data dir)",
    )
    shared_dir: Path | None = Field(
        default=None, description="job folders every cluster node can read and write (slurm, ray); default state_dir"
    )
    probe_python: str | None = Field(default=None, description="the python a cluster node runs probes with")
    probe_gpus: int = Field(default=1, ge=0, le=64, description="GPUs a cluster probe job asks for (GRES gpu:N)")
    slurm_partition: str | None = Field(default=None, max_length=128)
    slurm_account: str | None = Field(default=None, max_length=128)
    slurm_args: list[str] = Field(default_factory=list, description="more #SBATCH options, one per item")
    ray_address: str = Field(default="http://127.0.0.1:8265", description="the Ray dashboard (Jobs API)")
    ray_resources: dict[str, float] = Field(
        default_factory=dict, description="custom Ray resources a probe job asks for (a node pool), as JSON"
    )

    # planning work (api/sandbox.py): processes, their memory, deadlines; probe jobs' back-pressure
    work_processes: int = Field(default_factory=default_processes, ge=1, le=64, description="planning workers")
    work_memory_mib: int = Field(default=2048, ge=256, description="most memory one planning worker may hold, MiB")
    request_timeout_s: float = Field(default=30, gt=0, le=3600, description="deadline of a request (504 past it)")
    heavy_timeout_s: float = Field(
        default=600, gt=0, le=24 * 3600, description="deadline of a plan with verify or sim evidence (504 past it)"
    )
    heavy_slots: int = Field(default=1, ge=1, le=64, description="plans with verify or sim evidence at once")
    max_queued_jobs: int = Field(default=200, ge=1, description="probe jobs queued at most (429 past it)")
    jobs_per_minute: int = Field(default=60, ge=1, description="probe jobs one client may submit a minute (429)")

    @property
    def loopback_only(self) -> bool:
        return self.host in LOOPBACK


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
