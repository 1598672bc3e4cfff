"""A plan as HF's Trainer runs it: TrainingArguments (TRL's SFTConfig for the attention and packing ones, hf_args) and
TRL's GRPOConfig / DPOConfig / GKDConfig fields (trl_args), what in a plan HF's Trainer cannot run (bundled_only, the
note hf_note writes). The config files a plan names: planner.export.configs; its commands and Slurm script:
planner.export.commands; the one place a plan becomes launch material: planner.export.launch.
"""

from __future__ import annotations

from planner.config.knobfields import LOW_RANK_OPTIMIZERS
from planner.config.release import written_micro_batch
from planner.config.spec import Hardware, Plan
from planner.config.workload import Workload
from planner.export import parallel
from planner.export.configs import DS_CONFIG_NAME, fsdp_config
from planner.frameworks import FRAMEWORKS
from planner.frameworks.hf.keys import KEYS as K
from planner.frameworks.keys import whole_line
from planner.model.modelspec import ModelSpec
from planner.model.shapes import ATTENTION_LINEARS

HF_OPTIM, HF_FSDP, HF_ATTENTION = K["optimizer"].to_value, K["fsdp"].to_value, K["attention"].to_value


def bundled_only(plan: Plan) -> list[str]:
    """What in a plan HF's Trainer (with TRL) cannot run: the bundled trainer (`planner train`) runs these."""
    out = []
    if plan.checkpointing in ("selective-op", "offload", "offload-inputs") or plan.checkpointing.startswith("every-"):
        out.append(f"--checkpointing {plan.checkpointing}")
    if plan.loss == "chunked":
        out.append("--loss chunked")
    if plan.optimizer_in_backward and plan.optimizer not in LOW_RANK_OPTIMIZERS:  # else optim *_layerwise
        out.append("--optimizer-in-backward")
    return out


def low_rank_args(plan: Plan) -> dict:
    """GaLore's and APOLLO's optim_target_modules (transformers refuses them without it: trainer_optimizer.py:121-122)
    and optim_args rank= (proj_type= too, where not std); nothing for the other optimizers."""
    if plan.optimizer not in LOW_RANK_OPTIMIZERS:
        return {}
    targets = plan.optimizer_targets
    names = list(ATTENTION_LINEARS) if targets == "attention" else targets.split(",")
    return {
        K.key("optimizer_targets"): targets if targets == "all-linear" else names,
        K.key("optimizer_rank"): f"rank={plan.optimizer_rank}" + proj_type_arg(plan),
    }


def proj_type_arg(plan: Plan) -> str:
    """optim_args' proj_type= beside the rank (trainer_optimizer.py:373, 402; std, its default, unsaid)."""
    return "" if plan.optimizer_projection == "std" else f",proj_type={proj_type(plan)}"


def proj_type(plan: Plan) -> str:
    """GaLore's proj_type as the frameworks spell it (reverse_std: galore_projector.py:22)."""
    return plan.optimizer_projection.replace("-", "_")


def names_regex(names: list[str]) -> str:
    """optim_target_modules as one string, which transformers fullmatches against each module's name
    (trainer_utils.py check_target_module_exists): the names as dotted suffixes (tuners.low_rank_fields reads it)."""
    return r".*\.(" + "|".join(names) + ")"


def layerwise(plan: Plan) -> bool:
    """transformers' optim galore_*_layerwise / apollo_adamw_layerwise: one optimizer a parameter, stepped in its
    gradient's hook (transformers 5.25 trainer_optimizer.py:164-184), memplan's optimizer_in_backward."""
    return plan.optimizer_in_backward and plan.optimizer in LOW_RANK_OPTIMIZERS


def hf_note(plan: Plan) -> str | None:
    """Launch.note for a plan HF cannot run as planned, or runs only with a step in the user's script."""
    notes, missing = [], bundled_only(plan)
    if missing:  # full checkpointing keeps on the GPU what an offloaded one moves to the host
        more = "keeps on the GPU what the plan offloads" if plan.checkpointing.startswith("offload") else ""
        notes.append(
            f"HF's Trainer has no {', '.join(missing)}: the command runs the bundled trainer (planner "
            "train). hf_args is the nearest HF run (full checkpointing for a lighter policy, the fused Liger "
            f"loss for the chunked one), which {more or 'needs no more memory'}; it is not this plan's speed"
        )
    if plan.optimizer not in HF_OPTIM:  # Muon: LLaMA-Factory's use_muon, ms-swift's --optimizer muon
        notes.append(f"transformers has no {plan.optimizer} optim: hf_args names adamw_torch, which keeps more states")
    if plan.frozen != "none":
        notes.append(
            f"HF's Trainer freezes no module itself: set requires_grad False on the {plan.frozen} modules "
            "in your script before the Trainer is built (planner train does), or the plan's memory does not "
            "hold"
        )
    if plan.trained_layers:
        what = "insert LLaMA-Pro's blocks (copies of the layer before, o_proj and down_proj zeroed) and " * (
            plan.trained_layout == "inserted"
        )
        notes.append(
            f"HF's Trainer freezes no layer itself: in your script {what}set requires_grad False on all but the "
            f"{plan.trained_layers} trained layers ({plan.trained_layout}) before the Trainer is built (planner train "
            "--trained-layers --trained-layout does), or the plan's memory does not hold"
        )
    if plan.expert_parallel > 1:
        notes.append(
            f"expert parallel {plan.expert_parallel}: load the model with transformers' DistributedConfig("
            f"fsdp_size=WORLD, ep_size={plan.expert_parallel}) under torchrun in your script; the Trainer's own "
            "arguments have no expert-parallel size"
        )
    if plan.lora_base_fp32:
        notes.append(
            "the plan keeps the LoRA base in fp32: load it with dtype=torch.float32 (TRL's model_init_kwargs "
            "dtype float32); in half precision it needs less"
        )
    return ". ".join(notes) or None


# the lines whose TrainingArguments require output_dir: transformers before 4.49.0 (`output_dir: str` with no default,
# 4.48.2 training_args.py:816; Optional from 4.49.0, :824), which trl 0.14.0 and 0.15.2 allow (transformers>=4.46.0,
# setup.py) and R1-V pins (a 4.49.0.dev0 commit), as the hf line 4 runs them: their parser refuses a command without it
OUTPUT_DIR = {("trl", "0.14"), ("trl", "0.15"), ("trl", "r1-v"), ("hf", "4")}


def hf_args(plan: Plan, model: ModelSpec | None = None, hw: Hardware | None = None) -> dict:
    """TrainingArguments fields (TRL's SFTConfig for the attention and packing ones); bf16-pure means loading the
    model in bf16 without autocast. FSDP plans: `fsdp` and its `fsdp_config` (FSDP2; checkpointing through FSDP's
    own activation checkpointing, as transformers asks). Knobs HF cannot run are replaced by their nearest HF
    form that needs no more memory (bundled_only, hf_note)."""
    fsdp = plan.fsdp != "off"
    args = dict(
        [
            *([("output_dir", "output")] if (plan.framework, plan.release) in OUTPUT_DIR else []),
            K.pair("micro_batch", written_micro_batch(plan)),
            K.pair("grad_accum", plan.grad_accum),
            (K.key("checkpointing"), plan.checkpointing != "off" and not fsdp),
            (K.key("bf16"), plan.precision == "bf16"),
            (K.key("fp16"), plan.precision == "fp16"),
            (
                K.key("optimizer"),
                HF_OPTIM.get(plan.optimizer, "adamw_torch") + ("_layerwise" if layerwise(plan) else ""),
            ),
            (K.key("zero_stage"), DS_CONFIG_NAME if plan.zero_stage >= 1 else None),
        ]
    )
    args.update(low_rank_args(plan))
    if plan.eval_batch:
        args[K.key("eval_batch")] = plan.eval_batch
    if plan.eval_logits_steps:  # the steps of logits the plan holds for compute_metrics
        args[K.key("eval_logits_steps")] = plan.eval_logits_steps
    if plan.checkpointing != "off" and not fsdp:
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if plan.loss != "standard":  # Liger's fused linear cross-entropy (liger-kernel on the GPU host)
        args.update([K.pair("loss", plan.loss)])
    if plan.attention != "sdpa":
        args["model_init_kwargs"] = dict([K.pair("attention", plan.attention)])
    if plan.batching == "packed":  # TRL: pack rows, and run them padding-free (position_ids); DPOConfig has no packing
        args.update({K.key("padding_free"): True, **({} if plan.workload.kind == "dpo" else {K.key("packing"): True})})
    if fsdp:
        args[K.key("fsdp")] = fsdp_option(plan)
        args[K.key("fsdp_config")] = fsdp_config(plan, model)
    fields = parallel.parallelism_fields(plan, hw.nodes if hw else 1)
    # TrainingArguments.parallelism_config: the script builds ParallelismConfig(**fields) (export.parallel); HSDP's
    # mesh alone goes by the launcher's variables, which every release of the line reads (the field is 4.56's)
    if fields and (plan.sequence_parallel > 1 or plan.context_parallel > 1):
        args["parallelism_config"] = fields
    return {**args, **trl_args(plan.workload, grpo_takes(plan))}


# HSDP is written as FSDP2's full shard over accelerate's 2-D mesh (export.parallel.hsdp_fields): transformers 5.10.0
# .. 5.23.0 refuse `hybrid_shard` with fsdp_config version 2 (5.10.0 training_args.py:2702-2703, 2833-2840; 5.23.0
# :2791-2792, 2923-2930: "only available with FSDP1"), and 4.51 .. 5.9 run it as a full shard whatever it says (the
# strategy is FSDP1's: export.parallel); a user's `hybrid_shard` is still read as the key table says
WRITTEN_FSDP = {"hybrid": "full"}


def fsdp_option(plan: Plan) -> str:
    """TrainingArguments.fsdp of an FSDP plan: its sharding, auto-wrapped, and offload where the plan offloads."""
    return K["fsdp"].write(WRITTEN_FSDP.get(plan.fsdp, plan.fsdp)) + (" offload" if plan.offload != "none" else "")


def grpo_takes(plan: Plan):
    """Whether every version of the plan's release line takes a GRPOConfig key (its framework's key_spans["grpo"]:
    planner.frameworks.keys.whole_line; a framework without them, every key)."""
    fw = FRAMEWORKS.get(plan.framework)
    spans = fw.key_spans.get("grpo", {}) if fw is not None else {}
    return lambda key: whole_line(fw.releases if fw is not None else (), spans, key, plan.release)


def trl_args(w: Workload, takes=lambda key: True) -> dict:
    """GRPOConfig / DPOConfig fields of a DPO or GRPO plan, under TRL 1.16's names (none for SFT), less the keys the
    plan's release line does not take (`takes`: grpo_takes; its rules refuse a setting that needs one, so only
    vllm_mode server, TRL's one vLLM mode before v0.18.0, is left out). GRPO has no max_prompt_length field in TRL
    1.16: the plan's prompt length is what the data must not exceed."""
    if w.kind == "grpo":
        out = {
            K.key("workload.num_generations"): w.num_generations,
            K.key("workload.max_completion_length"): w.max_completion_length,
            K.key("workload.beta"): w.beta,
            K.key("use_vllm"): w.generation != "hf",
        }
        if w.generation != "hf" and takes(K.key("workload.generation")):
            out[K.key("workload.generation")] = w.generation.removeprefix("vllm-")
        if w.generation == "vllm-colocate":
            out[K.key("workload.vllm_gpu_memory_utilization")] = w.vllm_gpu_memory_utilization
        if w.generation == "vllm-colocate" and w.roles.rollout_tp > 1:
            out[K.key("workload.roles.rollout_tp")] = w.roles.rollout_tp
        if w.steps_per_generation is not None:
            out[K.key("workload.steps_per_generation")] = w.steps_per_generation
        if w.num_iterations != 1:
            out[K.key("workload.num_iterations")] = w.num_iterations
        return out
    if w.preference:  # DPOConfig's and KTOConfig's (trl/trainer/kto_config.py, TRL 1.16) names
        return {
            K.key("workload.max_length"): w.max_length,
            K.key("workload.precompute_ref_log_probs"): w.precompute_ref_log_probs,
        }
    if w.kind == "gkd":  # GKDConfig (trl/experimental/gkd/gkd_config.py); no teacher: the student's own checkpoint
        teacher = {"teacher_model_name_or_path": hf_or_name(w.teacher_model)} if w.teacher_model else {}
        return {
            **teacher,
            "lmbda": w.lmbda,
            "beta": w.jsd_beta,
            "max_new_tokens": w.max_completion_length,
            "max_length": w.max_length,
        }
    return {}


def hf_or_name(ref: str) -> str:
    """A catalog model's Hugging Face id, else the reference as given (a path)."""
    from planner.model import catalog

    return catalog.hf_id(ref) or ref
