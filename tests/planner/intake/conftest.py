"""planner/intake's tests: the committed example configurations (tests/data/frameworks/), read with no Hugging Face or
ModelScope cache of this machine in the way (each test sees empty caches)."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "frameworks"
CONFIG_SUFFIXES = (".sh", ".yaml", ".yml", ".json", ".py")
# sourced by other scripts, no training command of its own (test_bad_input checks what reading it says)
HELPERS = {DATA / "scripts" / "VILA" / "scripts" / "setups" / "train.sh"}


def examples() -> list[Path]:
    return sorted(p for p in DATA.rglob("*") if p.suffix in CONFIG_SUFFIXES and p not in HELPERS)


@pytest.fixture(autouse=True)
def _empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
