"""`planner probe`: one probe stored; the stored record then used as evidence."""

import json

import pytest

from tests.planner.cli.helpers import planner


def test_cli_probe_list_profile_and_sim_evidence(tmp_path):
    pytest.importorskip("transformers")
    st = tmp_path / "cli.sqlite"
    base = ["--model", "debug-llama", "--micro-batch", "2", "--seq-len", "128"]
    r = planner("probe", *base, "--backend", "sim", "--json", store=st)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)["record"]
    assert rec["status"] == "ok" and rec["backend"] == "sim"
    r = planner("probes", "list", "--json", store=st)
    assert [x["id"] for x in json.loads(r.stdout)["records"]] == [rec["id"]]
    r = planner("profile", *base, "--json", store=st)
    prof = json.loads(r.stdout)
    assert prof["modules"][0]["bytes"] >= prof["modules"][-1]["bytes"] > 0
    check = [
        "check",
        "--model",
        "debug-llama",
        "--gpu",
        "rtx4090",
        "--micro-batch",
        "2",
        "--grad-accum",
        "1",
        "--seq-len",
        "128",
        "--precision",
        "bf16",
        "--checkpointing",
        "off",
        "--json",
    ]
    auto = json.loads(planner(*check, store=st).stdout)["plan"]
    assert auto["evidence"] == "simulated"  # the stored sim record, keyed by tensors
    assert auto["memory"]["peak_allocated_bytes"] == rec["peak_allocated_bytes"]
    analytic = json.loads(planner(*check, "--evidence", "analytic", store=st).stdout)["plan"]
    assert analytic["evidence"] == "analytic"
    assert analytic["memory"]["peak_allocated_bytes"] == pytest.approx(auto["memory"]["peak_allocated_bytes"], rel=0.10)


def test_cli_bad_backend_and_zero_on_cpu(tmp_path):
    r = planner(
        "probe",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "8",
        "--backend",
        "tpu",
        store=tmp_path / "x",
    )
    assert r.returncode == 2 and "accepted values are sim, cpu, cuda" in r.stderr
    r = planner(
        "probe",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "8",
        "--backend",
        "cpu",
        "--zero",
        "2",
        store=tmp_path / "x",
    )
    assert r.returncode == 2 and "zero 0" in r.stderr


def test_help_lists_the_accepted_values():
    """Issue 13: `probe --help` listed no choices."""
    out = planner("probe", "--help").stdout
    for shown in (
        "{sim,cpu,cuda}",
        "{fp32,fp16,bf16,bf16-pure}",
        "{off,full,selective-op,offload,offload-inputs,every-2,every-3,every-4,every-5,every-6,every-7,every-8}",
        "{standard,chunked,fused}",
        "{0,1,2,3}",
    ):
        assert shown in out, shown
