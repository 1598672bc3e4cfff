"""A user's hybrid shard asked of FSDP2 with no accelerate mesh (settle._hsdp_unmeshed): HF's `--fsdp hybrid_shard`
or accelerate's fsdp_sharding_strategy HYBRID_SHARD, with fsdp_version 2, runs as a full shard over every GPU (no
ParallelismConfig: fully_shard over the world; transformers 4.56.2 + accelerate 1.10.1 measured 0.250 of the params a
rank on 2 x 2 gloo ranks, test_hsdp_export.py's validator) and is planned so with a line; transformers 5.10+ refuse
HF's flag at start (reading.MEANINGS fsdp2_hybrid). FSDP1's hybrid shard is kept."""

import pytest

from planner import checkconfig
from planner.errors import BadInput

READ = {"gpu": "h100", "model": "qwen2.5-0.5b", "seq_len": 1024}
FLAGS = "--per_device_train_batch_size 4 --bf16 true --fsdp 'hybrid_shard auto_wrap' --fsdp_config fsdp.json"


def read(tmp_path, framework: str, env: str = "", version: int | None = None, extra: str = ""):
    cfg = '{"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]' + (f', "version": {version}' if version else "")
    (tmp_path / "fsdp.json").write_text(cfg + "}")
    line = f"{env}torchrun --nnodes 2 --nproc_per_node 4 train.py --model_name_or_path Qwen/Qwen2.5-0.5B {FLAGS}"
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\n{line}{extra}\n")
    return checkconfig.check_config([str(tmp_path / "run.sh")], {**READ, "framework": framework})


def unmeshed(res) -> bool:
    return any("asked of FSDP2" in n and "full shard over every GPU" in n for n in res.config["unplanned"])


@pytest.mark.parametrize(
    ("framework", "env", "version", "extra"),
    [
        ("hf@4.54", "FSDP_VERSION=2 ", None, ""),  # 4.x reads no "version": the launch's variable decides
        ("hf@5", "", 2, ""),  # 5.0-5.9 read it, FSDP1 where it names none
        ("trl@1.0", "", 2, " --dataset_name d"),  # transformers 5.6.0; --dataset_name: TRL's script
    ],
)
def test_fsdp2_hybrid_without_a_mesh_is_planned_as_the_full_shard_it_runs(tmp_path, framework, env, version, extra):
    res = read(tmp_path, framework, env, version, extra)
    assert res.plan.fsdp == "full" and unmeshed(res)
    fsdp1 = read(tmp_path, framework, "", 1 if version else None, extra).plan  # the same file's FSDP1: hybrid
    states = "model_states_bytes"
    assert fsdp1.fsdp == "hybrid" and res.plan.memory.detail[states] < fsdp1.memory.detail[states]


@pytest.mark.parametrize(("framework", "version"), [("hf@4.54", None), ("hf@5", None), ("hf", 1)])
def test_fsdp1_hybrid_is_kept(tmp_path, framework, version):
    res = read(tmp_path, framework, version=version)
    assert res.plan.fsdp == "hybrid" and not unmeshed(res)


@pytest.mark.parametrize(("framework", "extra"), [("hf", ""), ("trl@1.10", " --dataset_name d")])
def test_transformers_5_10_refuse_hybrid_shard_under_fsdp2(tmp_path, framework, extra):
    with pytest.raises(BadInput, match="fsdp_config's version 1"):
        read(tmp_path, framework, extra=extra)


def test_an_accelerate_config_asking_hybrid_of_fsdp2_runs_a_full_shard(tmp_path):
    """accelerate's plugin warns and shards over every rank (no refusal: the Trainer's flag is not set)."""
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_sharding_strategy: HYBRID_SHARD\n"
        "mixed_precision: bf16\nnum_machines: 2\nnum_processes: 8\n"
    )
    run = "accelerate launch --config_file acc.yaml train.py --model_name_or_path Qwen/Qwen2.5-0.5B"
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\n{run}\n")
    res = checkconfig.check_config([str(tmp_path / "run.sh")], READ)
    assert res.plan.fsdp == "full" and unmeshed(res)
    hybrid = tmp_path / "acc.yaml"
    hybrid.write_text(hybrid.read_text() + "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n")
    assert checkconfig.check_config([str(tmp_path / "run.sh")], READ).plan.fsdp == "hybrid"


@pytest.mark.parametrize("pin", ["", "4.57.1", "5.12.0"])
def test_trl_0_22_names_the_transformers_that_decides_hybrid_shard(tmp_path, pin):
    """TRL 0.22's wheel takes transformers 4.55 .. 5.x (Requires-Dist transformers>=4.55.0): memplan reads the line at
    4.56.2, a full shard, where 5.10+ refuse the flag (trl 0.22.2 with 5.10.4, measured: SFTConfig raises 'only
    available with FSDP1', training_args.py:2837). The reading says which it took: the assumption where nothing pins
    transformers, the pin where one does, refusing at a 5.10+ pin (planner.intake.releases.transformers_read)."""
    (tmp_path / "requirements.txt").write_text("trl==0.22.2\n" + (f"transformers=={pin}\n" if pin else ""))
    if pin == "5.12.0":
        with pytest.raises(BadInput, match=r"\(transformers 5.12.0: requirements.txt:2 transformers==5.12.0\)"):
            read(tmp_path, "trl", "FSDP_VERSION=2 ", extra=" --dataset_name d")
        return
    res = read(tmp_path, "trl", "FSDP_VERSION=2 ", extra=" --dataset_name d")
    (note,) = [n for n in res.config["unplanned"] if "asked of FSDP2" in n]
    assert (
        res.plan.fsdp == "full" and res.plan.release == "0.22" and "at transformers 5.10+ the Trainer refuses" in note
    )
    said = f"transformers {pin}: requirements.txt:2 transformers=={pin}" if pin else "transformers assumed 4.56.2"
    assert said in note, note
