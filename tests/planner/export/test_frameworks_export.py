"""Plans exported for the framework they were planned for (LLaMA-Factory, ms-swift, axolotl): the files parse, hold the
plan's values under the framework's own keys, and pass the frameworks' own parsers where a venv with the framework is
named (MEMPLAN_LLAMAFACTORY_PYTHON, MEMPLAN_SWIFT_PYTHON, MEMPLAN_AXOLOTL_PYTHON: the python of that venv; the
validators are tests/planner/export/validators/)."""

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from planner import advise, intake
from planner.config.knobfields import KnobFields
from planner.errors import BadInput
from planner.frameworks.axolotl import writer as axolotl
from planner.frameworks.llamafactory import writer as llamafactory
from planner.frameworks.swift import writer as swift

yaml = pytest.importorskip("yaml")

VALIDATORS = Path(__file__).parent / "validators"
BASE = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 4, "seq_len": 4096}
GRPO = {"kind": "grpo", "num_generations": 8, "max_completion_length": 1024, "generation": "vllm-colocate"}
DPO = {"kind": "dpo", "max_length": 2048}
KTO = {"kind": "kto", "max_length": 2048}
GKD = {"kind": "gkd", "teacher_model": "qwen2.5-14b", "max_length": 2048, "max_completion_length": 512, "lmbda": 0.3}
VLM_FULL = {
    "model": "qwen2.5-vl-7b",
    "fsdp": "full",
    "checkpointing": "full",
    "offload": "optimizer+params",
    "frozen": "vision+projector",
    "batching": "packed",
    "attention": "flash",
    "loss": "fused",
}
# an image and a video a row at caps that are not the frameworks' defaults: the files carry them (writer_media)
MEDIA = {"images": 1, "max_pixels": 401408, "videos": 1, "max_frames": 16, "fps": 1.0, "video_max_pixels": 200704}

# each framework's plans: DoRA under ZeRO-3 (axolotl: FSDP) with the embeddings trained, LoRA + ZeRO-3 over two
# nodes, QLoRA GRPO (LLaMA-Factory: QLoRA SFT), full DPO with ZeRO-2 and optimizer offload, a VLM's full FSDP run with
# frozen modules, packing and the fused loss, and more
# GaLore (layer-wise: one GPU, no accumulation), APOLLO on named linears, Muon (planner.estimate.matrix_optim)
MATRIX = {"gpus_per_node": 1, "micro_batch": 1, "grad_accum": 1}
CASES = {
    "llamafactory": {
        "galore_layerwise": {
            **MATRIX,
            "optimizer": "galore-adamw",
            "optimizer_rank": 64,
            "optimizer_in_backward": True,
            "optimizer_projection": "reverse-std",
        },
        "apollo_targets": {**MATRIX, "optimizer": "apollo-adamw", "optimizer_targets": "q_proj,v_proj"},
        "muon": {**MATRIX, "optimizer": "muon"},
        "dora": {
            "lora_rank": 16,
            "lora_variant": "dora",
            "zero": 3,
            "checkpointing": "full",
            "lora_train_embeddings": True,
        },
        "lora_z3": {"zero": 3, "checkpointing": "full", "lora_rank": 16, "nodes": 2},
        "qlora": {"lora_rank": 8, "quant": "nf4", "checkpointing": "off", "lora_targets": "attention"},
        # LoRA on embed_tokens and lm_head: every linear by name beside them (lora_target takes `all` only alone)
        "lora_ends": {"lora_rank": 8, "lora_ends": "both", "zero": 2, "checkpointing": "full"},
        "qlora_fsdp": {"lora_rank": 16, "quant": "nf4", "fsdp": "full", "checkpointing": "full"},
        "int8": {"lora_rank": 8, "quant": "int8", "checkpointing": "full"},
        "dpo_full_z2_offload": {"zero": 2, "offload": "optimizer", "workload": DPO, "checkpointing": "full"},
        "kto_lora": {"lora_rank": 8, "checkpointing": "full", "workload": KTO},
        "freeze": {"trained_layers": 4, "checkpointing": "full", "zero": 2},
        "llama_pro": {"trained_layers": 4, "trained_layout": "interleaved", "checkpointing": "full"},
        "freeze_first": {"trained_layers": 2, "trained_layout": "first", "checkpointing": "full"},
        "vlm_fsdp": {
            **VLM_FULL,
            **MEDIA,
            "checkpointing": "offload-inputs",
            "frozen": "vision",
            "micro_batch": 1,
            "nodes": 2,
        },
        "vlm_projector_only": {
            "model": "qwen2.5-vl-7b",
            "zero": 2,
            "checkpointing": "full",
            "frozen": "language+vision",
            "image_tokens": 1024,
        },
        "z3_offload_fp16": {"zero": 3, "offload": "optimizer+params", "precision": "fp16", "checkpointing": "full"},
        "pure_bf16": {
            "gpus_per_node": 1,
            "precision": "bf16-pure",
            "lora_rank": 4,
            "batching": "packed",
            "lora_train_embeddings": True,
        },
    },
    "swift": {
        "galore_8bit": {
            **MATRIX,
            "optimizer": "galore-adamw-8bit",
            "optimizer_targets": "q_proj,v_proj",
            "optimizer_projection": "full",
        },
        "muon": {**MATRIX, "optimizer": "muon"},
        "muonclip": {**MATRIX, "optimizer": "muonclip", "lora_rank": 8},  # optimizer/muonclip.sh's
        "freeze": {"trained_layers": 4, "precision": "bf16-pure", "checkpointing": "full"},
        "llama_pro": {
            "trained_layers": 4,
            "trained_layout": "inserted",
            "precision": "bf16-pure",
            "checkpointing": "full",
        },
        "dora": {
            "lora_rank": 16,
            "lora_variant": "dora",
            "zero": 3,
            "checkpointing": "full",
            "lora_train_embeddings": True,
        },
        "lora_z3": {"zero": 3, "checkpointing": "full", "lora_rank": 16, "nodes": 2},
        "adalora": {"lora_rank": 12, "lora_variant": "adalora", "zero": 2, "checkpointing": "full"},
        "lora_ends": {"lora_rank": 8, "lora_ends": "both", "zero": 2, "checkpointing": "full"},  # lora2.sh's
        "vera": {"lora_rank": 256, "lora_variant": "vera", "lora_targets": "k_proj,v_proj", "lora_dropout": 0.1},
        "adapter": {"lora_rank": 64, "lora_variant": "adapter", "checkpointing": "full"},
        "qlora_grpo": {"lora_rank": 16, "quant": "nf4", "workload": GRPO},
        "grpo_sync_batches": {
            "zero": 3,
            "checkpointing": "full",
            "workload": {**GRPO, "roles": {"move_model_batches": 4, "rollout_tp": 2, "sleep_level": 1}},
        },
        "qlora_z3": {"lora_rank": 16, "quant": "nf4", "zero": 3, "checkpointing": "full"},
        "int8": {"lora_rank": 8, "quant": "int8", "checkpointing": "full"},
        "dpo_full_z2_offload": {"zero": 2, "offload": "optimizer", "workload": DPO, "checkpointing": "full"},
        # DPO padding-free under Ulysses (swift/arguments/rlhf_args.py:710-725 run both for dpo)
        "dpo_packed_ulysses": {
            "zero": 2,
            "workload": DPO,
            "batching": "packed",
            "attention": "flash",
            "sequence_parallel": 2,
            "checkpointing": "full",
        },
        "gkd_full_z3": {"zero": 3, "checkpointing": "full", "workload": GKD},
        # GRPO under Ulysses: --gradient_accumulation_steps written as the plan's micro-steps over S (the trainer
        # multiplies it back, rlhf_trainers/grpo_trainer.py:152-153); CHORD's SFT rows (args_mixin.py:388)
        "grpo_ulysses": {
            "zero": 3,
            "checkpointing": "full",
            "attention": "flash",
            "sequence_parallel": 2,
            "workload": GRPO,
        },
        "grpo_chord": {"zero": 3, "checkpointing": "full", "workload": {**GRPO, "chord_sft_batch": 1}},
        "kto_full_z2": {"zero": 2, "checkpointing": "full", "workload": KTO},
        # KTO padding-free (swift/arguments/rlhf_args.py:710-717 lists kto; no sequence parallel for it, :719-725)
        "kto_packed": {"zero": 2, "checkpointing": "full", "workload": KTO, "batching": "packed", "attention": "flash"},
        "vlm_fsdp": {**VLM_FULL, **MEDIA, "checkpointing": "off"},
        "vlm_llm_frozen": {
            "model": "qwen2.5-vl-7b",
            "zero": 2,
            "checkpointing": "full",
            "frozen": "language",
            "image_tokens": 1024,
        },
        "fsdp_preset": {"fsdp": "full", "checkpointing": "full", "attention": "eager"},
        "ulysses_lora": {
            "zero": 2,
            "checkpointing": "full",
            "lora_rank": 16,
            "sequence_parallel": 4,
            "seq_len": 32768,
            "loss": "chunked",
        },
        "autotp_full": {"zero": 2, "checkpointing": "full", "tensor_parallel": 2, "attention": "flash"},
        "seq_cls": {"task": "seq-cls", "num_labels": 3, "lora_rank": 8, "checkpointing": "full"},
        "reward_model": {"task": "seq-cls", "num_labels": 1, "negatives": 1, "lora_rank": 8, "checkpointing": "full"},
        "embedding": {"task": "embedding", "negatives": 3, "lora_rank": 8, "checkpointing": "full", "zero": 2},
        "reranker": {"task": "reranker", "negatives": 5, "checkpointing": "full", "zero": 3},
        "z3_offload": {
            "zero": 3,
            "offload": "optimizer+params",
            "checkpointing": "full",
            "lora_rank": 8,
            "lora_targets": "q_proj,v_proj",
            "lora_dropout": 0.05,
        },
    },
    "axolotl": {
        "dora": {
            "lora_rank": 16,
            "lora_variant": "dora",
            "fsdp": "full",
            "checkpointing": "full",
            "lora_train_embeddings": True,
        },
        "lora_z3": {"zero": 3, "checkpointing": "full", "lora_rank": 16, "nodes": 2},
        "qlora_grpo": {"lora_rank": 16, "quant": "nf4", "workload": GRPO},
        "dpo_full_z2_offload": {
            "zero": 2,
            "offload": "optimizer",
            "workload": {**DPO, "precompute_ref_log_probs": True},
            "checkpointing": "full",
        },
        "vlm_fsdp": VLM_FULL,
        "int8": {"lora_rank": 8, "quant": "int8", "checkpointing": "full"},
        "gptq": {"lora_rank": 8, "quant": "gptq", "checkpointing": "full"},
        "one_gpu": {
            "gpus_per_node": 1,
            "lora_rank": 8,
            "lora_targets": "attention",
            "loss": "chunked",
            "checkpointing": "offload",
            "precision": "bf16-pure",
        },
        # an adapter's layer-input offload: activation_offloading hidden_states (true offloads every saved tensor)
        "qlora_offload_inputs": {"lora_rank": 8, "quant": "nf4", "checkpointing": "offload-inputs", "gpus_per_node": 1},
        "fp32_grad_op": {"fsdp": "grad-op", "precision": "fp32", "checkpointing": "off", "optimizer": "adamw-fused"},
        # context_parallel_size is keys-only (test_swift_and_axolotl_write_their_parallel_keys): axolotl's validator
        # imports ring_flash_attn for it (utils/schemas/validation.py:1848), which needs CUDA's flash-attn
        "tp_fsdp": {"fsdp": "full", "checkpointing": "full", "attention": "flash", "tensor_parallel": 2},
        "galore": {**MATRIX, "optimizer": "galore-adamw", "optimizer_projection": "left"},  # optim_target_modules too
        "muon": {**MATRIX, "optimizer": "muon"},  # optimizer: muon (axolotl-contribs-mit's MuonOptimizerFactory)
        "kto_qlora": {"lora_rank": 16, "quant": "nf4", "checkpointing": "full", "workload": KTO},  # from v0.17.0
        "lora_ends": {"lora_rank": 8, "lora_ends": "both", "zero": 2, "checkpointing": "full"},
        "lora_head_named": {"lora_rank": 8, "lora_ends": "head", "lora_targets": "q_proj,v_proj", "zero": 2},
    },
}
MODULES = {"llamafactory": llamafactory, "swift": swift, "axolotl": axolotl}


def planned(framework: str, **fields):
    """A plan made by the real planner for `framework` (advise.check), with its model, hardware and seq_len."""
    plan, model, hw, goal = planned_goal(framework, **fields)
    return plan, model, hw, goal.seq_len


def planned_goal(framework: str, **fields):
    """planned's plan, model and hardware, and its goal (the images' and videos' caps the files write)."""
    body = {**BASE, "framework": framework, **fields}
    if "workload" in body:
        body.pop("seq_len")  # RL rows are planned from the workload's lengths
    result = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = result.context
    return result.plan, model, hw, goal


def written(framework: str, case: str, folder: Path, fields: dict | None = None) -> SimpleNamespace:
    """The case's files written into folder/case (`fields`: a case not in CASES; `framework` may name a release
    line, NAME@LINE): its plan, hardware and that folder (dir)."""
    plan, model, hw, goal = planned_goal(framework, **(fields or CASES[framework][case]))
    d = folder / case
    d.mkdir(parents=True)
    for name, text in MODULES[framework.partition("@")[0]].files(plan, model, hw, goal.seq_len, goal).items():
        (d / name).write_text(text)
    return SimpleNamespace(plan=plan, hw=hw, dir=d, goal=goal)


def swift_flags(text: str) -> tuple[dict, list[str], dict]:
    """(environment, the command's first words, {flag: value, or [values]}) of a swift_train.sh, as bash reads it."""
    toks = shlex.split(text.replace("\\\n", " "), comments=True)
    env = {}
    while "=" in toks[0] and not toks[0].startswith("-"):
        k, _, v = toks.pop(0).partition("=")
        env[k] = v
    cmd, flags = toks[:2], {}
    for t in toks[2:]:
        if t.startswith("--"):
            flags[t[2:]] = []
        else:
            flags[list(flags)[-1]].append(t)
    return env, cmd, {k: v[0] if len(v) == 1 else v for k, v in flags.items()}


# --- LLaMA-Factory -------------------------------------------------------------------------------------------------


def lf(case: str, tmp_path: Path) -> SimpleNamespace:
    w = written("llamafactory", case, tmp_path)
    w.cfg = yaml.safe_load((w.dir / llamafactory.CONFIG_NAME).read_text())
    return w


def test_llamafactory_kto_writes_its_stage_and_reads_it_back(tmp_path):
    """stage kto with the rows' cutoff_len; read back, the same workload with LLaMA-Factory's whole-logits head, which
    the plan written from --framework llamafactory already planned, the KL pass after the policy's forward."""
    w = lf("kto_lora", tmp_path)
    assert w.cfg["stage"] == "kto" and w.cfg["cutoff_len"] == 2048 and w.cfg["pref_beta"] == 0.1
    assert w.plan.workload.logprobs == "full" and "kl-forward" in w.plan.memory.phases
    back = intake.read([str(w.dir / llamafactory.CONFIG_NAME)]).request["workload"]
    assert back == {"kind": "kto", "max_length": 2048, "logprobs": "full"}


@pytest.mark.parametrize(
    "framework,case,name,written_as",
    [
        ("llamafactory", "galore_layerwise", llamafactory.CONFIG_NAME, 'galore_proj_type: "reverse_std"'),
        ("swift", "galore_8bit", swift.SCRIPT_NAME, "--galore_proj_type full"),
        ("axolotl", "galore", axolotl.CONFIG_NAME, 'optim_args: "rank=128,proj_type=left"'),
    ],
)
def test_galores_projection_is_written_and_read_back(framework, case, name, written_as, tmp_path):
    """LLaMA-Factory's galore_proj_type, ms-swift's --galore_proj_type, axolotl's optim_args proj_type= (beside the
    optim_target_modules transformers requires), in GaLore's spelling; read back, the same optimizer_projection (their
    own parsers take the files: test_exports_pass_the_frameworks_own_parsers)."""
    w = written(framework, case, tmp_path)
    assert written_as in (w.dir / name).read_text()
    assert intake.read([str(w.dir / name)]).request["optimizer_projection"] == w.plan.optimizer_projection


def test_llamafactory_freeze_tuning_writes_its_trained_layers_and_reads_them_back(tmp_path):
    """finetuning_type freeze with freeze_trainable_layers (model/adapter.py:89-90): the last 4 layers trained; read
    back, the same knob, and an older line's num_layer_trainable (v0.6.3 finetuning_args.py:25-26) the same."""
    w = lf("freeze", tmp_path)
    assert (w.cfg["finetuning_type"], w.cfg["freeze_trainable_layers"]) == ("freeze", 4)
    assert w.cfg["freeze_trainable_modules"] == "all" and "lora_rank" not in w.cfg
    path = w.dir / llamafactory.CONFIG_NAME
    assert intake.read([str(path)]).request["trained_layers"] == 4
    pro = lf("llama_pro", tmp_path)
    assert pro.cfg["use_llama_pro"] is True and pro.cfg["freeze_trainable_layers"] == 4
    back = intake.read([str(pro.dir / llamafactory.CONFIG_NAME)]).request
    assert (back["trained_layers"], back["trained_layout"]) == (4, "interleaved")
    first = lf("freeze_first", tmp_path)  # a negative count: the first 2 layers (model/adapter.py:91-92)
    assert first.cfg["freeze_trainable_layers"] == -2 and "use_llama_pro" not in first.cfg
    back = intake.read([str(first.dir / llamafactory.CONFIG_NAME)]).request
    assert (back["trained_layers"], back["trained_layout"]) == (2, "first")
    old = tmp_path / "old.yaml"
    old.write_text(
        "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: freeze\nnum_layer_trainable: 4\n"
        "name_module_trainable: all\ncutoff_len: 1024\nbf16: true\n"
    )
    assert intake.read([str(old)]).request["trained_layers"] == 4


def test_llamafactory_lora_zero3_over_two_nodes(tmp_path):
    w = lf("lora_z3", tmp_path)
    plan, hw, d, cfg = w.plan, w.hw, w.dir, w.cfg
    assert cfg["model_name_or_path"] == "Qwen/Qwen2.5-7B" and cfg["stage"] == "sft" and cfg["do_train"] is True
    assert (cfg["finetuning_type"], cfg["lora_rank"], cfg["lora_alpha"], cfg["lora_target"]) == ("lora", 16, 32, "all")
    assert cfg["per_device_train_batch_size"] == 2 and cfg["gradient_accumulation_steps"] == 4
    assert cfg["cutoff_len"] == 4096 and cfg["disable_gradient_checkpointing"] is False
    assert cfg["bf16"] is True and cfg["flash_attn"] == "sdpa" and cfg["optim"] == "adamw_torch"
    assert cfg["deepspeed"] == "ds_z3_config.json"
    ds = json.loads((d / "ds_z3_config.json").read_text())
    assert ds["zero_optimization"]["stage"] == 3 and ds["train_batch_size"] == plan.global_batch == 128
    assert "# or your local path" in (d / llamafactory.CONFIG_NAME).read_text()
    assert llamafactory.command(plan, hw) == (
        "FORCE_TORCHRUN=1 NNODES=2 NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR "
        "MASTER_PORT=$MASTER_PORT NPROC_PER_NODE=8 llamafactory-cli train "
        "llamafactory_train.yaml"
    )


def test_llamafactory_qlora_ddp(tmp_path):
    w = lf("qlora", tmp_path)
    plan, hw, d, cfg = w.plan, w.hw, w.dir, w.cfg
    assert (cfg["quantization_bit"], cfg["quantization_method"], cfg["quantization_type"]) == (4, "bnb", "nf4")
    assert cfg["lora_target"] == "q_proj,k_proj,v_proj,o_proj"  # the model's attention linears
    assert cfg["disable_gradient_checkpointing"] is True and "deepspeed" not in cfg
    assert sorted(p.name for p in d.iterdir()) == [llamafactory.CONFIG_NAME]
    assert (
        llamafactory.command(plan, hw) == "FORCE_TORCHRUN=1 NNODES=1 NPROC_PER_NODE=8 llamafactory-cli train "
        "llamafactory_train.yaml"
    )


def test_llamafactory_quantized_bases(tmp_path):
    """QLoRA under FSDP (LLaMA-Factory stores the 4-bit weight in the compute dtype itself, quantization.py:178), an
    8-bit base, and an AWQ checkpoint (0.9.5 loads it for LoRA, quantization.py:122-123: its own quantization_config
    decides, so no bitsandbytes key is written)."""
    fsdp, int8 = lf("qlora_fsdp", tmp_path).cfg, lf("int8", tmp_path).cfg
    assert (fsdp["quantization_bit"], fsdp["quantization_type"]) == (4, "nf4") and "fsdp" not in fsdp
    assert (int8["quantization_bit"], int8["quantization_method"]) == (8, "bnb") and "quantization_type" not in int8
    awq = written("llamafactory", "awq", tmp_path, {"lora_rank": 8, "quant": "awq", "precision": "fp16"})
    cfg = yaml.safe_load((awq.dir / llamafactory.CONFIG_NAME).read_text())
    assert cfg["fp16"] is True and not any(k.startswith("quantization_") for k in cfg), cfg


def test_llamafactory_full_dpo_with_offloaded_zero2(tmp_path):
    w = lf("dpo_full_z2_offload", tmp_path)
    d, cfg = w.dir, w.cfg
    assert cfg["stage"] == "dpo" and cfg["finetuning_type"] == "full" and cfg["cutoff_len"] == 2048
    assert cfg["deepspeed"] == "ds_z2_offload_config.json" and "lora_rank" not in cfg
    zero = json.loads((d / cfg["deepspeed"]).read_text())["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"]["device"] == "cpu" and "offload_param" not in zero


def test_llamafactory_vlm_fsdp_runs_under_accelerate(tmp_path):
    w = lf("vlm_fsdp", tmp_path)
    plan, hw, d, cfg = w.plan, w.hw, w.dir, w.cfg
    assert cfg["finetuning_type"] == "full" and "deepspeed" not in cfg
    assert cfg["freeze_vision_tower"] is True and cfg["freeze_multi_modal_projector"] is False  # written both ways
    assert cfg["use_unsloth_gc"] is True and cfg["disable_gradient_checkpointing"] is False
    assert cfg["enable_liger_kernel"] is True and cfg["flash_attn"] == "fa2" and cfg["neat_packing"] is True
    acc = yaml.safe_load((d / llamafactory.ACCELERATE_NAME).read_text())
    assert acc["distributed_type"] == "FSDP" and acc["num_processes"] == 16 and acc["num_machines"] == 2
    assert acc["fsdp_config"]["fsdp_version"] == 2 and acc["fsdp_config"]["fsdp_offload_params"] is True
    assert acc["fsdp_config"]["fsdp_activation_checkpointing"] is False  # LF checkpoints the model itself
    # the caps LF's defaults are not (768 x 768, 256 x 256 a frame, 128 frames: writer_media), its parser checks them
    media = (
        "image_max_pixels",
        "image_min_pixels",
        "video_max_pixels",
        "video_min_pixels",
        "video_fps",
        "video_maxlen",
    )
    assert [cfg[k] for k in media] == [401408, 3136, 200704, 100352, 1.0, 16]
    back = intake.read([str(d / llamafactory.CONFIG_NAME)]).request
    assert (back["videos"], back["video_max_pixels"], back["fps"], back["max_frames"]) == (1, 200704, 1.0, 16)
    assert llamafactory.command(plan, hw) == (
        "accelerate launch --config_file accelerate_fsdp_config.yaml --machine_rank $NODE_RANK --main_process_ip "
        "$MASTER_ADDR --main_process_port $MASTER_PORT src/train.py llamafactory_train.yaml"
    )


def test_llamafactory_lora_on_the_tower_writes_it_unfrozen_and_reads_it_back(tmp_path):
    """lora_target all with freeze_vision_tower false adapts the tower's linears (LF 0.9.5 misc.py:40-41)."""
    fields = {"model": "qwen2.5-vl-7b", "lora_rank": 8, "lora_vision": True, "image_tokens": 1024, "zero": 2}
    w = written("llamafactory", "lora_vision", tmp_path, fields)
    cfg = yaml.safe_load((w.dir / llamafactory.CONFIG_NAME).read_text())
    assert cfg["freeze_vision_tower"] is False and cfg["lora_target"] == "all"
    assert intake.read([str(w.dir / llamafactory.CONFIG_NAME)]).request["lora_vision"] is True


def test_llamafactory_precisions(tmp_path):
    cfg = lf("z3_offload_fp16", tmp_path).cfg
    assert cfg["fp16"] is True and cfg["bf16"] is False and cfg["deepspeed"] == "ds_z3_offload_config.json"
    cfg = lf("pure_bf16", tmp_path).cfg
    assert cfg["pure_bf16"] is True and cfg["bf16"] is False and cfg["packing"] is True
    assert cfg["additional_target"] == "embed_tokens,lm_head"


def as_framework(framework: str, **fields):
    """A plan the bundled trainer runs, relabelled for `framework`: the planner refuses it for that framework
    (planner.frameworks rules, tests/planner/frameworks), so only a direct call reaches the exporter's own guard."""
    plan, model, hw, seq_len = planned("memplan", **fields)
    with pytest.raises(BadInput, match=f"--framework {framework} "):
        planned(framework, **fields)
    return plan.model_copy(update={"framework": framework}), model, hw, seq_len


def test_llamafactory_refuses_what_it_cannot_run():
    plan, model, hw, seq_len = as_framework("llamafactory", workload={**DPO, "precompute_ref_log_probs": True}, zero=2)
    with pytest.raises(ValueError, match="reference model"):
        llamafactory.files(plan, model, hw, seq_len)


# --- ms-swift ------------------------------------------------------------------------------------------------------


def sw(case: str, tmp_path: Path) -> SimpleNamespace:
    """The case's script as bash reads it (checked by `bash -n` where bash is): env, cmd, f (its flags)."""
    w = written("swift", case, tmp_path)
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(w.dir / swift.SCRIPT_NAME)], check=True)
    w.env, w.cmd, w.f = swift_flags((w.dir / swift.SCRIPT_NAME).read_text())
    return w


def test_swift_lora_zero3_over_two_nodes(tmp_path):
    w = sw("lora_z3", tmp_path)
    plan, hw, d, env, cmd, f = w.plan, w.hw, w.dir, w.env, w.cmd, w.f
    assert env == {
        "NPROC_PER_NODE": "8",
        "NNODES": "2",
        "NODE_RANK": "$NODE_RANK",
        "MASTER_ADDR": "$MASTER_ADDR",
        "MASTER_PORT": "$MASTER_PORT",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    }
    assert cmd == ["swift", "sft"]
    assert f["model"] == "Qwen/Qwen2.5-7B" and f["tuner_type"] == "lora" and f["lora_rank"] == "16"
    assert f["lora_alpha"] == "32" and f["target_modules"] == "all-linear" and f["lora_dropout"] == "0"
    assert f["per_device_train_batch_size"] == "2" and f["gradient_accumulation_steps"] == "4"
    assert f["gradient_checkpointing"] == "true" and f["max_length"] == "4096" and f["torch_dtype"] == "bfloat16"
    assert f["deepspeed"] == "zero3" and f["attn_impl"] == "sdpa" and f["optim"] == "adamw_torch"
    assert sorted(p.name for p in d.iterdir()) == [swift.SCRIPT_NAME]
    assert swift.command(plan, hw) == "bash swift_train.sh"


@pytest.mark.parametrize(
    "case,rank,dropout", [("adalora", "adalora_init_r", "lora_dropout"), ("vera", "vera_rank", "vera_dropout")]
)
def test_swift_writes_adalora_and_vera_at_their_own_rank_and_reads_them_back(case, rank, dropout, tmp_path):
    """--tuner_type adalora | vera with the rank flag each reads (swift/pipelines/train/tuner.py:255-306), no
    --lora_rank; read back as the same plan."""
    w = sw(case, tmp_path)
    assert w.f["tuner_type"] == case and w.f[rank] == str(w.plan.lora_rank) and "lora_rank" not in w.f
    assert float(w.f[dropout]) == w.plan.lora_dropout
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert (back["lora_variant"], back["lora_rank"]) == (case, w.plan.lora_rank)


def test_swift_writes_the_bottleneck_adapter_and_reads_it_back(tmp_path):
    """--tuner_type adapter with --adapter_length alone (swift/pipelines/train/tuner.py:280-293 reads no targets,
    rank or dropout for it); read back as the same plan."""
    w = sw("adapter", tmp_path)
    assert (w.f["tuner_type"], w.f["adapter_length"]) == ("adapter", "64")
    assert not {"lora_rank", "lora_alpha", "lora_dropout", "target_modules"} & set(w.f)
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert (back["lora_variant"], back["lora_rank"], back.get("lora_dropout", 0.0)) == ("adapter", 64, 0.0)


def test_swift_qlora_grpo_with_colocated_vllm(tmp_path):
    w = sw("qlora_grpo", tmp_path)
    cmd, f = w.cmd, w.f
    assert cmd == ["swift", "rlhf"] and f["rlhf_type"] == "grpo"
    assert (f["quant_method"], f["quant_bits"], f["bnb_4bit_quant_type"]) == ("bnb", "4", "nf4")
    assert f["num_generations"] == "8" and f["max_completion_length"] == "1024" and f["beta"] == "0"
    assert f["use_vllm"] == "true" and f["vllm_mode"] == "colocate" and f["vllm_gpu_memory_utilization"] == "0.3"
    assert f["max_length"] == "512"  # GRPO: swift's max_length cuts the prompt
    assert f["gradient_checkpointing"] == "false" and f["reward_funcs"] == ["accuracy", "format"]


def test_swift_grpo_under_ulysses_and_with_chord_write_what_the_trainer_runs(tmp_path):
    """GRPO under Ulysses 2: the plan's micro-steps over 2 as --gradient_accumulation_steps, read back whole; CHORD's
    SFT rows and their dataset's placeholder."""
    w = sw("grpo_ulysses", tmp_path)
    assert w.plan.sequence_parallel == 2 and w.plan.grad_accum % 2 == 0
    assert (w.f["sequence_parallel_size"], w.f["gradient_accumulation_steps"]) == ("2", str(w.plan.grad_accum // 2))
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert (back["grad_accum"], back["sequence_parallel"]) == (w.plan.grad_accum, 2)
    c = sw("grpo_chord", tmp_path / "chord")
    assert (c.f["chord_sft_per_device_train_batch_size"], c.f["chord_sft_dataset"]) == ("1", "YOUR_SFT_DATASET")
    assert intake.read([str(c.dir / swift.SCRIPT_NAME)]).request["workload"]["chord_sft_batch"] == 1


def test_swift_freeze_tuning_writes_its_trainable_layers_and_reads_them_back(tmp_path):
    """--tuner_type full, every parameter frozen and the last 4 layers' prefixes trainable (tuner.py:403-409); read
    back, --trained-layers 4. A ratio under 1 (the head trained too), a regex or a layer neither at the top nor the
    bottom are refused."""
    w = sw("freeze", tmp_path)
    assert (w.f["tuner_type"], w.f["freeze_parameters_ratio"]) == ("full", "1")
    assert w.f["trainable_parameters"] == [f"model.layers.{i}." for i in range(24, 28)]  # Qwen2.5-7B's 28 layers
    assert intake.read([str(w.dir / swift.SCRIPT_NAME)]).request["trained_layers"] == 4
    base = "swift sft --model Qwen/Qwen2.5-7B --tuner_type full --max_length 1024 "
    for flags, says in (
        ("--freeze_parameters_ratio 0.5", "a share of the parameters frozen"),
        ("--freeze_parameters_ratio 1 --trainable_parameters model.layers.5.", "other than the last or the first"),
        ("--trainable_parameters_regex 'layers\\.27'", "by a regex"),
    ):
        path = tmp_path / "t.sh"
        path.write_text(base + flags + "\n")
        with pytest.raises(BadInput, match=says):
            intake.read([str(path)])


def test_swift_grpo_writes_its_weight_sync_and_engine_split(tmp_path):
    """--move_model_batches (the sync's groups), --vllm_tensor_parallel_size and --sleep_level (the engine's weights the
    sync wakes) are written, and read back as the plan's."""
    w = sw("grpo_sync_batches", tmp_path)
    assert w.f["move_model_batches"] == "4" and w.f["vllm_tensor_parallel_size"] == "2" and w.f["sleep_level"] == "1"
    roles = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request["workload"]["roles"]
    assert (roles["move_model_batches"], roles["rollout_tp"], roles["sleep_level"]) == (4, 2, 1)


@pytest.mark.parametrize(
    "case, flags, env",
    [
        ("seq_cls", {"task_type": "seq_cls", "num_labels": "3"}, {}),
        ("reward_model", {"rlhf_type": "rm", "task_type": None, "num_labels": None}, {}),  # swift rlhf's pairs
        ("embedding", {"task_type": "embedding"}, {"INFONCE_HARD_NEGATIVES": "3"}),
        ("reranker", {"task_type": "reranker"}, {"MAX_NEGATIVE_SAMPLES": "5"}),
    ],
)
def test_swift_writes_its_task_and_reads_it_back(case, flags, env, tmp_path):
    """--task_type, --num_labels and the rows an example brings (INFONCE_HARD_NEGATIVES, MAX_NEGATIVE_SAMPLES; a reward
    model's pairs: --rlhf_type rm) are written, and read back as the plan's task."""
    w = sw(case, tmp_path)
    assert {k: w.f.get(k) for k in flags} == flags and {k: w.env.get(k) for k in env} == env
    request = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    fields = ("task", "num_labels", "negatives")
    assert {k: request.get(k, KnobFields.model_fields[k].default) for k in fields} == {
        k: getattr(w.plan, k) for k in fields
    }


def test_swift_quantized_bases(tmp_path):
    """QLoRA under ZeRO-3 states the storage dtype ms-swift leaves unset (quant_args.py:43); 8 bits is quant_bits 8;
    HQQ at the 3.9 line (ms-swift 3.x on transformers 4.57: the 4 line, on transformers 5, refuses it)."""
    z3, int8 = sw("qlora_z3", tmp_path).f, sw("int8", tmp_path).f
    assert (z3["quant_bits"], z3["bnb_4bit_quant_storage"], z3["deepspeed"]) == ("4", "bfloat16", "zero3")
    assert (int8["quant_method"], int8["quant_bits"]) == ("bnb", "8") and "bnb_4bit_quant_type" not in int8
    hqq = written("swift@3.9", "hqq", tmp_path, {"lora_rank": 8, "quant": "hqq", "checkpointing": "full"})
    f = swift_flags((hqq.dir / swift.SCRIPT_NAME).read_text())[2]
    assert (f["quant_method"], f["quant_bits"]) == ("hqq", "4")  # quant_args.py:69-71: HqqConfig(nbits=4)
    assert intake.read([str(hqq.dir / swift.SCRIPT_NAME)]).request["quant"] == "hqq"


def test_swift_full_dpo_writes_its_offload_zero2_json(tmp_path):
    w = sw("dpo_full_z2_offload", tmp_path)
    d, f = w.dir, w.f
    assert f["rlhf_type"] == "dpo" and f["tuner_type"] == "full" and f["max_length"] == "2048"
    assert f["deepspeed"] == "ds_config.json" and f["torch_dtype"] == "bfloat16"  # DeepSpeed keeps fp32 masters
    zero = json.loads((d / "ds_config.json").read_text())["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"]["device"] == "cpu"


def test_swift_kto_writes_its_rlhf_type_and_reads_it_back(tmp_path):
    """`swift rlhf --rlhf_type kto` with the rows' --max_length; read back, the same workload, with ms-swift's KTO head
    (the whole logits, rlhf_trainers/kto_trainer.py:53,59-61,128), which the plan written from --framework swift
    already planned (Framework.kto_logprobs)."""
    w = sw("kto_full_z2", tmp_path)
    assert w.cmd == ["swift", "rlhf"] and w.f["rlhf_type"] == "kto" and w.f["max_length"] == "2048"
    assert w.plan.workload.logprobs == "full"
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request["workload"]
    assert back == {"kind": "kto", "max_length": 2048, "logprobs": "full"}


def test_swift_packed_kto_writes_padding_free_and_reads_it_back(tmp_path):
    """KTO's rows and KL rows each one packed row (template/base.py:1884-1893 collates both padding-free): written with
    --padding_free and flash attention (sft_args.py:186-197), read back packed."""
    w = sw("kto_packed", tmp_path)
    assert w.f["rlhf_type"] == "kto" and w.f["padding_free"] == "true" and w.f["attn_impl"] == "flash_attn"
    assert "packing" not in w.f  # --packing would bin each row with its KL row under max_length (dataset/packing.py)
    reading = intake.read([str(w.dir / swift.SCRIPT_NAME)])
    assert reading.request["workload"]["kind"] == "kto" and reading.request["batching"] == "packed"


def test_swift_gkd_writes_its_teacher_and_reads_it_back(tmp_path):
    """`swift rlhf --rlhf_type gkd` with --teacher_model (the catalog model's id), --lmbda, --beta (the JSD's) and the
    rows' and completions' lengths; read back, the same workload."""
    w = sw("gkd_full_z3", tmp_path)
    assert w.cmd == ["swift", "rlhf"] and w.f["rlhf_type"] == "gkd" and w.f["teacher_model"] == "Qwen/Qwen2.5-14B"
    assert (w.f["lmbda"], w.f["beta"], w.f["max_length"], w.f["max_completion_length"]) == ("0.3", "0.5", "2048", "512")
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request["workload"]
    fields = ("kind", "teacher_model", "lmbda", "jsd_beta", "max_length", "max_completion_length")
    assert {k: back[k] for k in fields} == {k: getattr(w.plan.workload, k) for k in fields}


def test_swift_vlm_fsdp_with_offload_writes_its_fsdp_json(tmp_path):
    w = sw("vlm_fsdp", tmp_path)
    d, f = w.dir, w.f
    assert f["freeze_vit"] == "true" and f["freeze_aligner"] == "true"
    assert f["torch_dtype"] == "float32" and f["bf16"] == "true"  # fp32 shards, bf16 compute, as planned
    assert f["packing"] == "true" and f["padding_free"] == "true" and f["attn_impl"] == "flash_attn"
    assert f["use_liger_kernel"] == "true" and f["gradient_checkpointing"] == "false"
    assert f["fsdp"] == swift.FSDP_NAME
    cfg = json.loads((d / swift.FSDP_NAME).read_text())
    assert cfg["fsdp"] == "full_shard auto_wrap offload" and cfg["fsdp_config"]["activation_checkpointing"] is False
    # ms-swift's environment over qwen_vl_utils' caps (writer_media): the plan's, not 12,845,056 and 602,112 pixels
    media = {k: w.env[k] for k in ("MAX_PIXELS", "MIN_PIXELS", "VIDEO_MAX_PIXELS", "FPS", "FPS_MAX_FRAMES")}
    assert media == {
        "MAX_PIXELS": "401408",
        "MIN_PIXELS": "3136",
        "VIDEO_MAX_PIXELS": "200704",
        "FPS": "1",
        "FPS_MAX_FRAMES": "16",
    }
    assert w.goal.video == (100352, 200704, 1.0, 16)  # 16 frames: at most 16 x 256 / 2 = 2,048 tokens
    back = intake.read([str(d / swift.SCRIPT_NAME)]).request
    assert (back["videos"], back["video_max_pixels"], back["fps"], back["max_frames"]) == (1, 200704, 1.0, 16)


def test_swift_presets_where_they_are_the_plan(tmp_path):
    f = sw("fsdp_preset", tmp_path).f
    assert f["fsdp"] == "fsdp2" and f["attn_impl"] == "eager"
    w = sw("z3_offload", tmp_path)
    d, f = w.dir, w.f
    assert f["deepspeed"] == "zero3_offload" and f["target_modules"] == ["q_proj", "v_proj"]
    assert f["lora_dropout"] == "0.05" and sorted(p.name for p in d.iterdir()) == [swift.SCRIPT_NAME]


def test_swift_refuses_packing_without_flash_attention():
    plan, model, hw, seq_len = as_framework("swift", batching="packed")
    with pytest.raises(ValueError, match="flash attention"):
        swift.files(plan, model, hw, seq_len)


# --- axolotl -------------------------------------------------------------------------------------------------------


def ax(case: str, tmp_path: Path) -> SimpleNamespace:
    w = written("axolotl", case, tmp_path)
    w.cfg = yaml.safe_load((w.dir / axolotl.CONFIG_NAME).read_text())
    return w


def test_axolotl_lora_zero3_over_two_nodes(tmp_path):
    w = ax("lora_z3", tmp_path)
    plan, hw, d, cfg = w.plan, w.hw, w.dir, w.cfg
    assert cfg["base_model"] == "Qwen/Qwen2.5-7B" and cfg["adapter"] == "lora" and cfg["lora_target_linear"] is True
    assert (cfg["lora_r"], cfg["lora_alpha"], cfg["micro_batch_size"]) == (16, 32, 2)
    assert cfg["gradient_accumulation_steps"] == 4 and cfg["sequence_len"] == 4096 and cfg["sample_packing"] is False
    assert cfg["gradient_checkpointing"] is True and cfg["bf16"] is True and cfg["optimizer"] == "adamw_torch"
    assert cfg["attn_implementation"] == "sdpa" and cfg["deepspeed"] == "ds_config.json"
    assert isinstance(cfg["learning_rate"], float)
    assert json.loads((d / "ds_config.json").read_text())["zero_optimization"]["stage"] == 3
    assert axolotl.command(plan, hw) == (
        "accelerate launch --num_processes 16 --num_machines 2 --machine_rank $NODE_RANK --main_process_ip "
        "$MASTER_ADDR --main_process_port $MASTER_PORT -m axolotl.cli.train axolotl.yaml"
    )


def test_axolotl_qlora_grpo(tmp_path):
    w = ax("qlora_grpo", tmp_path)
    plan, hw, cfg = w.plan, w.hw, w.cfg
    assert cfg["adapter"] == "qlora" and cfg["load_in_4bit"] is True and cfg["rl"] == "grpo"
    assert cfg["bnb_config_kwargs"] == {"bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}
    trl = cfg["trl"]
    assert (trl["num_generations"], trl["max_completion_length"], trl["beta"]) == (8, 1024, 0.0)
    assert trl["use_vllm"] is True and trl["vllm_mode"] == "colocate" and cfg["vllm"]["gpu_memory_utilization"] == 0.3
    assert trl["generation_batch_size"] == 2 * 8 * 4 and "deepspeed" not in cfg
    assert axolotl.command(plan, hw) == "accelerate launch --num_processes 8 -m axolotl.cli.train axolotl.yaml"


def test_axolotl_quantized_bases(tmp_path):
    """8 bits is adapter lora with load_in_8bit; a GPTQ checkpoint is gptq: true (loaders/model.py:768)."""
    int8, gptq = ax("int8", tmp_path).cfg, ax("gptq", tmp_path).cfg
    assert (int8["adapter"], int8["load_in_8bit"]) == ("lora", True) and "load_in_4bit" not in int8
    assert (gptq["adapter"], gptq["gptq"]) == ("lora", True) and "load_in_8bit" not in gptq


def test_axolotl_full_dpo_with_offloaded_zero2(tmp_path):
    w = ax("dpo_full_z2_offload", tmp_path)
    d, cfg = w.dir, w.cfg
    assert cfg["rl"] == "dpo" and "adapter" not in cfg and cfg["precompute_ref_log_probs"] is True
    assert cfg["sequence_len"] == 2048
    zero = json.loads((d / cfg["deepspeed"]).read_text())["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"]["device"] == "cpu"


def test_axolotl_kto_writes_rl_kto_and_reads_it_back(tmp_path):
    """rl: kto with remove_unused_columns false (utils/schemas/validation.py:713-719 refuses it otherwise), KTO's
    prompt/completion/label rows (prompt_strategies/kto), sequence_len its rows' max_length; read back, the same."""
    w = ax("kto_qlora", tmp_path)
    cfg = w.cfg
    assert cfg["rl"] == "kto" and cfg["remove_unused_columns"] is False and cfg["sample_packing"] is False
    assert cfg["datasets"][0]["type"] == "chatml.ultra" and cfg["sequence_len"] == 2048 and cfg["adapter"] == "qlora"
    back = intake.read([str(w.dir / axolotl.CONFIG_NAME)]).request
    assert back["workload"] == KTO and back["lora_rank"] == 16 and back["quant"] == "nf4"


def test_axolotl_vlm_fsdp2(tmp_path):
    w = ax("vlm_fsdp", tmp_path)
    cfg = w.cfg
    assert cfg["fsdp_version"] == 2 and cfg["freeze_mm_modules"] is True and "deepspeed" not in cfg
    f = cfg["fsdp_config"]
    assert f["offload_params"] is True and f["reshard_after_forward"] is True and f["activation_checkpointing"] is True
    assert f["transformer_layer_cls_to_wrap"] == "Qwen2_5_VLDecoderLayer,Qwen2_5_VLVisionBlock"
    assert cfg["gradient_checkpointing"] is False  # FSDP's activation checkpointing instead
    assert cfg["plugins"] == [axolotl.LIGER] and cfg["liger_fused_linear_cross_entropy"] is True
    assert cfg["sample_packing"] is True and cfg["attn_implementation"] == "flash_attention_2"


def test_axolotl_one_gpu_recipe_knobs(tmp_path):
    w = ax("one_gpu", tmp_path)
    plan, hw, cfg = w.plan, w.hw, w.cfg
    assert cfg["lora_target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert cfg["chunked_cross_entropy"] is True and cfg["activation_offloading"] is True
    assert cfg["gradient_checkpointing"] is True and cfg["bfloat16"] is True and cfg["bf16"] is False
    assert axolotl.command(plan, hw) == "axolotl train axolotl.yaml"
    cfg = ax("fp32_grad_op", tmp_path).cfg
    assert cfg["bf16"] is False and cfg["fp16"] is False and cfg["fsdp_config"]["reshard_after_forward"] is False
    assert cfg["optimizer"] == "adamw_torch_fused"


def test_axolotl_refuses_a_tower_frozen_without_its_projector():
    plan, model, hw, seq_len = as_framework("axolotl", model="qwen2.5-vl-7b", frozen="vision", zero=2)
    with pytest.raises(ValueError, match="projector"):
        axolotl.files(plan, model, hw, seq_len)


# --- the frameworks' own parsers -----------------------------------------------------------------------------------

PARSERS = {
    "llamafactory": ("MEMPLAN_LLAMAFACTORY_PYTHON", "llamafactory_validate.py", llamafactory.CONFIG_NAME),
    "swift": ("MEMPLAN_SWIFT_PYTHON", "swift_validate.py", swift.SCRIPT_NAME),
    "axolotl": ("MEMPLAN_AXOLOTL_PYTHON", "axolotl_validate.py", axolotl.CONFIG_NAME),
}
BROKEN = {
    "llamafactory": ('flash_attn: "sdpa"', 'flash_attn: "fa4"'),
    "swift": ("--tuner_type", "--train_type"),
    "axolotl": ("micro_batch_size: 2", 'micro_batch_size: "two"'),
}


def validate(framework: str, paths: list[Path | str]) -> subprocess.CompletedProcess:
    var, script, _ = PARSERS[framework]
    python = os.environ.get(var)
    if not python:
        pytest.skip(f"{var} is not set: the python of a venv with {framework} installed runs this check")
    return subprocess.run(
        [python, str(VALIDATORS / script), *map(str, paths)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(paths[0]).parent,
    )


@pytest.mark.parametrize("framework", list(PARSERS))
def test_exports_pass_the_frameworks_own_parsers_and_a_broken_one_fails(framework, tmp_path):
    """Every case's file passes the framework's own parser, and its validator exits non-zero on a file the framework
    refuses (a bad choice, a v3 flag, a bad type): both in one run of the validator (--each)."""
    name = PARSERS[framework][2]
    paths = [written(framework, case, tmp_path).dir / name for case in CASES[framework]]
    broken = written(framework, "lora_z3", tmp_path / "broken").dir / name
    old, new = BROKEN[framework]
    assert old in broken.read_text()
    broken.write_text(broken.read_text().replace(old, new))
    run = validate(framework, [*paths, broken, "--each"])
    assert run.returncode != 0, run.stdout[-4000:]
    said = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": OK " in line or ": INVALID " in line)
    assert all(said[str(p)].startswith("OK ") for p in paths), run.stdout[-4000:] + run.stderr[-8000:]
    assert said[str(broken)].startswith("INVALID "), run.stdout[-4000:]


@pytest.mark.parametrize(
    "framework,case,key,want",
    [
        ("swift", "lora_ends", "target_modules", ["all-linear", "embed_tokens", "lm_head"]),
        (
            "llamafactory",
            "lora_ends",
            "lora_target",
            "down_proj,gate_proj,k_proj,o_proj,q_proj,up_proj,v_proj,embed_tokens,lm_head",
        ),
        ("axolotl", "lora_ends", "lora_target_modules", ["embed_tokens", "lm_head"]),
        ("axolotl", "lora_head_named", "lora_target_modules", ["q_proj", "v_proj", "lm_head"]),
    ],
)
def test_lora_on_the_ends_is_written_and_read_back(framework, case, key, want, tmp_path):
    """--lora-ends: the framework's target list names embed_tokens and lm_head beside the linears, and the files read
    back as the same ends and linears."""
    w = written(framework, case, tmp_path)
    name = PARSERS[framework][2]
    text = (w.dir / name).read_text()
    got = swift_flags(text)[2][key] if framework == "swift" else yaml.safe_load(text)[key]
    assert got == want
    back = intake.read([str(w.dir / name)]).request
    assert back["lora_ends"] == w.plan.lora_ends
    # LLaMA-Factory's `all` is taken only alone: its every-linear list reads back as those names
    linears = "down_proj,gate_proj,k_proj,o_proj,q_proj,up_proj,v_proj" if framework == "llamafactory" else None
    assert back.get("lora_targets", "all-linear") == (linears or w.plan.lora_targets)


def test_swift_and_axolotl_write_their_parallel_keys(tmp_path):
    env, _cmd, flags = swift_flags((written("swift", "ulysses_lora", tmp_path).dir / swift.SCRIPT_NAME).read_text())
    assert flags["sequence_parallel_size"] == "4" and "deepspeed_autotp_size" not in flags
    assert env["CELOSS_PARALLEL_SIZE"] == "2048"  # --loss chunked: ms-swift's chunked sequence-parallel loss
    with pytest.raises(BadInput, match="CELOSS_PARALLEL_SIZE"):
        planned("swift", zero=2, loss="chunked")
    _env, _cmd, flags = swift_flags((written("swift", "autotp_full", tmp_path).dir / swift.SCRIPT_NAME).read_text())
    assert flags["deepspeed_autotp_size"] == "2" and flags["tuner_type"] == "full"
    ax = written("axolotl", "tp_fsdp", tmp_path)
    cfg = yaml.safe_load((ax.dir / axolotl.CONFIG_NAME).read_text())
    assert (cfg["tensor_parallel_size"], cfg["fsdp_version"]) == (2, 2) and "context_parallel_size" not in cfg
    body = {"fsdp": "full", "checkpointing": "full", "attention": "flash", "context_parallel": 2, "tensor_parallel": 2}
    ax = written("axolotl", "ring_cp_fsdp_tp", tmp_path, {**body, "seq_len": 32768})
    cfg = yaml.safe_load((ax.dir / axolotl.CONFIG_NAME).read_text())
    assert (cfg["context_parallel_size"], cfg["tensor_parallel_size"], cfg["fsdp_version"]) == (2, 2, 2)
    assert ax.plan.data_parallel == 2 and ax.plan.global_batch == 2 * 4 * 2


FILES = {"llamafactory": llamafactory.CONFIG_NAME, "swift": swift.SCRIPT_NAME, "axolotl": axolotl.CONFIG_NAME}
DORA_KEYS = {  # the framework's own DoRA and modules_to_save keys
    "llamafactory": ("use_dora: true", 'additional_target: "embed_tokens,lm_head"'),
    "swift": ("--use_dora true", "--modules_to_save embed_tokens lm_head"),
    "axolotl": ("peft_use_dora: true", "lora_modules_to_save:"),
}


@pytest.mark.parametrize("framework", list(FILES))
def test_dora_with_trained_embeddings_is_written_and_read_back(framework, tmp_path):
    """DoRA and the embedding and head trained beside it are written under the framework's own keys (its parser
    passes them: test_exports_pass_the_frameworks_own_parsers) and read back as the plan's."""
    w = written(framework, "dora", tmp_path)
    text = (w.dir / FILES[framework]).read_text()
    assert all(key in text for key in DORA_KEYS[framework]), text
    request = intake.read([str(w.dir / FILES[framework])]).request
    assert (request.get("lora_variant"), request.get("lora_train_embeddings")) == ("dora", True)
    assert (w.plan.lora_variant, w.plan.lora_train_embeddings) == ("dora", True)
