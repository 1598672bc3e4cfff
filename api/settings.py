"""Service settings from the environment (MEMPLAN_*) and `planner serve` flags, read once behind a
cached getter that tests override (app.dependency_overrides or create_app(settings))."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMPLAN_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    store: Path | None = Field(default=None, description="probe store (SQLite); default as the CLI's")
    api_token: str | None = Field(default=None, description="bearer token for endpoints that start or cancel work")
    model_dirs: list[Path] = Field(default_factory=list, description="folders a request may name config.json files in")
    data_dirs: list[Path] = Field(
        default_factory=list, description="folders a request may name datasets and tokenizers in"
    )
    workers: int = Field(default=1, ge=1, le=64, description="uvicorn worker processes")
    probe_timeout_s: int = Field(default=600, ge=1, le=24 * 3600, description="longest a probe job may run")
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    test_faults: bool = Field(default=False, description="accept inject_fault in probe jobs (tests only)")

    @property
    def loopback_only(self) -> bool:
        return self.host in LOOPBACK


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
