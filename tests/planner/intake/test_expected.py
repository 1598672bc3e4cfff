"""The fields the committed examples give, value by value: what each file says (batch, accumulation, LoRA, ZeRO,
checkpointing, sequence, model, GPUs) and the framework defaults it leaves to, with their provenance; and what memplan
cannot plan yet, each named in `unplanned`."""

import pytest

from planner import intake
from tests.planner.intake.conftest import DATA

LF, SW, AX, SC, MP = "llamafactory/examples", "swift/examples", "axolotl/examples", "scripts", "memplan"
EXPECTED = {  # file: (framework, request fields (workload: the inputs listed), unplanned lines hold these)
    f"{LF}/train_lora/qwen3_lora_sft.yaml": (
        "llamafactory",
        {
            "model": "qwen3-4b",  # Qwen/Qwen3-4B-Instruct-2507 (hf_ids.json)
            "micro_batch": 1,
            "grad_accum": 8,
            "lora_rank": 8,
            "lora_targets": "all-linear",
            "lora_dropout": 0.0,
            "seq_len": 2048,
            "checkpointing": "full",
            "precision": "bf16",
            "optimizer": "adamw-fused",
        },
        [],
    ),
    f"{LF}/train_lora/qwen3_lora_sft_ds3.yaml": (
        "llamafactory",
        {"zero_stage": 3, "grad_accum": 2, "lora_rank": 8, "seq_len": 2048},
        [],
    ),
    f"{LF}/train_full/qwen3_full_sft.yaml": (
        "llamafactory",
        {"lora_rank": 0, "zero_stage": 3, "precision": "bf16"},
        [],
    ),
    f"{LF}/train_lora/qwen3_lora_dpo.yaml": ("llamafactory", {"workload": {"kind": "dpo", "max_length": 2048}}, []),
    f"{LF}/train_lora/qwen3_lora_pretrain.yaml": ("llamafactory", {"batching": "packed", "seq_len": 2048}, []),
    f"{LF}/train_lora/qwen3_lora_kto.yaml": (
        "llamafactory",
        {"lora_rank": 8, "micro_batch": 1, "workload": {"kind": "kto", "max_length": 2048, "logprobs": "full"}},
        [],
    ),
    f"{LF}/train_qlora/qwen3_lora_sft_otfq.yaml": ("llamafactory", {"quant": "nf4", "lora_rank": 8}, []),
    f"{LF}/extras/fp8/llama3_fp8_deepspeed_sft.yaml": (
        "llamafactory",
        {"zero_stage": 3, "offload": "optimizer", "seq_len": 1024},
        ["fp8: True"],
    ),
    f"{LF}/extras/fp8/llama3_fp8_fsdp_sft.yaml": (
        "llamafactory",
        {"fsdp": "full"},
        ["fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer (not a"],
    ),
    f"{LF}/extras/fsdp_qlora/train.sh": (
        "llamafactory",
        {"gpus_per_node": 2, "fsdp": "full", "lora_rank": 8, "quant": "nf4"},
        [],
    ),
    "llamafactory/user/qwen2_5vl_lora_sft.yaml": (
        "llamafactory",
        {
            "model": "qwen2.5-vl-7b",
            "lora_rank": 8,
            "micro_batch": 2,
            "grad_accum": 4,
            "seq_len": 3072,
            "image_tokens": 752,
            "loss": "fused",
        },
        ["lora_rnak: 16 (not a llamafactory 0.9.5 key"],
    ),
    "llamafactory/user/train.sh": (
        "llamafactory",
        {
            "gpus_per_node": 8,
            "nodes": 2,
            "model": "qwen2.5-vl-7b",
            "lora_rank": 0,
            "frozen": "vision",
            "micro_batch": 2,
            "grad_accum": 2,
            "seq_len": 8192,
            "image_tokens": 334,
            "zero_stage": 3,
            "attention": "flash",
            "precision": "bf16",
        },
        ["video_max_pixels"],
    ),
    "llamafactory/user/qwen2_5_lora_dpo.yaml": (
        "llamafactory",
        {
            "workload": {"kind": "dpo", "max_length": 2048},
            "lora_rank": 32,
            "lora_targets": "q_proj,v_proj",
            "checkpointing": "full",
        },
        ["checkpointing offload-inputs in DPO is not planned"],
    ),
    f"{SW}/train/lora_sft.sh": (
        "swift",
        {
            "model": "qwen2.5-7b",
            "gpus_per_node": 1,
            "lora_rank": 8,
            "lora_dropout": 0.05,
            "micro_batch": 1,
            "grad_accum": 16,
            "seq_len": 2048,
            "checkpointing": "full",
            "precision": "bf16",
        },
        [],
    ),
    f"{SW}/train/seq_cls/qwen2_5/sft.sh": (  # the score head in place of the vocabulary head (issue 49, item 1)
        "swift",
        {"model": "qwen2.5-0.5b", "task": "seq-cls", "num_labels": 2, "lora_rank": 8, "seq_len": 2048},
        [],
    ),
    f"{SW}/train/tuners/adapter/train.sh": (  # one adapter after each MLP at the default adapter_length 128
        "swift",
        {"model": "qwen2.5-7b", "lora_variant": "adapter", "lora_rank": 128, "lora_dropout": None, "grad_accum": 16},
        [],
    ),
    f"{SW}/train/multi-gpu/ddp/train.sh": ("swift", {"gpus_per_node": 2, "grad_accum": 8}, []),
    f"{SW}/train/multi-gpu/deepspeed/train_zero3.sh": ("swift", {"zero_stage": 3, "gpus_per_node": 2}, []),
    f"{SW}/train/full/train.sh": ("swift", {"lora_rank": 0, "precision": "bf16-pure", "grad_accum": 16}, []),
    f"{SW}/train/full/qwen2_5_32b.sh": (
        "swift",
        {
            "model": "qwen2.5-32b",
            "gpus_per_node": 8,
            "zero_stage": 3,
            "batching": "packed",
            "loss": "fused",
            "attention": "flash",
            "seq_len": 8192,
            "precision": "bf16",
        },
        [],
    ),
    f"{SW}/train/multi-gpu/device_map/train.sh": (
        "swift",
        {"gpus_per_node": 2, "device_map": 2, "image_tokens": 1280},
        [],
    ),
    f"{SW}/train/multi-gpu/fsdp2_lora/train.sh": (
        "swift",
        {"gpus_per_node": 2, "fsdp": "full", "checkpointing": "full", "lora_rank": 8, "grad_accum": 8},
        [],
    ),
    f"{SW}/train/grpo/internal/vllm_72b_4gpu.sh": (
        "swift",
        {
            "gpus_per_node": 4,
            "zero_stage": 3,
            "offload": "optimizer+params",
            "grad_accum": 1,
            "workload": {
                "kind": "grpo",
                "num_generations": 4,
                "max_completion_length": 1024,
                "max_prompt_length": 2048,
                "generation": "vllm-colocate",
                "vllm_gpu_memory_utilization": 0.55,
                "beta": 0.04,
                "roles": {"move_model_batches": 16, "sleep_level": 1, "rollout_tp": 4},
            },
        },
        [],
    ),
    f"{SW}/train/grpo/internal/qlora.sh": ("swift", {"quant": "nf4", "zero_stage": 2, "micro_batch": 4}, []),
    f"{SW}/train/rlhf/dpo/full.sh": (
        "swift",
        {"workload": {"kind": "dpo", "max_length": 8192}, "batching": "packed"},  # ms-swift 4.x runs DPO padding-free
        [],
    ),
    f"{SW}/train/rlhf/gkd/full.sh": (
        "swift",
        {
            "workload": {
                "kind": "gkd",
                "teacher_model": "qwen2.5-14b",
                "lmbda": 0.5,
                "jsd_beta": 0.5,
                "max_length": 2048,
                "max_completion_length": 512,
            },
            "micro_batch": 4,
            "grad_accum": 1,
            "gpus_per_node": 4,
            "zero_stage": 3,
        },
        [],
    ),
    f"{SW}/train/rlhf/kto.sh": (  # rlhf_type kto, LoRA (the adapter-less policy is its reference), ZeRO-2 on 2 GPUs
        "swift",
        {
            "workload": {"kind": "kto", "max_length": 2048, "logprobs": "full"},
            "lora_rank": 8,
            "micro_batch": 1,
            "grad_accum": 8,
            "gpus_per_node": 2,
            "zero_stage": 2,
        },
        [],
    ),
    f"{SW}/train/rlhf/rm/train.sh": (  # --rlhf_type rm: a one-score head over each pair's chosen and rejected rows
        "swift",
        {"task": "seq-cls", "num_labels": 1, "negatives": 1, "seq_len": 2048, "gpus_per_node": 2, "grad_accum": 8},
        [],
    ),
    f"{SW}/ascend/activation_cpu_offload/train.sh": (  # swift's activation offload callback named, not planned
        "swift",
        {"gpus_per_node": 2, "fsdp": "full", "checkpointing": "off", "grad_accum": 16, "seq_len": 4096},
        ["activation_cpu_offload: ms-swift's activations to host RAM, not planned"],
    ),
    f"{SW}/train/grpo/internal/gspo.sh": (  # one generation batch feeds 32 micro-steps (args_mixin.py:213-214)
        "swift",
        {
            "micro_batch": 2,
            "grad_accum": 8,
            "workload": {"kind": "grpo", "num_generations": 16, "steps_per_generation": 32},
        },
        [],
    ),
    # GRPO under Ulysses: each --gradient_accumulation_steps is S micro-steps (grpo_trainer.py:152-153), the global
    # batch (micro x accum x world / S) the files' 4 x 8 x 8 = 256 and 8 x 2 x 2 = 32 completions
    f"{SW}/train/sequence_parallel/sequence_parallel_grpo.sh": (
        "swift",
        {
            "micro_batch": 4,
            "grad_accum": 32,
            "gpus_per_node": 8,
            "sequence_parallel": 4,
            "zero_stage": 3,
            "workload": {"kind": "grpo", "num_generations": 32, "generation": "vllm-colocate"},
        },
        ["--padding_free true"],
    ),
    f"{SW}/train/optimizer/muonclip.sh": (  # MuonClip's one momentum buffer a parameter (planner.estimate.muonclip)
        "swift",
        {"optimizer": "muonclip", "lora_rank": 8, "micro_batch": 1, "grad_accum": 16, "seq_len": 2048},
        [],
    ),
    f"{SW}/train/grpo/internal/chord.sh": (  # CHORD's one SFT row a device beside GRPO's 4 (planner.estimate.chord)
        "swift",
        {
            "micro_batch": 4,
            "grad_accum": 8,
            "gpus_per_node": 8,
            "zero_stage": 3,
            "workload": {"kind": "grpo", "num_generations": 8, "beta": 0.0, "chord_sft_batch": 1},
        },
        [],
    ),
    f"{SW}/train/grpo/internal/fipo.sh": (
        "swift",
        {
            "micro_batch": 8,
            "grad_accum": 4,
            "gpus_per_node": 2,
            "sequence_parallel": 2,
            "workload": {"kind": "grpo", "num_generations": 8, "num_iterations": 3, "beta": 0.0},
        },
        ["swift rollout runs a rollout server"],
    ),
    f"{SW}/train/multi-node/ray/sft.yaml": (  # use_ray: one worker a rank of the `default` group
        "swift",
        {"gpus_per_node": 4, "nodes": 1, "zero_stage": 3, "micro_batch": 1, "grad_accum": 8},
        [],
    ),
    f"{SW}/train/sequence_parallel/sequence_parallel.sh": (
        "swift",
        {"seq_len": 65536, "gpus_per_node": 8, "sequence_parallel": 8, "loss": "chunked"},
        [],
    ),
    f"{AX}/llama-3/lora-1b.yml": (
        "axolotl",
        {
            "model": "llama-3.2-1b",
            "micro_batch": 2,
            "grad_accum": 2,
            "seq_len": 2048,
            "lora_rank": 16,
            "batching": "packed",
            "optimizer": "adamw-8bit",
            "checkpointing": "full",
            "precision": "bf16",
            "lora_targets": "gate_proj,down_proj,up_proj,q_proj,v_proj,k_proj,o_proj",
        },
        [],
    ),
    f"{AX}/llama-3/qlora-1b.yml": ("axolotl", {"quant": "nf4", "lora_rank": 32}, []),
    f"{AX}/llama-3/fft-8b.yaml": (
        "axolotl",
        {
            "model": "llama-3.1-8b",
            "lora_rank": 0,
            "seq_len": 8192,
            "grad_accum": 8,
            "optimizer": "paged-adamw-8bit",
            "precision": "bf16-pure",
        },
        [],
    ),
    f"{AX}/llama-3/fft-8b-liger-fsdp.yaml": (
        "axolotl",
        {"fsdp": "full", "offload": "optimizer+params", "loss": "fused"},
        [],
    ),
    f"{AX}/alst/llama3-8b-deepspeed-alst.yaml": (
        "axolotl",
        {
            "seq_len": 500000,
            "zero_stage": 3,
            "offload": "optimizer+params",
            "checkpointing": "offload-inputs",  # full fine-tuning: each layer's input offloaded, recomputed
            "context_parallel": 8,
            "gpus_per_node": 8,  # the fewest GPUs that run the split (the file names none)
        },
        ["tiled_mlp"],
    ),
    f"{AX}/llama-3/instruct-dpo-lora-8b.yml": (
        "axolotl",
        {"workload": {"kind": "dpo", "max_length": 4096}, "quant": "int8"},
        [],
    ),
    f"{AX}/llama-3/qlora-1b-kto.yaml": (  # read as the run launched; planned at axolotl 0.17 (test_rl_kinds.py)
        "axolotl",
        {"workload": {"kind": "kto", "max_length": 2048}, "micro_batch": 2, "quant": "nf4", "lora_rank": 32},
        [],
    ),
    f"{AX}/llama-3/qlora-1b-gdpo.yaml": (
        "axolotl",
        {"workload": {"kind": "grpo", "num_generations": 2, "max_completion_length": 128, "beta": 0.001}},
        ["planned as GRPO"],
    ),
    f"{AX}/qwen2_5-vl/lora-7b.yaml": (
        "axolotl",
        {"model": "qwen2.5-vl-7b", "lora_rank": 32},
        ["LoRA targets memplan cannot name"],
    ),
    f"{SC}/VLM-R1/run_scripts/run_grpo_rec.sh": (
        "trl",
        {
            "model": "qwen2.5-vl-3b",
            "gpus_per_node": 8,
            "nodes": 1,
            "micro_batch": 8,
            "grad_accum": 2,
            "checkpointing": "full",
            "zero_stage": 3,
            "attention": "flash",
            "precision": "bf16",
            "images": 1,
            "min_pixels": 3136,
            "max_pixels": 12845056,
            "workload": {
                "kind": "grpo",
                "num_generations": 8,
                "max_completion_length": 2048,
                "max_prompt_length": 16384 + 512,
                "beta": 0.04,
                "logprobs": "full",
            },
        },
        [],
    ),
    f"{SC}/VLM-R1/run_scripts/run_grpo_rec_lora.sh": (
        "trl",
        {"lora_rank": 64, "lora_dropout": 0.05, "zero_stage": 2},
        [],
    ),
    f"{SC}/VLM-R1/run_scripts/multinode_training_demo.sh": (
        "hf",
        {"gpus_per_node": 8},
        ["arguments the script computes", "--nnodes"],
    ),
    f"{SC}/VILA/scripts/NVILA-Lite/sft.sh": (
        "hf",
        {
            "gpus_per_node": 8,
            "nodes": 1,
            "micro_batch": 128,
            "grad_accum": 2,
            "seq_len": 4096,
            "zero_stage": 3,
            "checkpointing": "full",
            "precision": "bf16",
        },
        [],
    ),
    f"{SC}/VILA/scripts/fp8training/sft_qwen_fp16.sh": ("hf", {"micro_batch": 12, "grad_accum": 1}, []),
    f"{SC}/trl/sft_py_lora.sh": (
        "trl",
        {
            "gpus_per_node": 1,
            "lora_rank": 32,
            "micro_batch": 2,
            "grad_accum": 8,
            "batching": "packed",
            "seq_len": 1024,
            "framework": "trl",
        },
        [],
    ),
    f"{SC}/trl/trl_cli_sft_accelerate_config.sh": (
        "trl",
        {"model": "qwen2.5-0.5b", "zero_stage": 2, "gpus_per_node": 8},
        [],
    ),
    f"{SC}/trl/accelerate_launch_sft_gpt_oss.sh": (
        "trl",
        {
            "model": "gpt-oss-20b",
            "zero_stage": 3,
            "gpus_per_node": 8,
            "micro_batch": 2,
            "seq_len": 4096,
            "attention": "flash",
        },
        [],
    ),
    f"{MP}/launch_lora.sh": (
        "trl",
        {
            "model": "qwen2.5-7b",
            "gpus_per_node": 4,
            "nodes": 1,
            "micro_batch": 2,
            "grad_accum": 8,
            "seq_len": 4096,
            "precision": "bf16",
            "checkpointing": "full",
            "lora_rank": 64,
            "lora_targets": "q_proj,k_proj,v_proj,o_proj",
            "zero_stage": 2,
            "offload": "optimizer",
            "loss": "fused",
        },
        ['"${EXTRA_ARGS[@]}"'],
    ),
    f"{MP}/train_grpo.py": (
        "trl",
        {
            "model": "qwen2.5-3b",
            "micro_batch": 4,
            "grad_accum": 4,
            "lora_rank": 16,
            "lora_targets": "all-linear",
            "attention": "flash",
            "precision": "bf16",
            "workload": {
                "kind": "grpo",
                "num_generations": 8,
                "max_prompt_length": 512,
                "max_completion_length": 1024,
                "generation": "vllm-colocate",
                "vllm_gpu_memory_utilization": 0.35,
            },
        },
        [],
    ),
    f"{MP}/trl_sft.sh": (
        "trl",
        {
            "model": "qwen2.5-1.5b",
            "zero_stage": 3,
            "gpus_per_node": 8,
            "checkpointing": "off",
            "lora_rank": 16,
            "lora_targets": "q_proj,v_proj",
            "optimizer": "paged-adamw-8bit",
        },
        ["per_device_batch_size: 4 (not a transformers"],
    ),
    f"{MP}/training_args.json": (
        "hf",
        {"zero_stage": 2, "offload": "optimizer", "optimizer": "adamw", "micro_batch": 2, "grad_accum": 16},
        ["no sequence length"],
    ),
    f"{MP}/accelerate_fsdp.sh": ("trl", {"gpus_per_node": 4, "fsdp": "full", "precision": "bf16", "seq_len": 8192}, []),
}


def _subset(got: dict, want: dict) -> dict:
    return {k: (_subset(got.get(k, {}), v) if isinstance(v, dict) else got.get(k)) for k, v in want.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_fields_are_the_files(name):
    framework, fields, notes = EXPECTED[name]
    reading = intake.read([str(DATA / name)])
    assert reading.framework == framework
    assert _subset(reading.request, fields) == fields
    for note in notes:
        assert any(note in line for line in reading.unplanned), (note, reading.unplanned)


def _source(reading, field: str) -> str:
    return next(s.source for s in reading.settings if s.field == field)


def test_sources_name_the_line_or_the_default_with_its_citation():
    r = intake.read([str(DATA / SW / "train/lora_sft.sh")])
    assert _source(r, "micro_batch") == "lora_sft.sh:12 --per_device_train_batch_size 1"
    assert _source(r, "lora_dropout") == "ms-swift 4.6.0 default lora_dropout 0.05 (swift/arguments/tuner_args.py:135)"
    r = intake.read([str(DATA / "llamafactory/user/qwen2_5vl_lora_sft.yaml")])
    assert _source(r, "seq_len") == "qwen2_5vl_lora_sft.yaml: cutoff_len: 3072"
    assert "llamafactory 0.9.5 default lora_rank 8 (src/llamafactory/hparams/finetuning_args.py:77)" in _source(
        r, "lora_rank"
    )
    assert "image_max_pixels 589824 (src/llamafactory/hparams/model_args.py:305)" in _source(r, "image_tokens")
    r = intake.read([str(DATA / AX / "llama-3/fft-8b-liger-fsdp.yaml")])
    assert "axolotl 0.19.0 default fsdp_version 1" in _source(r, "fsdp")


def test_a_value_the_frameworks_adapter_does_not_run_is_kept_and_named(tmp_path):
    """axolotl refuses bitsandbytes' 8-bit AdamW under FSDP2 (planner/frameworks/axolotl/__init__.py): the reading keeps the
    configuration's values, names the refusal, and plans as the bundled trainer runs them."""
    cfg = tmp_path / "ax.yaml"
    cfg.write_text(
        "base_model: meta-llama/Llama-3.2-1B\noptimizer: adamw_bnb_8bit\nfsdp_version: 2\nfsdp_config:\n"
        "  reshard_after_forward: true\n"
    )
    r = intake.read([str(cfg)])
    assert (r.request["optimizer"], r.request["fsdp"], r.request["framework"]) == ("adamw-8bit", "full", "memplan")
    assert any("--framework axolotl (axolotl): refuses bitsandbytes 8-bit AdamW" in line for line in r.unplanned)
    assert _source(r, "framework").startswith("memplan assumption (ax.yaml: axolotl's keys")


def test_settings_follow_the_order_read_and_name_the_frameworks_key():
    r = intake.read([str(DATA / LF / "train_lora/qwen3_lora_sft.yaml")])
    fields = [s.field for s in r.settings]
    assert fields.index("model") < fields.index("micro_batch") < fields.index("precision")
    keys = {s.field: s.key for s in r.settings}
    assert keys["seq_len"] == "cutoff_len" and keys["micro_batch"] == "per_device_train_batch_size"
