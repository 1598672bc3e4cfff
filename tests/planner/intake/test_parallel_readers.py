"""Tensor, sequence and context parallel sizes read from each framework's own keys (ms-swift's Ulysses and AutoTP
flags, a DeepSpeed JSON's autotp_size and sequence_parallel_size, axolotl's context_parallel_size and its deprecated
sequence_parallel_degree, an accelerate config's parallelism section), the batch they leave each data-parallel rank,
and pipeline parallelism said in one line."""

from pathlib import Path

from planner import advise, intake


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_swift_ulysses_and_autotp_flags(tmp_path):
    sh = _write(
        tmp_path,
        "train.sh",
        "NPROC_PER_NODE=8 swift sft --model Qwen/Qwen2.5-7B --tuner_type full --per_device_train_batch_size 1 "
        "--gradient_accumulation_steps 4 --max_length 65536 --sequence_parallel_size 4 --deepspeed zero2 "
        "--deepspeed_autotp_size 2 --attn_impl flash_attn\n",
    )
    r = intake.read([sh])
    assert (r.request["sequence_parallel"], r.request["tensor_parallel"]) == (4, 2)
    assert "--sequence_parallel_size 4" in next(s.source for s in r.settings if s.field == "sequence_parallel")


def test_a_deepspeed_json_and_the_global_batch_of_its_data_parallel_ranks(tmp_path):
    ds = _write(
        tmp_path,
        "ds.json",
        '{"zero_optimization": {"stage": 2}, "sequence_parallel_size": 2, "tensor_parallel": {"autotp_size": 2}}',
    )
    sh = _write(
        tmp_path,
        "run.sh",
        f"deepspeed --num_gpus 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --deepspeed {ds} "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 3 --bf16\n",
    )
    r = intake.read([sh])
    assert (r.request["sequence_parallel"], r.request["tensor_parallel"]) == (2, 2)
    plan = advise.check(advise.parse(advise.CheckRequest, {**r.request, "gpu": "h100", "seq_len": 8192})).plan
    assert plan.data_parallel == 2 and plan.global_batch == 2 * 3 * 2  # the 8 GPUs hold 2 data-parallel ranks
    assert plan.split_text == "micro 2 x accum 3 x data-parallel 2 of 8 GPUs"


def test_axolotl_ring_attention_and_pipeline_parallel_in_one_line(tmp_path):
    yaml = _write(
        tmp_path,
        "ax.yaml",
        "base_model: Qwen/Qwen2.5-7B\nmicro_batch_size: 1\nsequence_len: 32768\nadapter: lora\nlora_r: 16\n"
        "flash_attention: true\nfsdp_version: 2\nsequence_parallel_degree: 4\npipeline_parallel_degree: 2\n",
    )
    r = intake.read([yaml])
    assert r.request["context_parallel"] == 4 and "sequence_parallel" not in r.request
    lines = [u for u in r.unplanned if "pipeline" in u]
    assert lines == [
        (
            "ax.yaml: pipeline_parallel_degree: 2 (pipeline parallelism is not planned: memplan splits a model by "
            "tensor, sequence, context and expert parallelism)"
        )
    ]


def test_an_accelerate_parallelism_section(tmp_path):
    acc = _write(
        tmp_path,
        "acc.yaml",
        "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
        "parallelism_config:\n  parallelism_config_dp_shard_size: 4\n  parallelism_config_cp_size: 2\n"
        "  parallelism_config_cp_comm_strategy: allgather\n",
    )
    sh = _write(
        tmp_path,
        "run.sh",
        f"accelerate launch --config_file {acc} train.py --model_name_or_path meta-llama/Llama-3.1-8B "
        "--per_device_train_batch_size 1\n",
    )
    r = intake.read([sh])
    assert (r.request["context_parallel"], r.request["cp_attention"]) == (2, "all-gather")


def test_axolotl_dp_shard_size_names_the_gpus_and_hsdp_is_said_unplanned(tmp_path):
    """dp_shard_size beside tensor_parallel_size and context_parallel_size (axolotl v0.18.0 examples/distributed-
    parallel/qwen3-8b-fsdp-tp-cp.yaml): FSDP over 2 data-parallel ranks x TP 2 x CP 2 = 8 GPUs
    (utils/distributed.py:350-370); with dp_replicate_size it is HSDP's groups, said unplanned."""
    text = (
        "base_model: Qwen/Qwen2.5-7B\nmicro_batch_size: 1\nsequence_len: 8192\nflash_attention: true\n"
        "fsdp_version: 2\nfsdp_config:\n  reshard_after_forward: true\ndp_shard_size: 2\ntensor_parallel_size: 2\n"
        "context_parallel_size: 2\n"
    )
    r = intake.read([_write(tmp_path, "ax.yaml", text)])
    assert (r.request["gpus_per_node"], r.request["fsdp"]) == (8, "full")
    assert not [u for u in r.unplanned if "dp_shard_size" in u]
    r = intake.read([_write(tmp_path, "hsdp.yaml", text + "dp_replicate_size: 2\n")])
    assert "gpus_per_node" not in r.request or r.request["gpus_per_node"] != 8
    assert [u for u in r.unplanned if "dp_shard_size: 2 (a data-parallel shard group is not planned yet)" in u]
