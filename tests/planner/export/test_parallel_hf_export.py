"""Sequence, context and tensor parallel plans for HF's Trainer, TRL, accelerate and a DeepSpeed JSON
(planner/export/parallel.py): the files a plan writes carry its sizes under accelerate's and DeepSpeed's own keys, and
pass accelerate's launcher, accelerate's ParallelismConfig, TrainingArguments and DeepSpeed's DeepSpeedConfig
(tests/planner/export/validators/hf_parallel_validate.py, in this project's venv)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner import advise
from planner.export import launch
from recipe.dist import free_port

yaml = pytest.importorskip("yaml")
pytest.importorskip("accelerate")
pytest.importorskip("deepspeed")

VALIDATOR = Path(__file__).parent / "validators" / "hf_parallel_validate.py"
BASE = {"model": "llama-3.2-3b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 65536}
CASES = {
    "hf_ulysses_lora_z3": {"framework": "hf", "zero": 3, "lora_rank": 16, "sequence_parallel": 2, "grad_accum": 8},
    "accelerate_ulysses_z2_flash": {
        "framework": "accelerate",
        "zero": 2,
        "sequence_parallel": 4,
        "attention": "flash",
        "grad_accum": 4,
    },
    "hf_cp_ring_fsdp": {"framework": "hf", "fsdp": "full", "context_parallel": 2, "grad_accum": 4},
    "trl_cp_allgather_hsdp": {
        "framework": "trl",
        "fsdp": "hybrid",
        "nodes": 2,
        "context_parallel": 4,
        "cp_attention": "all-gather",
        "grad_accum": 2,
    },
    "deepspeed_autotp_z1": {"framework": "deepspeed", "zero": 1, "tensor_parallel": 2, "grad_accum": 2},
}


def emitted(case: str, folder: Path):
    body = {**BASE, "checkpointing": "full", **CASES[case]}
    result = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = result.context
    d = folder / case
    launch.emit(result.plan, hw, model, str(d), goal.seq_len)
    (d / "plan.json").write_text(json.dumps(result.plan.model_dump(exclude={"launch"})))
    return result.plan, d


def validate(folders: list[Path | str]) -> subprocess.CompletedProcess:
    env_port = {"MASTER_PORT": str(free_port())}
    return subprocess.run(
        [sys.executable, str(VALIDATOR), *map(str, folders)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env_port},
    )


def test_ulysses_runs_through_accelerate_on_deepspeed(tmp_path):
    plan, d = emitted("hf_ulysses_lora_z3", tmp_path)
    acc = yaml.safe_load((d / "accelerate_config.yaml").read_text())
    assert (
        acc["distributed_type"] == "DEEPSPEED" and acc["deepspeed_config"]["deepspeed_config_file"] == "ds_config.json"
    )
    assert acc["parallelism_config"]["parallelism_config_sp_size"] == 2
    assert acc["parallelism_config"]["parallelism_config_sp_backend"] == "deepspeed"
    assert plan.launch.command.startswith("accelerate launch --config_file accelerate_config.yaml train.py")
    assert plan.launch.hf_args["parallelism_config"]["sp_size"] == 2
    ds = json.loads((d / "ds_config.json").read_text())
    assert (
        "sequence_parallel_size" not in ds and ds["train_batch_size"] == plan.global_batch * 2
    )  # HF's fill: every rank
    assert "PARALLELISM_CONFIG_SP_SIZE=2" in (d / "launch.sbatch").read_text()


def test_context_parallel_shards_fsdp_over_dp_shard_times_cp(tmp_path):
    _, d = emitted("hf_cp_ring_fsdp", tmp_path)
    section = yaml.safe_load((d / "accelerate_config.yaml").read_text())["parallelism_config"]
    assert section == {
        "parallelism_config_dp_replicate_size": 1,
        "parallelism_config_dp_shard_size": 4,
        "parallelism_config_cp_size": 2,
        "parallelism_config_cp_backend": "torch",
        "parallelism_config_cp_comm_strategy": "alltoall",
    }
    _, hsdp = emitted("trl_cp_allgather_hsdp", tmp_path)
    section = yaml.safe_load((hsdp / "accelerate_config.yaml").read_text())["parallelism_config"]
    assert (section["parallelism_config_dp_replicate_size"], section["parallelism_config_dp_shard_size"]) == (2, 2)
    assert section["parallelism_config_cp_comm_strategy"] == "allgather"


def test_tensor_parallel_is_deepspeeds_autotp(tmp_path):
    plan, d = emitted("deepspeed_autotp_z1", tmp_path)
    assert json.loads((d / "ds_config.json").read_text())["tensor_parallel"] == {"autotp_size": 2}
    assert plan.launch.command.startswith("deepspeed --num_gpus 8") and not (d / "accelerate_config.yaml").exists()


BROKEN = [  # (case, file, old, new): each a file the validator refuses
    ("hf_ulysses_lora_z3", "accelerate_config.yaml", "parallelism_config_sp_size", "parallelism_config_sp_sise"),
    ("hf_cp_ring_fsdp", "accelerate_config.yaml", "dp_shard_size: 4", "dp_shard_size: 3"),
    ("deepspeed_autotp_z1", "ds_config.json", '"autotp_size": 2', '"autotp_size": "two"'),
]


def test_the_exports_pass_accelerate_transformers_and_deepspeed_and_broken_files_fail(tmp_path):
    """Every case passes; each broken file fails: one validator run (--each)."""
    folders = [emitted(case, tmp_path)[1] for case in CASES]
    broken = []
    for i, (case, file, old, new) in enumerate(BROKEN):
        _, d = emitted(case, tmp_path / f"broken{i}")
        text = (d / file).read_text()
        assert old in text
        (d / file).write_text(text.replace(old, new))
        broken.append(d)
    run = validate([*folders, *broken, "--each"])
    said = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": OK " in line or ": INVALID " in line)
    assert all(said[str(d)].startswith("OK ") for d in folders), run.stdout[-3000:] + run.stderr[-5000:]
    assert run.returncode == 1 and all(said[str(d)].startswith("INVALID ") for d in broken), run.stdout[-3000:]
