"""Ready-to-paste launch material for a plan: HF TrainingArguments, DeepSpeed JSON, commands, sbatch.

DeepSpeed keys follow the DeepSpeed config documentation (deepspeed.ai/docs/config-json); "auto"
values are the ones HF Trainer fills from TrainingArguments (transformers.integrations.deepspeed).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from planner.config.release import written_micro_batch
from planner.config.spec import Hardware, Knobs, Plan, saves_full_weights
from planner.config.workload import Workload
from planner.estimate.quant import FOUR_BIT
from planner.estimate.zero import settings as zero_settings
from planner.export import parallel
from planner.frameworks import FRAMEWORKS
from planner.frameworks.hf import launchenv
from planner.frameworks.hf.keys import KEYS as K
from planner.frameworks.keys import whole_line
from planner.model import catalog, vila
from planner.model.lora_targets import peft_target_modules, peft_target_parameters
from planner.model.modelspec import ModelSpec

HF_OPTIM, HF_FSDP, HF_ATTENTION = K["optimizer"].to_value, K["fsdp"].to_value, K["attention"].to_value
DS_CONFIG_NAME = "ds_config.json"
FSDP_CONFIG_NAME = "fsdp_config.json"
TRAIN_SCRIPT = "train.py"  # the user's HF-Trainer-style script


def train_script(model: ModelSpec | None) -> str:
    """The script the HF command runs: VILA's own entry point for a VILA / NVILA model (planner.model.vila), else the
    user's HF-Trainer-style train.py."""
    return vila.TRAIN_SCRIPT if model is not None and vila.is_vila(model.model_type) else TRAIN_SCRIPT


def bundled_only(plan: Plan) -> list[str]:
    """What in a plan HF's Trainer (with TRL) cannot run: the bundled trainer (`planner train`) runs these."""
    out = []
    if plan.checkpointing in ("selective-op", "offload") or plan.checkpointing.startswith("every-"):
        out.append(f"--checkpointing {plan.checkpointing}")
    if plan.loss == "chunked":
        out.append("--loss chunked")
    if plan.optimizer_in_backward:
        out.append("--optimizer-in-backward")
    return out


def hf_note(plan: Plan) -> str | None:
    """Launch.note for a plan HF cannot run as planned, or runs only with a step in the user's script."""
    notes, missing = [], bundled_only(plan)
    if missing:
        notes.append(
            f"HF's Trainer has no {', '.join(missing)}: the command runs the bundled trainer (planner "
            "train). hf_args is the nearest HF run (full checkpointing for a lighter policy, the fused Liger "
            "loss for the chunked one), which needs no more memory; it is not this plan's speed"
        )
    if plan.frozen != "none":
        notes.append(
            f"HF's Trainer freezes no module itself: set requires_grad False on the {plan.frozen} modules "
            "in your script before the Trainer is built (planner train does), or the plan's memory does not "
            "hold"
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
            K.pair("optimizer", plan.optimizer),
            (K.key("zero_stage"), DS_CONFIG_NAME if plan.zero_stage >= 1 else None),
        ]
    )
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
    if fields:  # TrainingArguments.parallelism_config: the script builds ParallelismConfig(**fields) (export.parallel)
        args["parallelism_config"] = fields
    return {**args, **trl_args(plan.workload, grpo_takes(plan))}


def fsdp_option(plan: Plan) -> str:
    """TrainingArguments.fsdp of an FSDP plan: its sharding, auto-wrapped, and offload where the plan offloads."""
    return K["fsdp"].write(plan.fsdp) + (" offload" if plan.offload != "none" else "")


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


def peft_config(plan: Plan, model: ModelSpec | None = None) -> dict | None:
    """PEFT LoraConfig fields of a LoRA plan (recipe.lora_config trains the same adapters); a VLM's targets are its
    language model's linears alone (peft_target_modules)."""
    if not plan.lora_rank:
        return None
    cfg = {
        "r": plan.lora_rank,
        "lora_alpha": 2 * plan.lora_rank,
        "target_modules": peft_target_modules(plan.lora_targets, model, plan.lora_vision) or [],
        "lora_dropout": plan.lora_dropout,
        "task_type": "CAUSAL_LM",
    }
    if peft_target_parameters(plan.lora_targets):
        cfg["target_parameters"] = peft_target_parameters(plan.lora_targets)
    if plan.lora_train_embeddings:
        cfg["modules_to_save"] = ["embed_tokens", "lm_head"]
    if plan.lora_variant == "dora":
        cfg["use_dora"] = True
    return cfg


def compute_dtype_name(plan: Plan) -> str:
    return {"fp32": "float32", "fp16": "float16"}.get(plan.precision, "bfloat16")


def quant_storage(plan: Plan) -> str | None:
    """bnb_4bit_quant_storage of a sharded 4-bit plan: the packed weight stored in the compute dtype, so that FSDP and
    ZeRO-3 shard it with the rest (planner.estimate.quant); None where nothing shards it (bitsandbytes' uint8)."""
    if plan.quant not in FOUR_BIT or not (plan.zero_stage == 3 or plan.fsdp != "off"):
        return None
    return compute_dtype_name(plan)


def quantization_config_class(plan: Plan) -> str:
    """The transformers class quantization_config's fields are for."""
    return {"gptq": "GPTQConfig", "awq": "AwqConfig"}.get(plan.quant, "BitsAndBytesConfig")


def quantization_config(plan: Plan) -> dict | None:
    """transformers BitsAndBytesConfig fields of a QLoRA plan: 4-bit base, double quantization, compute dtype, and
    the storage dtype when sharded."""
    if plan.quant == "none":
        return None
    if plan.quant == "int8":
        return {"load_in_8bit": True}
    if plan.quant in ("gptq", "awq"):  # the checkpoint's own config, with a kernel that trains (planner.estimate.quant)
        return {"bits": 4, "group_size": 128, "backend": "auto_trainable"}
    out = {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": plan.quant,
        "bnb_4bit_use_double_quant": plan.quant_absmax == "8bit",
        "bnb_4bit_compute_dtype": compute_dtype_name(plan),
    }
    if quant_storage(plan):
        out["bnb_4bit_quant_storage"] = quant_storage(plan)
    return out


def fsdp_config(plan: Plan, model: ModelSpec | None, classes: tuple[str, ...] | None = None) -> dict:
    """HF's fsdp_config for an FSDP2 plan (transformers TrainingArguments._process_fsdp_args reads it). `classes`: the
    layer classes of the checkpoint the framework loads (planner.model.catalog.checkpoints), else the model's."""
    cfg = {
        "version": 2,
        "reshard_after_forward": plan.fsdp != "grad-op",
        "activation_checkpointing": plan.checkpointing != "off",
        "cpu_ram_efficient_loading": True,
        "state_dict_type": "FULL_STATE_DICT" if saves_full_weights(plan) else "SHARDED_STATE_DICT",
        "cpu_offload": plan.offload != "none",
    }
    units = list(classes) if classes is not None else wrap_classes(model) if model is not None else []
    if units:
        cfg["transformer_layer_cls_to_wrap"] = units
    return cfg


def wrap_classes(model: ModelSpec) -> list[str]:
    """The model's FSDP units: its own layer classes, and a VLM's language-model layers (the reader's fsdp_units)."""
    return list(model.fsdp_units)


def accelerate_config(
    plan: Plan, hw: Hardware, model: ModelSpec | None, classes: tuple[str, ...] | None = None
) -> dict | None:
    """An accelerate config (`accelerate launch --config_file`) for an FSDP2 plan, or a ZeRO plan with Ulysses
    sequence parallel (export.parallel); None otherwise."""
    if plan.fsdp == "off":
        if plan.sequence_parallel > 1 and plan.zero_stage >= 1:
            return parallel.deepspeed_accelerate_config(plan, hw, DS_CONFIG_NAME)
        return None
    f = fsdp_config(plan, model, classes)
    fsdp = {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_reshard_after_forward": f["reshard_after_forward"],
        "fsdp_offload_params": f["cpu_offload"],
        "fsdp_state_dict_type": f["state_dict_type"],
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_activation_checkpointing": f["activation_checkpointing"],
    }
    if "transformer_layer_cls_to_wrap" in f:
        fsdp["fsdp_transformer_layer_cls_to_wrap"] = ",".join(f["transformer_layer_cls_to_wrap"])
    cfg = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "fsdp_config": fsdp,
        "mixed_precision": "bf16" if plan.precision == "bf16" else "no",
        "num_machines": hw.nodes,
        "num_processes": hw.world_size,
        "machine_rank": 0,
        "main_training_function": "main",
        "use_cpu": False,
    }
    if plan.fsdp == "hybrid":  # HSDP: replicate across nodes, shard within one (accelerate's ParallelismConfig)
        cfg["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": hw.nodes,
            "parallelism_config_dp_shard_size": hw.gpus_per_node,
        }
    fields = parallel.parallelism_fields(plan, hw.nodes)
    if fields:  # context parallel: FSDP shards over dp_shard x cp
        cfg["parallelism_config"] = parallel.accelerate_section(fields)
    return cfg


def deepspeed_config(plan: Plan, model: ModelSpec) -> dict | None:
    """A complete DeepSpeed config for zero >= 1 (None for torch DDP)."""
    return deepspeed_config_for(plan.knobs, written_micro_batch(plan), plan.grad_accum, plan.world_size, model)


def deepspeed_config_for(k: Knobs, micro_batch: int, grad_accum: int, world: int, model: ModelSpec) -> dict | None:
    """deepspeed_config from a plan's knobs and batch split (the probes and the trainer have no Plan)."""
    if k.zero_stage == 0:
        return None
    # every value the plan's memory terms assume (planner.estimate.zero): "auto"'s, or the user's own (zero_buckets)
    z = zero_settings(model.text.hidden, k.zero_buckets, k.zero_stage)
    zero: dict = {
        "stage": k.zero_stage,
        "overlap_comm": z.overlap_comm,
        "contiguous_gradients": z.contiguous_gradients,
        "reduce_bucket_size": z.reduce_bucket_size,
    }
    if k.zero_stage in (1, 2):
        zero.update(allgather_partitions=True, allgather_bucket_size=z.allgather_bucket_size, reduce_scatter=True)
    else:
        zero.update(
            stage3_prefetch_bucket_size=z.prefetch_bucket_size,
            stage3_param_persistence_threshold=z.param_persistence_threshold,
            stage3_max_live_parameters=z.max_live_parameters,
            stage3_max_reuse_distance=z.max_reuse_distance,
            sub_group_size=z.sub_group_size,
            stage3_gather_16bit_weights_on_model_save=saves_full_weights(k),
        )
    if k.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if k.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    cfg: dict = {
        # every rank, as HF fills it (transformers integrations/deepspeed.py:143); under Ulysses accelerate then sets
        # it to the data-parallel ranks' (accelerator.py:2358-2365)
        "train_batch_size": micro_batch * grad_accum * world,
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
        **parallel.deepspeed_keys(k),
    }
    if k.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif k.precision == "fp16":
        cfg["fp16"] = {
            "enabled": True,
            "loss_scale": 0,
            "initial_scale_power": 16,
            "loss_scale_window": 1000,
            "hysteresis": 2,
            "min_loss_scale": 1,
        }
    if k.optimizer in ("adamw", "adamw-fused") and not k.client_optimizer:  # else HF's Trainer builds --optim
        cfg["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    else:
        cfg["zero_allow_untested_optimizer"] = True
    return cfg


def script_args(plan: Plan, ds_path: str = DS_CONFIG_NAME, model: ModelSpec | None = None) -> list[str]:
    a = ["--output_dir", "output"] if (plan.framework, plan.release) in OUTPUT_DIR else []
    a += [K.flag("micro_batch"), str(written_micro_batch(plan)), K.flag("grad_accum"), str(plan.grad_accum)]
    a += [K.flag("optimizer"), K["optimizer"].write(plan.optimizer)]
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
        if plan.lora_train_embeddings:
            a += [K.flag("lora_train_embeddings"), *peft["modules_to_save"]]
        if plan.lora_variant == "dora":  # trl/trainer/model_config.py:142
            a += [K.flag("lora_variant")]
    if plan.quant == "int8":  # TRL's ModelConfig (trl/trainer/utils.py:270-273)
        a += ["--load_in_8bit"]
    elif plan.quant in ("gptq", "awq"):  # no flag: the checkpoint carries its quantization_config
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


def bundled_command(plan: Plan, hw: Hardware, model: ModelSpec, seq_len: int) -> str:
    """`planner train` with the plan's every knob (it starts torchrun or deepspeed itself)."""
    a = [
        "planner",
        "train",
        "--model",
        model.name,
        "--gpu",
        hw.gpu.name,
        "--gpus-per-node",
        str(hw.gpus_per_node),
        "--nodes",
        str(hw.nodes),
        "--seq-len",
        str(seq_len),
        "--micro-batch",
        str(plan.micro_batch),
        "--grad-accum",
        str(plan.grad_accum),
        "--precision",
        plan.precision,
        "--checkpointing",
        plan.checkpointing,
        "--zero",
        str(plan.zero_stage),
        "--offload",
        plan.offload,
        "--fsdp",
        plan.fsdp,
        "--optimizer",
        plan.optimizer,
        "--lora-rank",
        str(plan.lora_rank),
        "--loss",
        plan.loss,
        "--attention",
        plan.attention,
        "--batching",
        plan.batching,
        "--data",
        "DATA.jsonl",
    ]
    if plan.optimizer_in_backward:
        a.append("--optimizer-in-backward")
    if plan.frozen != "none":
        a += ["--frozen", plan.frozen]
    a += ["--expandable-segments"] if plan.expandable_segments else []
    a += ["--eval-batch", str(plan.eval_batch)] if plan.eval_batch else []
    if plan.lora_rank:
        a += ["--quant", plan.quant, "--lora-targets", plan.lora_targets, "--lora-dropout", f"{plan.lora_dropout:g}"]
        a += ["--lora-train-embeddings"] if plan.lora_train_embeddings else []
        a += ["--lora-base-fp32"] if plan.lora_base_fp32 else []
    return " ".join(shlex.quote(x) for x in a)


def command(plan: Plan, hw: Hardware, model: ModelSpec | None = None, seq_len: int = 0) -> str:
    """torchrun for DDP, the deepspeed launcher for ZeRO; multi-node forms read the usual variables. A plan HF
    cannot run (bundled_only) is launched by the bundled trainer."""
    if model is not None and bundled_only(plan):
        return bundled_command(plan, hw, model, seq_len)
    named = ["--model_name_or_path", catalog.model_path(model)] if model is not None else []
    args = " ".join(shlex.quote(x) for x in [train_script(model), *named, *script_args(plan, model=model)])
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
    plan: Plan, hw: Hardware, program: list[str] | None = None, header: list[str] = (), driver: str | None = None
) -> str:
    """A Slurm script: one srun task per node, each running torchrun over the node's GPUs on `program` (default: your
    HF-Trainer-style train.py with the plan's arguments). driver: a command run once on the batch host instead, that
    starts the nodes' tasks itself (the bundled trainer's `planner train --launcher slurm`). header: more #SBATCH
    lines (partition, account, time)."""
    args = " ".join(shlex.quote(x) for x in (program or [TRAIN_SCRIPT, *script_args(plan)]))
    env = "".join(f"export {k}={v}\n" for k, v in {**launch_env(plan), **parallel.parallelism_env(plan, hw)}.items())
    run = driver or (
        f"""srun --kill-on-bad-exit=1 bash -c 'torchrun --nnodes "$SLURM_NNODES" --nproc_per_node {hw.gpus_per_node} \\
  --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \\
  {args}'"""
    )
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


def check_emit_dir(out_dir: str) -> None:
    """BadInput unless `out_dir` is (or can become) a writable folder; checked before any planning."""
    from planner.errors import BadInput

    try:
        d = Path(out_dir).expanduser()
        d.stat() if d.exists() else None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte; OSError: a name too long
        raise BadInput(f"--emit {out_dir!r}: not a usable path ({e})", "emit") from None
    if d.exists() and not d.is_dir():
        raise BadInput(f"--emit {out_dir!r}: a file of that name exists; --emit takes a folder", "emit")
    probe = d
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise BadInput(f"--emit {out_dir!r}: {str(probe)!r} is not a writable folder", "emit")


def yaml_text(cfg: dict, indent: int = 0) -> str:
    """A flat-or-nested dict of scalars as YAML (what accelerate's config files hold); JSON scalars are YAML."""
    lines = []
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(" " * indent + f"{k}:\n" + yaml_text(v, indent + 2).rstrip("\n"))
        else:
            lines.append(" " * indent + f"{k}: {json.dumps(v)}")
    return "\n".join(lines) + "\n"
