"""The field corpus (tests/field/, benchmarks/field.py): every run says where it was reported, on what, with which
files and what happened, and `planner check --config` answers each one or refuses it in one line, never with a
traceback. The table in benchmarks/results/field.json is of this corpus."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from planner.model import catalog

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import field

RUNS = field.runs()
KINDS = {"sft", "dpo", "grpo", "ppo", "rloo", "reinforce++"}


def _ids():
    return [folder.name for folder, _ in RUNS]


@pytest.mark.parametrize(("folder", "meta"), RUNS, ids=_ids())
def test_every_run_says_where_on_what_and_what_happened(folder, meta):
    assert meta["source"].startswith("https://github.com/") and (
        "/issues/" in meta["source"] or "/pull/" in meta["source"]
    )
    for key in ("framework", "release", "model", "note"):
        assert isinstance(meta[key], str) and meta[key].strip(), key
    assert catalog.gpu(meta["gpu"]).name == meta["gpu"]  # a catalog card, by its own name
    assert isinstance(meta["gpus"], int) and meta["gpus"] >= 1 and isinstance(meta["nodes"], int) and meta["nodes"] >= 1
    assert meta["kind"] in KINDS and isinstance(meta["vlm"], bool) and meta["outcome"] in ("oom", "ran")
    if "measured_gib" in meta:
        assert isinstance(meta["measured_gib"], (int, float)) and 0 < meta["measured_gib"] < 300
    assert meta.get("measured_kind", "device") in field.MEASURED_KINDS
    flags = meta["flags"]
    assert all(isinstance(f, str) for f in flags) and flags[flags.index("--gpu") + 1] == meta["gpu"]


@pytest.mark.parametrize(("folder", "meta"), RUNS, ids=_ids())
def test_a_runs_folder_holds_its_files_and_nothing_else(folder, meta):
    assert meta["files"] and all((folder / f).is_file() and (folder / f).stat().st_size > 0 for f in meta["files"])
    assert {p.name for p in folder.iterdir()} == {*meta["files"], "run.toml"}


@pytest.mark.parametrize(("folder", "meta"), RUNS, ids=_ids())
def test_check_answers_every_run_or_refuses_it_in_one_line(folder, meta):
    rc, answer, message = field.check(folder, meta)
    assert rc in (0, 2, 3), message  # -1: an exception escaped the CLI
    if rc == 2:
        assert message.startswith("planner: error: ") and "Traceback" not in message
    else:
        assert answer["plan"]["memory"]["device_total_bytes"] > 0


def test_the_corpus_mixes_vlms_rl_frameworks_and_both_outcomes():
    metas = [m for _, m in RUNS]
    assert sum(m["vlm"] for m in metas) >= 20 and sum(m["kind"] != "sft" for m in metas) >= 12
    assert len({m["framework"].split(" ")[0] for m in metas}) >= 6
    assert {m["outcome"] for m in metas} == {"oom", "ran"}


def test_a_figure_is_compared_with_the_plans_figure_of_its_kind():
    """torch.cuda.max_memory_allocated against the peak allocated; max_memory_reserved against it with the allocator's
    reserve; nvidia-smi against the device total (field.of_kind)."""
    memory = {
        "device_total_bytes": 30 * field.GIB,
        "peak_allocated_bytes": 20 * field.GIB,
        "overheads": [{"name": "context", "bytes": field.GIB}, {"name": "fragmentation", "bytes": 3 * field.GIB}],
    }
    assert [field.of_kind(memory, k) for k in field.MEASURED_KINDS] == [30, 23, 20]


def test_the_stored_table_is_of_this_corpus():
    stored = json.loads((ROOT / "benchmarks" / "results" / "field.json").read_text())
    assert [r["run"] for r in stored["rows"]] == _ids()
    assert field.summary(stored["rows"])["runs"] == len(RUNS)
