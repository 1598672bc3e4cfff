"""A plan as verl 0.9.1's SFT trainer runs it: `verl_sft.sh`, `torchrun ... -m verl.trainer.sft_trainer` with one Hydra
override (`key=value`) a line over its config sft_trainer_engine.yaml, and the launch line. SFT plans only (RL goes
through main_ppo's config: issue 35). The 0.6 line (v0.6.0 .. v0.6.1) runs the same script less the keys its config
lacks (SFT_LEFT_OUT).

Keys and defaults were read from the 0.9.1 wheel (paths under verl/): trainer/sft_trainer.py:140-145 (the model,
engine, optim, checkpoint and profiler sections become dataclasses), :234-241 (data.train_batch_size is the global
batch, split over the data-parallel ranks, world / ulysses size), :343-347 (data.use_dynamic_bsz, max_token_len_per_gpu,
micro_batch_size_per_gpu go to the engine), :461 (hydra config sft_trainer_engine); trainer/config/sft_trainer_engine.yaml
:17-20 (train_batch_size 256, micro_batch_size_per_gpu 4, max_token_len_per_gpu 8192, use_dynamic_bsz True), :32
(max_length 1024), :66,83-84 (trainer.logger, nnodes, n_gpus_per_node); trainer/config/model/hf_model.yaml:10 (path), :31
(override_config {}: workers/config/model.py:185 reads attn_implementation, flash_attention_2 by default), :34
(enable_gradient_checkpointing True), :40 (use_remove_padding True), :43-49 (lora_rank 0, lora_alpha 16, target_modules
all-linear); trainer/config/engine/fsdp.yaml:19 (offload_policy: FSDP2's CPUOffloadPolicy), :23 (reshard_after_forward
True; False keeps the gathered parameters, grad-op), :26 (fsdp_size -1: the world; fsdp/utils.py:35-53 replicates
over world / fsdp_size groups), :33 (model_dtype fp32), :45 (ulysses_sequence_parallel_size 1), :79 (strategy fsdp; fsdp2
is torch's fully_shard, transformer_impl.py:450-473); trainer/config/optim/fsdp.yaml:5,9 (optimizer AdamW from
torch.optim), :53 (override_optimizer_config: extra kwargs, workers/config/optimizer.py:335-336).
workers/engine/fsdp/transformer_impl.py:148-152: Ulysses needs use_remove_padding, which patches flash attention's
forward (models/transformers/monkey_patch.py:544-552), and the heads must divide by the Ulysses size (:343-349).
"""

from __future__ import annotations

from planner.config.spec import Goal, Hardware, Plan
from planner.frameworks import check_plan
from planner.frameworks.verl import writer_rl as verl_rl
from planner.model import catalog
from planner.model.lora_targets import peft_target_modules
from planner.model.modelspec import ModelSpec

VERSION = "verl 0.9.1"
SCRIPT_NAME = "verl_sft.sh"
ENTRY = "verl.trainer.sft_trainer"
ATTN = {"flash": "flash_attention_2", "sdpa": "sdpa"}
# the keys the 0.6 line's SFT trainer (v0.6.0 .. v0.6.1) does not take, left out there: optim.optimizer_impl, optimizer
# and override_optimizer_config came in v0.6.1 (verl/trainer/config/optim/fsdp.yaml:5,9,50; v0.6.0's optim/fsdp.yaml
# has none, its engine builds torch's AdamW: workers/engine/fsdp/transformer_impl.py:355-364), trainer.nnodes and
# n_gpus_per_node in v0.7.0 (sft_trainer_engine.yaml:80-81; torchrun's flags give the world before)
SFT_LEFT_OUT = {
    "0.6": (
        "optim.optimizer_impl",
        "optim.optimizer",
        "optim.override_optimizer_config",
        "trainer.nnodes",
        "trainer.n_gpus_per_node",
    )
}
OPTIM = {  # memplan optimizer -> (optim.optimizer_impl, optim.optimizer, override_optimizer_config)
    "adamw": ("torch.optim", "AdamW", None),
    "adamw-fused": ("torch.optim", "AdamW", "{fused:true}"),
    "adamw-8bit": ("bitsandbytes.optim", "AdamW8bit", None),
}

Override = tuple[str, object]  # Hydra key (a leading + adds a key the config lacks), value


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """{file name: text}: the launch script, which is its own launcher (an RL plan: main_ppo's, export.verl_rl)."""
    if plan.knobs.role_run:
        return verl_rl.files(plan, model, hw, goal)
    check(plan, model)
    return {SCRIPT_NAME: script(plan, model, hw, seq_len)}


def writes_pixels(plan: Plan) -> bool:
    """Whether the script takes the images' pixel bounds (planner.export.launch asks): an RL plan's at the newest line
    (writer_rl.media_overrides); verl 0.9.1's SFT dataset sizes each image within its row's own image dict
    (qwen_vl_utils' fetch_image, utils/dataset/vision_utils.py:22-36; multiturn_sft_dataset.py:276), no config key."""
    return bool(plan.knobs.role_run) and verl_rl.writes_pixels(plan.release)


def writes_limit(plan: Plan) -> bool:
    """Whether the script gives the rollout vLLM's limit_mm_per_prompt (planner.export.launch asks): an RL plan's,
    rollout.limit_images at every written line (writer_rl.limit_overrides)."""
    return bool(plan.knobs.role_run)


def command(plan: Plan, hw: Hardware) -> str:
    if plan.knobs.role_run:
        return verl_rl.command(plan, hw)
    check(plan, None)
    return f"bash {SCRIPT_NAME}"


def check(plan: Plan, model: ModelSpec | None) -> None:
    """ValueError for what verl's SFT trainer cannot run as planned or writes no file for (its rules, a line read but
    never written among them: planner/frameworks/verl/__init__.py; verl.trainer.sft_trainer and its engine config came
    in v0.6.0)."""
    check_plan("verl", plan, model, None)


def script(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int) -> str:
    lines = [*header(plan, hw), " ".join(torchrun(hw)) + " \\", f"    -m {ENTRY} \\"]
    pairs = overrides(plan, model, hw, seq_len)
    lines += [f"    {k}={word(v)}" + (" \\" if i < len(pairs) - 1 else "") for i, (k, v) in enumerate(pairs)]
    return "\n".join(lines) + "\n"


def header(plan: Plan, hw: Hardware) -> list[str]:
    title = (
        f"# memplan plan for {verl_rl.version(plan)}: micro {plan.micro_batch} x accum {plan.grad_accum} x {plan.data_parallel} "
        f"data-parallel ranks of {plan.world_size} GPUs ({hw.gpu.name}) = {plan.global_batch}, {plan.sharding}, "
        f"{plan.precision}, checkpointing {plan.checkpointing}; {plan.memory.device_total_bytes / 2**30:.1f} of "
        f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU"
    )
    out = [
        "#!/bin/bash",
        title,
        "# model.path: the Hugging Face id; give your local path. data.train_files: your parquet of chat messages",
        "# the accumulation follows from data.train_batch_size / (micro_batch_size_per_gpu x data-parallel ranks)",
    ]
    if hw.nodes > 1:
        out.append("# run on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set")
    return out


def torchrun(hw: Hardware) -> list[str]:
    out = ["torchrun", "--nnodes", str(hw.nodes), "--nproc_per_node", str(hw.gpus_per_node)]
    if hw.nodes > 1:
        out += ["--node_rank", "$NODE_RANK", "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
    return out


def word(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def overrides(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int) -> list[Override]:
    out: list[Override] = [
        ("data.train_files", "YOUR_TRAIN.parquet"),
        ("data.train_batch_size", plan.global_batch),
        ("data.micro_batch_size_per_gpu", plan.micro_batch),
        ("data.use_dynamic_bsz", False),  # the plan's fixed split, not verl's token budget (yaml:19-20)
        ("data.max_length", seq_len),
        ("model.path", catalog.model_path(model)),
        ("model.enable_gradient_checkpointing", plan.checkpointing == "full"),
        ("model.use_remove_padding", plan.attention == "flash"),
    ]
    if plan.attention != "flash":
        out.append(("+model.override_config.attn_implementation", ATTN[plan.attention]))
    out += lora_overrides(plan) + engine_overrides(plan, hw) + optim_overrides(plan)
    out += [
        ("trainer.nnodes", hw.nodes),
        ("trainer.n_gpus_per_node", hw.gpus_per_node),
        ("trainer.total_epochs", 1),
        ("trainer.logger", "[console]"),
    ]
    left_out = SFT_LEFT_OUT.get(plan.release, ())
    return [(k, v) for k, v in out if k not in left_out]


def lora_overrides(plan: Plan) -> list[Override]:
    if not plan.lora_rank:
        return []
    targets = peft_target_modules(plan.lora_targets)
    shown = targets if isinstance(targets, str) else "[" + ",".join(targets) + "]"
    return [
        ("model.lora_rank", plan.lora_rank),
        ("model.lora_alpha", 2 * plan.lora_rank),
        ("model.target_modules", shown),
    ]


def engine_overrides(plan: Plan, hw: Hardware) -> list[Override]:
    """FSDP2 (torch's fully_shard, as the plan counts it); full fine-tuning keeps fp32 weights under bf16 mixed
    precision (verl's default), a LoRA base is loaded in bf16 as the plan counts it (the adapters follow the base's
    dtype, transformer_impl.py:370-381)."""
    return [
        ("engine.strategy", "fsdp2"),
        ("engine.reshard_after_forward", plan.fsdp != "grad-op"),
        ("engine.fsdp_size", hw.gpus_per_node if plan.fsdp == "hybrid" else -1),
        ("engine.offload_policy", plan.offload != "none"),
        ("engine.ulysses_sequence_parallel_size", plan.sequence_parallel),
        ("engine.model_dtype", "bf16" if plan.lora_rank else "fp32"),
    ]


def optim_overrides(plan: Plan) -> list[Override]:
    impl, name, extra = OPTIM[plan.optimizer]
    out: list[Override] = [("optim.optimizer_impl", impl), ("optim.optimizer", name)]
    if extra:
        out.append(("optim.override_optimizer_config", extra))
    return out + [("optim.lr", 1e-4 if plan.lora_rank else 1e-5)]
