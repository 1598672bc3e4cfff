"""LLaMA-Factory 0.9.5's v1 YAML (planner/frameworks/llamafactory_v1), read from its own examples (tests/data/
frameworks/llamafactory/examples/v1, verbatim at v0.9.5) and from files written here: its trainer's defaults and
meanings (no autocast: fp32 full fine-tuning unless FSDP2's or DeepSpeed's bf16; LoRA on the checkpoint's dtype), its
own SFT head in the plan, and what v1 itself refuses, each in one line."""

import pytest

from planner import advise, intake
from planner.errors import BadInput
from planner.estimate.v1_head import v1_loss_bytes
from planner.model.catalog import load_model
from tests.planner.intake.conftest import DATA

V1 = DATA / "llamafactory" / "examples" / "v1"


def read(path):
    r = intake.read([str(path)])
    assert r.framework == "llamafactory_v1"
    return r


def written(tmp_path, text: str):
    path = tmp_path / "v1.yaml"
    path.write_text(text)
    return path


def test_its_fsdp2_full_fine_tune_is_bf16_over_fp32_shards_with_checkpointing():
    r = read(V1 / "train_full" / "train_full_fsdp2.yaml")
    want = {"model": "qwen3-0.6b", "lora_rank": 0, "micro_batch": 1, "grad_accum": 1, "seq_len": 2048}
    want |= {"fsdp": "full", "precision": "bf16", "checkpointing": "full", "attention": "sdpa", "optimizer": "adamw"}
    assert {k: r.request[k] for k in want} == want
    assert r.request["fsdp_load"] == "whole"  # init_on_default: the whole model on each GPU before fully_shard
    rank0 = read(V1 / "train_lora" / "train_lora_sft_rank0.yaml").request
    assert rank0["fsdp_load"] == "sharded"  # init_on_rank0: rank 0's host, then the shards


def test_its_lora_and_qlora_examples():
    lora = read(V1 / "train_lora" / "train_lora_sft.yaml").request
    assert (lora["lora_rank"], lora["lora_targets"], lora["lora_dropout"]) == (16, "all-linear", 0.05)
    qlora = read(V1 / "train_qlora" / "quantization.yaml").request
    assert (qlora["quant"], qlora["quant_absmax"]) == ("nf4", "8bit")  # quantization_bit 4, double quantization
    ds = read(V1 / "train_full" / "train_full_deepspeed.yaml").request
    assert (ds["zero_stage"], ds["precision"]) == (3, "bf16")


def test_without_sharding_a_full_fine_tune_is_fp32_and_lora_keeps_the_checkpoints_dtype(tmp_path):
    full = read(written(tmp_path, "model: Qwen/Qwen3-0.6B\nmicro_batch_size: 2\n")).request
    assert full["precision"] == "fp32" and full["fsdp"] == "off" if "fsdp" in full else full["precision"] == "fp32"
    lora = read(written(tmp_path, "model: Qwen/Qwen3-0.6B\nmicro_batch_size: 2\npeft_config: {name: lora}\n"))
    assert (lora.request["precision"], lora.request["lora_rank"], lora.request["lora_dropout"]) == (
        "bf16-pure",
        8,
        0.05,
    )


def test_global_batch_size_splits_over_the_data_parallel_ranks(tmp_path):
    r = read(written(tmp_path, "model: Qwen/Qwen3-0.6B\nmicro_batch_size: 2\nglobal_batch_size: 32\n"))
    _, again = r.derived["grad_accum"]
    assert again({"gpus_per_node": 4, "nodes": 1}) == 4  # 32 // 4 ranks // micro 2 (core/utils/batching.py:91-102)
    assert again({"gpus_per_node": 8, "nodes": 2}) == 1


@pytest.mark.parametrize(
    "text,says",
    [
        ("peft_config: {name: freeze}\n", "v1's freeze tuning"),
        ("dist_config: {name: fsdp2, cp_size: 2}\n", "v1's Ulysses"),
        ("optim_config: {name: muon}\n", "registers no optim plugin"),
        ("flash_attn: flash_attention2\n", "v1 takes eager, sdpa or flash_attention_2"),
        ("quant_config: {quantization_bit: 4}\n", "a v1 plugin section needs a name"),
        ("batching_strategy: padding_free\n", "flash_attention_2 alone"),
        ("model_class: cls\n", "model_class cls"),
    ],
)
def test_what_v1_refuses_is_refused_in_one_line(tmp_path, text, says):
    with pytest.raises(BadInput) as e:
        read(written(tmp_path, "model: Qwen/Qwen3-0.6B\nmicro_batch_size: 1\n" + text))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_plan_holds_v1s_own_loss(tmp_path):
    """The head the plan counts is planner.estimate.v1_head's (Framework.sft_head "lf-v1"), not transformers' alone."""
    r = read(written(tmp_path, "model: Qwen/Qwen3-0.6B\nmicro_batch_size: 2\ncutoff_len: 1024\n"))
    plan = advise.check(advise.parse(advise.CheckRequest, {**r.request, "gpu": "h100", "gpus_per_node": 1})).plan
    vocab = load_model("qwen3-0.6b").text.vocab
    assert plan.memory.detail["logits_loss_bytes"] == v1_loss_bytes(2, 1024, vocab, 4)  # fp32 logits


def test_its_launch_line_is_read_with_the_v1_file(tmp_path):
    """`USE_V1=1 llamafactory-cli sft x.yaml` (v1's launcher.py: sft, one process a visible GPU): the v1 reader."""
    (tmp_path / "v1.yaml").write_text((V1 / "train_lora" / "train_lora_sft.yaml").read_text())
    run = tmp_path / "run.sh"
    run.write_text("export USE_V1=1\nCUDA_VISIBLE_DEVICES=0,1 llamafactory-cli sft v1.yaml\n")
    r = read(run)
    assert (r.request["gpus_per_node"], r.request["lora_rank"], r.request["fsdp"]) == (2, 16, "full")


def test_global_batch_size_over_the_launchs_processes(tmp_path):
    """The launch's visible GPUs, read before the file, split the global batch at once (32 // 2 ranks // micro 2)."""
    (tmp_path / "v1.yaml").write_text("model: Qwen/Qwen3-0.6B\nmicro_batch_size: 2\nglobal_batch_size: 32\n")
    run = tmp_path / "run.sh"
    run.write_text("export USE_V1=1\nCUDA_VISIBLE_DEVICES=0,1 llamafactory-cli sft v1.yaml\n")
    r = read(run)
    assert (r.request["gpus_per_node"], r.request["micro_batch"], r.request["grad_accum"]) == (2, 2, 8)
