"""The commands that launch a plan: the HF-Trainer-style script's arguments (script_args), torchrun, the deepspeed
launcher or accelerate (command), the bundled trainer's `planner train` for a plan HF cannot run (bundled_command),
the allocator's environment (alloc_env) and a Slurm script (sbatch).
"""

from __future__ import annotations

import shlex

from planner.config import knobfields
from planner.config.knobfields import CT_QUANTS
from planner.config.release import written_micro_batch
from planner.config.spec import Goal, Hardware, Plan
from planner.config.workload import WORKLOAD_FLAGS
from planner.export import parallel
from planner.export.configs import DS_CONFIG_NAME, FSDP_CONFIG_NAME, peft_config, quant_storage
from planner.export.export import (
    OUTPUT_DIR,
    bundled_only,
    fsdp_option,
    grpo_takes,
    layerwise,
    low_rank_args,
    names_regex,
    trl_args,
)
from planner.frameworks.hf import launchenv
from planner.frameworks.hf.keys import KEYS as K
from planner.frameworks.memory import DROPOUT_KEPT_BY_FLAG
from planner.frameworks.trl.forks import FORK_ENTRY, FORK_PIXELS, FORK_TILES, fork_script_flags, grpo_fork
from planner.model import catalog, vila
from planner.model.modelspec import ModelSpec

TRAIN_SCRIPT = "train.py"  # the user's HF-Trainer-style script


def fork_grpo(plan: Plan) -> str | None:
    """The GRPO fork (trl@r1-v, trl@vlm-r1) whose own entry script runs the plan, or None."""
    return grpo_fork(plan.framework, plan.release, plan.workload.kind)


def train_script(model: ModelSpec | None, plan: Plan | None = None) -> str:
    """The script the HF command runs: a GRPO fork's own entry script (FORK_ENTRY), VILA's own entry point for a
    VILA / NVILA model (planner.model.vila), else the user's HF-Trainer-style train.py."""
    if plan is not None and fork_grpo(plan):
        return FORK_ENTRY[fork_grpo(plan)]
    return vila.TRAIN_SCRIPT if model is not None and vila.is_vila(model.model_type) else TRAIN_SCRIPT


def program(plan: Plan, model: ModelSpec | None = None, goal: Goal | None = None) -> list[str]:
    """The words after the launcher, one list for the printed command and launch.sbatch: the script, the model, the
    plan's arguments (with a fork's images as `goal` has them: fork_images)."""
    named = ["--model_name_or_path", catalog.model_path(model)] if model is not None else []
    return [train_script(model, plan), *named, *script_args(plan, model=model, goal=goal)]


def fork_images(plan: Plan, goal: Goal | None) -> list[str]:
    """A GRPO fork's image flags (GRPOScriptArguments, FORK_PIXELS): the pixel bounds the images were planned within
    (Goal.pixels) or an InternVL image's tile cap (Goal.tiles, FORK_TILES; unwritten, the fork's defaults), and the prompt's text as --max_prompt_length, the images on top
    (the forks take the whole prompt: planner.frameworks.trl.reader_vlmr1)."""
    if goal is None or not fork_grpo(plan) or not goal.image_tokens:
        return []
    a = [w for flag, n in zip(FORK_PIXELS, goal.pixels or (), strict=False) for w in (flag, str(n))]
    a += [FORK_TILES[fork_grpo(plan)], str(goal.tiles)] if goal.tiles and fork_grpo(plan) in FORK_TILES else []
    text = (plan.workload.max_prompt_length or 0) - goal.image_tokens
    return a + (["--max_prompt_length", str(text)] if text >= 1 else [])


def script_args(
    plan: Plan, ds_path: str = DS_CONFIG_NAME, model: ModelSpec | None = None, goal: Goal | None = None
) -> list[str]:
    a = ["--output_dir", "output"] if (plan.framework, plan.release) in OUTPUT_DIR else []
    a += fork_script_flags(plan.framework, plan.release, plan.workload.kind)
    a += fork_images(plan, goal)
    a += [K.flag("micro_batch"), str(written_micro_batch(plan)), K.flag("grad_accum"), str(plan.grad_accum)]
    a += [K.flag("optimizer"), K["optimizer"].write(plan.optimizer) + ("_layerwise" if layerwise(plan) else "")]
    for key, value in low_rank_args(plan).items():  # GaLore's and APOLLO's targets and rank; on a command line one
        a += [f"--{key}", value if isinstance(value, str) else names_regex(value)]  # string, a regex (fullmatch)
    a += [K.flag("eval_batch"), str(plan.eval_batch)] if plan.eval_batch else []
    a += [K.flag("eval_logits_steps"), str(plan.eval_logits_steps)] if plan.eval_logits_steps else []
    # FSDP: its own activation checkpointing. Off said explicitly: TRL's configs default it to true
    # (trl/trainer/base_config.py:62, trl 1.16.0), HF's TrainingArguments to false
    gc = K.flag("checkpointing")
    a += [gc] if plan.checkpointing != "off" and plan.fsdp == "off" else [gc, "false"]
    if plan.loss != "standard":
        a.append(K.flag("loss"))
    if plan.attention != "sdpa":
        a += [K.flag("attention"), K["attention"].write(plan.attention)]
    if plan.batching == "packed":  # DPOConfig: padding_free alone (trl v0.19.0 dpo_config.py:281)
        a += [K.flag("padding_free")] if plan.workload.kind == "dpo" else [K.flag("packing"), K.flag("padding_free")]
    if plan.precision in ("bf16", "fp16"):  # TRL's bf16 is `bool | None` (base_config.py:68): it takes a value
        a += [K.flag(plan.precision), "true"]
    if plan.precision == "bf16-pure":
        a += [K.flag("dtype"), "bfloat16"]
    if plan.lora_rank:
        peft = peft_config(plan, model)
        targets = peft["target_modules"]
        a += [K.flag("lora"), K.flag("lora_rank"), str(plan.lora_rank), K.flag("lora_alpha"), str(peft["lora_alpha"])]
        a += [K.flag("lora_targets"), *([targets] if isinstance(targets, str) else targets)]
        if plan.lora_dropout:
            a += [K.flag("lora_dropout"), f"{plan.lora_dropout:g}"]
        if plan.lora_dropout_kept and plan.workload.kind in DROPOUT_KEPT_BY_FLAG:  # their configs default it True
            a += ["--disable_dropout", "false"]
        if plan.lora_train_embeddings:
            a += [K.flag("lora_train_embeddings"), *peft["modules_to_save"]]
        if plan.lora_variant == "dora":  # trl/trainer/model_config.py:142
            a += [K.flag("lora_variant")]
    if plan.quant == "int8":  # TRL's ModelConfig (trl/trainer/utils.py:270-273)
        a += ["--load_in_8bit"]
    elif plan.quant in ("gptq", "awq", *CT_QUANTS, "hqq"):  # no flag: the checkpoint carries its quantization_config
        pass
    elif plan.quant != "none":  # TRL's ModelConfig: bitsandbytes 4-bit base with double quantization
        a += ["--load_in_4bit", "--bnb_4bit_quant_type", plan.quant]
        a += ["--use_bnb_nested_quant"] if plan.quant_absmax == "8bit" else []
        if quant_storage(plan):
            a += ["--bnb_4bit_quant_storage", quant_storage(plan)]
    for key, value in trl_args(plan.workload, grpo_takes(plan)).items():
        if value is not False:
            a += [
                f"--{key}",
                str(value).lower()
                if isinstance(value, bool)
                else f"{value:g}"
                if isinstance(value, float)
                else str(value),
            ]
    if plan.zero_stage >= 1:
        a += [K.flag("zero_stage"), ds_path]
    if plan.fsdp != "off":
        a += [K.flag("fsdp"), fsdp_option(plan), K.flag("fsdp_config"), FSDP_CONFIG_NAME]
    return a


# the knobs bundled_command writes whatever their value; every other knob is written where it is not its default
BUNDLED_CORE = (
    "precision",
    "checkpointing",
    "zero_stage",
    "offload",
    "fsdp",
    "optimizer",
    "lora_rank",
    "loss",
    "attention",
    "batching",
)


def bundled_command(plan: Plan, hw: Hardware, model: ModelSpec, seq_len: int) -> str:
    """`planner train` with the plan's every knob (it starts torchrun or deepspeed itself): the core knobs always,
    every other knob and workload field where it is not its default (--trained-layout inserted, --lora-variant
    dora, --task ...), so that the command trains the plan it was printed for. No roles: memplan's own plans have
    none (an RL run by its roles is planned for verl or OpenRLHF)."""
    a = ["planner", "train", "--model", model.name, "--gpu", hw.gpu.name]
    a += ["--gpus-per-node", str(hw.gpus_per_node), "--nodes", str(hw.nodes), "--seq-len", str(seq_len)]
    a += ["--micro-batch", str(plan.micro_batch), "--grad-accum", str(plan.grad_accum)]
    for field in BUNDLED_CORE:
        a += [knobfields.flag_of(field), str(getattr(plan, field))]
    for field in knobfields.KNOBS:
        value = getattr(plan, field)
        if field in (*BUNDLED_CORE, "workload", "framework", "release") or value == knobfields.KNOB_DEFAULTS[field]:
            continue
        a += _flag_words(knobfields.flag_of(field), value)
    w, defaults = plan.workload, type(plan.workload)()
    if w.kind != "sft":
        a += ["--workload", w.kind]
        for field in WORKLOAD_FLAGS:
            if getattr(w, field) != getattr(defaults, field):
                a += _flag_words("--" + field.replace("_", "-"), getattr(w, field))
        if w.kind in ("dpo", "kto", "gkd") and w.max_length != defaults.max_length:
            a += _flag_words("--max-length", w.max_length)
    return " ".join(shlex.quote(x) for x in [*a, "--data", "DATA.jsonl"])


def _flag_words(flag: str, value) -> list[str]:
    """A flag and its value as `planner train` reads it: a bool as --X / --no-X, a float without trailing zeros."""
    if isinstance(value, bool):
        return [flag if value else "--no-" + flag[2:]]
    return [flag, f"{value:g}" if isinstance(value, float) else str(value)]


def command(
    plan: Plan, hw: Hardware, model: ModelSpec | None = None, seq_len: int = 0, goal: Goal | None = None
) -> str:
    """torchrun for DDP, the deepspeed launcher for ZeRO; multi-node forms read the usual variables. A plan HF
    cannot run (bundled_only) is launched by the bundled trainer."""
    if model is not None and bundled_only(plan):
        return bundled_command(plan, hw, model, seq_len)
    args = " ".join(shlex.quote(x) for x in program(plan, model, goal))
    g, n = hw.gpus_per_node, hw.nodes
    if parallel.needs_accelerate_launch(plan):
        return parallel.accelerate_command(hw, args)
    if plan.device_map > 1:  # one process over the visible GPUs (the framework's rule: the whole world)
        return f"CUDA_VISIBLE_DEVICES={','.join(map(str, range(plan.device_map)))} python {args}"
    if plan.dataparallel:  # one process, HF's Trainer's nn.DataParallel over the node's GPUs
        return f"CUDA_VISIBLE_DEVICES={','.join(map(str, range(g)))} python {args}"
    if plan.zero_stage >= 1:
        nodes = f" --num_nodes {n} --hostfile hostfile" if n > 1 else ""
        return f"deepspeed --num_gpus {g}{nodes} {args}"
    if n > 1:
        return (
            f"torchrun --nnodes {n} --nproc_per_node {g} --node_rank $NODE_RANK "
            f"--rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT {args}"
        )
    return f"torchrun --nproc_per_node {g} {args}"


ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"


def alloc_env(knobs) -> dict[str, str]:
    """The environment a plan's processes need: expandable segments for the caching allocator (read by torch when
    CUDA initialises, so it must be set before the launcher starts the ranks, which inherit it)."""
    return {ALLOC_CONF: "expandable_segments:True"} if knobs.expandable_segments else {}


def launch_env(plan: Plan) -> dict[str, str]:
    """alloc_env, and the FSDP version HF's command needs where TrainingArguments drop fsdp_config's "version"
    (planner.frameworks.hf.launchenv; none for the bundled trainer, which builds FSDP2 itself)."""
    return {**alloc_env(plan), **({} if bundled_only(plan) else launchenv.fsdp_env(plan))}


def env_prefix(plan: Plan) -> str:
    """launch_env as the words before a command."""
    return "".join(f"{k}={v} " for k, v in launch_env(plan).items())


def sbatch(
    plan: Plan,
    hw: Hardware,
    words: list[str] | None = None,
    header: list[str] = (),
    driver: str | None = None,
    model: ModelSpec | None = None,
    goal: Goal | None = None,
) -> str:
    """A Slurm script: one srun task per node, each running torchrun over the node's GPUs on `words` (default: the
    printed command's, `program`: the script, the model and the plan's arguments). driver: a command run once on the
    batch host instead, that starts the nodes' tasks itself (the bundled trainer's `planner train --launcher slurm`).
    header: more #SBATCH lines (partition, account, time)."""
    args = " ".join(shlex.quote(x) for x in (words or program(plan, model, goal)))
    env = "".join(f"export {k}={v}\n" for k, v in {**launch_env(plan), **parallel.parallelism_env(plan, hw)}.items())
    # one word for bash -c (shlex.quote: an argument's own quotes, FSDP's 'full_shard auto_wrap', stay inside it)
    inner = f"""torchrun --nnodes "$SLURM_NNODES" --nproc_per_node {hw.gpus_per_node} \\
  --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \\
  {args}"""
    run = driver or f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(inner)}"
    extra = "".join(line + "\n" for line in header)
    return f"""#!/bin/bash
#SBATCH --job-name=memplan
#SBATCH --nodes={hw.nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={hw.gpus_per_node}
#SBATCH --exclusive
{extra}# plan: {plan.split_text} = {plan.global_batch}, \
{plan.precision}, checkpointing {plan.checkpointing}, zero {plan.zero_stage}, offload {plan.offload}
set -euo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=${{MASTER_PORT:-29500}}
{env}{run}
"""
