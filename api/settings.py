"""Service settings from the environment (MEMPLAN_*) and `planner serve` flags, read once behind a
cached getter that tests override (app.dependency_overrides or create_app(settings))."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMPLAN_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    store: str | Path | None = Field(
        default=None,
        description="probe store: a SQLite file, or a postgresql:// URL shared by replicas; default as the CLI's",
    )
    api_token: str | None = Field(default=None, description="bearer token for endpoints that start or cancel work")
    model_dirs: list[Path] = Field(default_factory=list, description="folders a request may name config.json files in")
    data_dirs: list[Path] = Field(
        default_factory=list, description="folders a request may name datasets and tokenizers in"
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

    @property
    def loopback_only(self) -> bool:
        return self.host in LOOPBACK


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
