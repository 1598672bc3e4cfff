"""`planner profile`: where one configuration's activations go (the sim probe), its record stored."""

import json

import pytest

from tests.planner.cli.helpers import one_line_error, planner

pytest.importorskip("transformers")


def test_profile_ranks_modules_and_stores_its_record(tmp_path):
    store = tmp_path / "s.sqlite"
    r = planner(
        "profile",
        "--model",
        "debug-llama",
        "--micro-batch",
        "2",
        "--seq-len",
        "128",
        "--top",
        "3",
        "--json",
        store=store,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    prof = json.loads(r.stdout)
    assert len(prof["modules"]) == 3 and prof["modules"][0]["bytes"] >= prof["modules"][-1]["bytes"] > 0
    assert prof["peak_allocated_bytes"] == sum(prof["by_category"].values())
    listed = json.loads(planner("probes", "list", "--json", store=store).stdout)["records"]
    assert len(listed) == 1 and listed[0]["backend"] == "sim"


def test_profile_refuses_bad_knobs_before_tracing(tmp_path):
    r = planner(
        "profile",
        "--model",
        "debug-llama",
        "--micro-batch",
        "2",
        "--seq-len",
        "128",
        "--precision",
        "bf16-pure",
        "--zero",
        "2",
        store=tmp_path / "s.sqlite",
    )
    one_line_error(r, "--precision bf16-pure runs without DeepSpeed")
