"""planner/cli/extras.py: a command whose extra is not installed is refused first, in one line naming the extra
(exit 2, nothing stored). The CLI runs in a subprocess whose sitecustomize hides the named modules (None in
sys.modules: find_spec answers None and an import fails, in the probe's worker process too)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import extras
from planner.errors import BadInput

ROOT = Path(__file__).resolve().parents[3]
HIDE = "import os, sys\nsys.modules.update(dict.fromkeys(filter(None, os.environ['MEMPLAN_TEST_HIDE'].split(','))))\n"
SIM = "torch,transformers,peft,trl,deepspeed"


def planner_without(tmp_path: Path, hidden: str, *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(HIDE)
    env = {
        **os.environ,
        "MEMPLAN_TEST_HIDE": hidden,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "planner.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def assert_refused(out: subprocess.CompletedProcess, line: str) -> None:
    assert (out.returncode, out.stderr, out.stdout) == (2, f"planner: error: {line}\n", "")


def test_scan_with_a_tokenizer_needs_the_scan_extra(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"text": "hello"}\n')
    (tmp_path / "tok").mkdir()
    out = planner_without(tmp_path, "transformers", "scan", "rows.jsonl", "--tokenizer", "tok")
    assert_refused(out, "planner scan --tokenizer needs transformers: pip install 'memplan[scan]'")


def test_train_needs_the_sim_extra(tmp_path):
    out = planner_without(
        tmp_path,
        SIM,
        "train",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "16",
        "--max-steps",
        "1",
        "--store",
        str(tmp_path / "store.sqlite"),
    )
    assert_refused(out, "planner train needs torch and transformers: pip install 'memplan[sim]'")
    assert not (tmp_path / "store.sqlite").exists()


@pytest.mark.parametrize("workload,batch", [("grpo", "8"), ("dpo", "2")])
def test_train_grpo_and_dpo_need_the_trl_extra(tmp_path, workload, batch):
    out = planner_without(
        tmp_path,
        "trl",
        "train",
        "--model",
        "debug-llama",
        "--micro-batch",
        batch,
        "--workload",
        workload,
        "--max-steps",
        "1",
        "--save-dir",
        str(tmp_path / "run"),
    )
    assert_refused(out, f"planner train --workload {workload} needs trl: pip install 'memplan[trl]'")
    assert not (tmp_path / "run").exists()


def test_a_sim_probe_without_torch_is_refused_and_stores_nothing(tmp_path):
    """Before: the probe's worker failed to import torch and a "crash" record was stored (exit 1)."""
    store = tmp_path / "store.sqlite"
    out = planner_without(
        tmp_path,
        SIM,
        "probe",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "16",
        "--lora-rank",
        "4",
        "--store",
        str(store),
    )
    assert_refused(out, "planner probe --backend sim needs torch, transformers and peft: pip install 'memplan[sim]'")
    assert not store.exists()


def test_autotune_needs_the_sim_extra_before_looking_for_gpus(tmp_path):
    out = planner_without(
        tmp_path,
        SIM,
        "autotune",
        "--model",
        "debug-llama",
        "--global-batch",
        "8",
        "--seq-len",
        "64",
        "--store",
        str(tmp_path / "store.sqlite"),
    )
    assert_refused(out, "planner autotune needs torch and transformers: pip install 'memplan[sim]'")


def test_the_line_names_every_missing_module_and_each_extra_once(monkeypatch):
    import importlib.util

    present = {"transformers"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name in present else None)
    need = extras.steps(lora=True, rl=True, deepspeed=True)
    with pytest.raises(BadInput) as e:
        extras.require("planner train --workload dpo", need)
    assert str(e.value) == (
        "planner train --workload dpo needs torch, peft, trl and deepspeed: pip install 'memplan[sim,trl,deepspeed]'"
    )
    present |= set(need)
    extras.require("planner train --workload dpo", need)  # all there: no error


def test_profile_sim_evidence_and_a_tokenizer_need_their_extras_too(tmp_path):
    """Before: profile, --evidence sim and --data --tokenizer ended in tracebacks without torch / transformers."""
    store = tmp_path / "store.sqlite"
    out = planner_without(
        tmp_path,
        SIM,
        "profile",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "16",
        "--store",
        str(store),
    )
    assert_refused(out, "planner profile needs torch and transformers: pip install 'memplan[sim]'")
    assert not store.exists()
    out = planner_without(
        tmp_path,
        SIM,
        "suggest",
        "--model",
        "debug-llama",
        "--gpu",
        "h100",
        "--global-batch",
        "2",
        "--seq-len",
        "64",
        "--evidence",
        "sim",
        "--store",
        str(store),
    )
    assert_refused(out, "--evidence sim runs probes, which this face cannot run: pip install 'memplan[sim]'")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "hello"}\n')
    out = planner_without(
        tmp_path,
        SIM,
        "suggest",
        "--model",
        "debug-llama",
        "--gpu",
        "h100",
        "--global-batch",
        "2",
        "--data",
        str(rows),
        "--tokenizer",
        str(tmp_path),
        "--evidence",
        "analytic",
    )
    assert_refused(out, "--data with --tokenizer needs transformers: pip install 'memplan[scan]'")
