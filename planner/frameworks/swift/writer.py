"""A plan as ms-swift 4.6.0 runs it: `swift_train.sh` (environment lines, then `swift sft` or `swift rlhf` with one
`--flag value` a line, as swift's examples are written), the DeepSpeed JSON or FSDP config it names when no preset of
swift's matches the plan, and the launch line.

Flag names, choices and defaults were read from the 4.6.0 wheel (paths under swift/):
cli/main.py:30-35,74-83 (torchrun only when NPROC_PER_NODE or NNODES is set; NNODES, NODE_RANK, MASTER_ADDR/PORT);
arguments/base_args/base_args.py:56-58 (--tuner_type lora, v4's name for v3's --train_type), :133-136 (--packing,
--padding_free); arguments/tuner_args.py:122-124 (--freeze_vit, --freeze_aligner True), :126 (--target_modules
all-linear), :128 (--target_parameters), :133-135 (--lora_rank 8, --lora_alpha 32, --lora_dropout 0.05);
arguments/base_args/model_args.py:74,130-142 (--torch_dtype bfloat16/float16/float32; --bf16/--fp16 follow it unless
given), :75-79 (--attn_impl; flash_attn is flash_attention_2); arguments/base_args/quant_args.py:30-43 (--quant_method
bnb, --quant_bits 4, --bnb_4bit_quant_type nf4, --bnb_4bit_use_double_quant); trainers/arguments.py:130 (batch 1),
:135 (--gradient_checkpointing True), :155 (--use_liger_kernel), :289-292 (--gradient_accumulation_steps None: a
total batch of 16); arguments/sft_args.py:186-197 (packing and padding-free need flash attention), :252-283
(--deepspeed presets zero0..3, zero2_offload, zero3_offload, or a JSON path), :285-360 (--fsdp fsdp2 preset or a JSON
path holding "fsdp" and "fsdp_config"; FSDP's activation_checkpointing replaces --gradient_checkpointing);
arguments/rlhf_args.py:164 (--num_generations 8), :170 (--num_iterations 1), :233 (--rlhf_type dpo/grpo), :242
(--max_completion_length 512), :351-357 (GRPO: --max_length cuts the prompt from the left; --beta None becomes 0.04);
rlhf_trainers/args_mixin.py:37,169-170 (--use_vllm, --vllm_mode, --vllm_gpu_memory_utilization 0.9). The script
imitates examples/train/multi-gpu/deepspeed/train_zero3.sh.

Swift's zero1/zero2/zero2_offload presets fix 2e8-element buckets where the plan counts DeepSpeed's reduce bucket at
hidden^2 (planner.estimate.zero.settings), so those plans get the plan's own JSON; zero3 and
zero3_offload leave the buckets to HF's "auto" (hidden^2), as the plan does, and are used by name.
"""

from __future__ import annotations

import json
import shlex

from planner.config import zerobuckets
from planner.config.knobfields import CT_QUANTS
from planner.config.spec import Goal, Hardware, Plan
from planner.estimate import recipe_terms
from planner.estimate.freeze import trained_layer_ids
from planner.export import configs, export
from planner.frameworks import FRAMEWORKS, check_plan
from planner.frameworks.swift import writer_media
from planner.frameworks.swift.keys import KEYS, TUNER_RANK, VERA_DROPOUT
from planner.frameworks.swift.writer_media import media_env, vllm_limit, writes_media
from planner.frameworks.swift.writer_optim import optimizer_flags
from planner.frameworks.swift.writer_rollout import engine_gpus, placement_flags, tp_key
from planner.frameworks.swift.writer_rollout import header as rollout_header
from planner.frameworks.swift.writer_rollout import pin_before as rollout_pin
from planner.model.catalog import checkpoints
from planner.model.lora_targets import end_modules, peft_target_modules, peft_target_parameters
from planner.model.modelspec import ModelSpec

VERSION = "ms-swift 4.6.0"
SCRIPT_NAME = "swift_train.sh"
FSDP_NAME = "swift_fsdp.json"
DS_PRESETS = {(3, "none"): "zero3", (3, "optimizer+params"): "zero3_offload"}

Flag = tuple[str, object]  # flag name without "--", a value or a list of values


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """{file name: text}: the launch script (the media caps the plan was sized at, `goal`: writer_media) and,
    where no swift preset matches the plan, its DeepSpeed / FSDP JSON."""
    check(plan)
    out = {SCRIPT_NAME: script(plan, model, hw, seq_len, goal)}
    if plan.zero_stage and deepspeed_arg(plan) == configs.DS_CONFIG_NAME:
        out[configs.DS_CONFIG_NAME] = json.dumps(configs.deepspeed_config(plan, model), indent=2) + "\n"
    if plan.fsdp != "off" and fsdp_arg(plan, model) == FSDP_NAME:
        out[FSDP_NAME] = json.dumps(fsdp_json(plan, model), indent=2) + "\n"
    return out


def command(plan: Plan, hw: Hardware) -> str:
    """The script starts torchrun itself (NPROC_PER_NODE / NNODES, cli/main.py:30-35)."""
    check(plan)
    return f"bash {SCRIPT_NAME}"


def check(plan: Plan) -> None:
    """ValueError for what ms-swift cannot run as planned or writes no file for (its rules:
    planner/frameworks/swift/__init__.py; a 2.x plan is read from users' scripts, never written: the 2.x line's rule of
    scope "written", as 2.x's flags differ: --sft_type, --batch_size, --model_id_or_path)."""
    check_plan("swift", plan)


writes_pixels = writes_tiles = writes_video = writes_media  # planner.export.launch asks (writer_media)
writes_limit = writer_media.writes_limit  # and this: vLLM's limit_mm_per_prompt for a colocated rollout
pin_before = rollout_pin  # launch.pinned asks: a 3.4-line plan in 3.4.x's vLLM words pins ms-swift <3.5.0


def script(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> str:
    sub = ["swift", "sft"] if plan.workload.kind == "sft" and not reward_model(plan) else ["swift", "rlhf"]
    cap = media_env(goal, plan.release)  # the images' and videos' caps (writer_media; unset, qwen_vl_utils')
    lines = [f"{k}={v} \\" for k, v in [*env(hw, plan), *cap]] + [" ".join(sub) + " \\"]
    flags = flag_list(plan, model, seq_len, processes(hw, plan))
    flags += vllm_limit(plan, goal)  # a colocated vLLM's media a row (writer_media)
    for i, (name, value) in enumerate(flags):
        values = value if isinstance(value, list) else [value]
        text = " ".join(shlex.quote(word(v)) for v in values)
        lines.append(f"    --{name} {text}" + (" \\" if i < len(flags) - 1 else ""))
    return "\n".join([*header(plan, hw), *lines]) + "\n"


def header(plan: Plan, hw: Hardware) -> list[str]:
    title = (
        f"# memplan plan for {VERSION}: micro {plan.micro_batch} x accum {plan.grad_accum} x {plan.world_size} GPUs "
        f"({hw.gpu.name}) = {plan.global_batch}, {plan.sharding}, {plan.precision}, checkpointing "
        f"{plan.checkpointing}; {plan.memory.device_total_bytes / 2**30:.1f} of "
        f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU"
    )
    out = [
        "#!/bin/bash",
        title,
        "# --model: the catalog name; give your local path or ModelScope / HF id (USE_HF=1 for the HF hub)",
        "# --dataset: your dataset (a ms-swift dataset id or a local .jsonl)",
    ]
    if plan.workload.kind == "grpo":
        out.append("# --reward_funcs: swift's built-in accuracy and format rewards; replace with yours")
    if hw.nodes > 1:
        out.append("# run on every node with NODE_RANK, MASTER_ADDR and MASTER_PORT set")
    return out + rollout_header(plan, processes(hw, plan))


def processes(hw: Hardware, plan: Plan | None = None) -> int:
    """Training processes a node: a device_map's processes each see device_map GPUs (ms-swift places the model over
    them: is_mp, swift/utils/env.py:64-75: visible GPUs // local processes >= 2; swift/model/utils.py:229-246)."""
    return hw.gpus_per_node // (plan.device_map if plan is not None else 1)


def env(hw: Hardware, plan: Plan | None = None) -> list[tuple[str, str]]:
    out = [("NPROC_PER_NODE", str(processes(hw, plan))), ("NNODES", str(hw.nodes))]
    if plan is not None and plan.loss == "chunked":  # swift/trainers/utils.py:178 (sequence parallel's loss)
        out.append(("CELOSS_PARALLEL_SIZE", str(recipe_terms.SWIFT_CE_CHUNK)))
    if plan is not None and plan.negatives and plan.task != "seq-cls":  # the rows the plan counts an example
        # swift/loss/embedding.py:119 (hard negatives kept an example); swift/template/base.py:1949 (a reranker's)
        name = "INFONCE_HARD_NEGATIVES" if plan.task == "embedding" else "MAX_NEGATIVE_SAMPLES"
        out.append((name, str(plan.negatives)))
    if hw.nodes > 1:
        out += [("NODE_RANK", "$NODE_RANK"), ("MASTER_ADDR", "$MASTER_ADDR"), ("MASTER_PORT", "$MASTER_PORT")]
    shown = hw.gpus_per_node + (engine_gpus(plan) if plan is not None else 0)  # 3.4.x's engine GPU (writer_rollout)
    return out + [("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(shown)))]


def word(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def split_steps(plan: Plan) -> int:
    """GRPO under sequence parallel S runs S micro-steps for each the flags count (reader_rl.grpo_split_steps)."""
    return plan.sequence_parallel if plan.workload.kind == "grpo" else 1


def flag_list(plan: Plan, model: ModelSpec, seq_len: int, procs: int = 1) -> list[Flag]:
    k = KEYS.pair
    out: list[Flag] = [k("model", loaded(model).path)]
    if plan.workload.kind != "sft":
        out.append(k("workload.kind", plan.workload.kind))
    out += task_flags(plan) + tuner_flags(plan, model) + precision_flags(plan)
    out += [
        k("attention", plan.attention),
        k("micro_batch", plan.micro_batch),
        k("grad_accum", plan.grad_accum // split_steps(plan)),  # swift's default differs (a total batch of 16)
        *([k("eval_batch", plan.eval_batch)] if plan.eval_batch else []),
        k("checkpointing", plan.checkpointing == "full" and plan.fsdp == "off"),
        *([k("vit_checkpointing", False)] if plan.vit_checkpointing == "off" else []),
        k("seq_len", plan.workload.prompt_tokens() if plan.workload.kind == "grpo" else seq_len),
    ]
    if plan.batching == "packed":  # DPO/KTO: padding_free alone (--packing bins a sample's rows under max_length)
        out += [k("padding_free", True)] if plan.workload.preference else [k("packing", True), k("padding_free", True)]
    if plan.loss == "fused":
        out.append(k("loss", plan.loss))
    out += optimizer_flags(plan)  # torch's --optim, GaLore's or Muon's (writer_optim.py)
    if plan.zero_stage:
        out.append(k("zero_stage", deepspeed_arg(plan)))
    if plan.fsdp != "off":
        out.append(k("fsdp", fsdp_arg(plan, model)))
    if plan.sequence_parallel > 1:  # Ulysses
        out.append(k("sequence_parallel", plan.sequence_parallel))
    if plan.tensor_parallel > 1:  # DeepSpeed AutoTP, full fine-tuning only
        out.append(k("tensor_parallel", plan.tensor_parallel))
    out += rlhf_flags(plan, procs)
    return out + [
        ("dataset", "YOUR_DATASET"),
        ("num_train_epochs", 1),
        ("learning_rate", 1e-4 if plan.lora_rank else 1e-5),
        ("output_dir", "output"),
    ]


def task_flags(plan: Plan) -> list[Flag]:
    """--task_type (memplan's task with "_" for "-": swift/arguments/base_args/model_args.py:72) and a seq-cls head's
    --num_labels (:83), or a reward model's --rlhf_type rm; none for a causal LM."""
    if plan.task == "causal-lm":
        return []
    if reward_model(plan):  # ms-swift's reward model: task seq_cls, num_labels 1, its pairs (reader_rl.read_rm)
        return [KEYS.pair("workload.kind", "rm")]
    labels = [KEYS.pair("num_labels", plan.num_labels)] if plan.task == "seq-cls" else []
    return [KEYS.pair("task", plan.task.replace("-", "_")), *labels]


def reward_model(plan: Plan) -> bool:
    """A one-score seq-cls head over each pair's chosen and rejected rows: `swift rlhf --rlhf_type rm`."""
    return plan.task == "seq-cls" and plan.num_labels == 1 and plan.negatives == 1


def tuner_flags(plan: Plan, model: ModelSpec) -> list[Flag]:
    k = KEYS.pair
    tuner = KEYS.key("lora", plan.knobs.release)  # 3.x: train_type (the release)
    if not plan.lora_rank:
        if plan.trained_layout == "inserted":  # LLaMA-Pro's new blocks (reader_freeze.read_llamapro)
            return [(tuner, "llamapro"), k("llamapro_blocks", plan.trained_layers)]
        out: list[Flag] = [(tuner, "full")]
        if plan.trained_layers:  # every parameter frozen, the last (or first) layers trainable (reader_freeze.py)
            ids = trained_layer_ids(model.text.layers, plan.trained_layers, plan.trained_layout)
            out += [k("freeze_ratio", 1), k("trained_layers", [f"model.layers.{i}." for i in ids])]
        if model.vision is not None:  # swift freezes both by default
            out += [k("frozen_vision", "vision" in plan.frozen), k("frozen_projector", "projector" in plan.frozen)]
            out += [k("frozen_language", True)] if "language" in plan.frozen else []
        return out
    tower_full = getattr(plan, "lora_tower_full", False)  # a test's plain namespace may lack the field
    if tower_full:  # lora_llm: the language model's linears, no dropout (reader_tuners.LORA_LLM)
        return [(tuner, "lora_llm"), k("lora_rank", plan.lora_rank), k("lora_alpha", 2 * plan.lora_rank)]
    variant = plan.lora_variant if plan.lora_variant in TUNER_RANK else None
    if variant == "adapter":  # ms-swift's bottleneck adapter: its length alone (tuner.py:280-293)
        return [(tuner, variant), (TUNER_RANK[variant][0], plan.lora_rank)]
    out = [
        (tuner, variant or "lora"),
        *(tuner_rank_flags(variant, plan) if variant else [k("lora_rank", plan.lora_rank)]),
        k("lora_alpha", 2 * plan.lora_rank),
        *([] if variant else [k("lora_dropout", plan.lora_dropout)]),
        k("lora_targets", target_modules(plan, model)),
    ]
    if peft_target_parameters(plan.lora_targets):
        out.append(k("lora_target_parameters", peft_target_parameters(plan.lora_targets)))
    if plan.lora_train_embeddings:
        out.append(k("lora_train_embeddings", ["embed_tokens", "lm_head"]))
    if (
        plan.lora_vision
    ):  # all-linear reaches the ViT's and aligner's linears once they are not frozen (tuner.py:92-104)
        out += [k("frozen_vision", False), k("frozen_projector", False)]
    if plan.lora_variant == "dora":
        out.append(k("lora_variant", plan.lora_variant))
    return out + quant_flags(plan)


def tuner_rank_flags(variant: str, plan: Plan) -> list[Flag]:
    """--tuner_type adalora's --adalora_init_r and --lora_dropout, vera's --vera_rank and --vera_dropout, or boft's
    --boft_block_size and --boft_dropout (swift/pipelines/train/tuner.py:255-316), in place of --lora_rank and
    --lora_dropout."""
    dropout = {"vera": VERA_DROPOUT[0], "boft": "boft_dropout"}.get(variant, KEYS.key("lora_dropout"))
    return [(TUNER_RANK[variant][0], plan.lora_rank), (dropout, plan.lora_dropout)]


def quant_flags(plan: Plan) -> list[Flag]:
    k = KEYS.pair
    if plan.quant in ("gptq", "awq", *CT_QUANTS, "none"):  # quant_args.py:46: the checkpoint brings its own config
        return []
    if plan.quant == "hqq":  # quant_args.py:69-71 (v3.10.3): HqqConfig(nbits=quant_bits), groups of 64
        return [k("quant_method", "hqq"), k("quant", 4)]
    if plan.quant == "int8":  # model/register.py:82-83: quant_bits 8 is load_in_8bit
        return [k("quant_method", "bnb"), k("quant", 8)]
    out = [
        k("quant_method", "bnb"),
        k("quant", 4),
        k("quant_type", plan.quant),
        k("quant_absmax", plan.quant_absmax == "8bit"),
    ]
    if configs.quant_storage(plan):  # quant_args.py:43, None by default: sharding needs it
        out.append(k("quant_storage", configs.quant_storage(plan)))
    return out


def target_modules(plan: Plan, model: ModelSpec) -> list[str]:
    # never None here: targets on stacked experts alone are refused by the adapter's lora_targets rule (check)
    targets, ends = peft_target_modules(plan.lora_targets), end_modules(plan.lora_ends)
    if targets == "all-linear":  # the other names kept beside it (pipelines/train/tuner.py:97-110)
        return ["all-linear", *ends]
    return loaded(model).lora_names(targets) + ends


def loaded(model: ModelSpec) -> checkpoints.Checkpoint:
    """The checkpoint swift builds for the id it is given: the repository's own code where it ships one
    (Framework.remote_code; OpenGVLab/InternVL2_5-8B is InternVLChatModel with InternLM2, not the native classes)."""
    return checkpoints.for_framework(model, FRAMEWORKS["swift"].remote_code)


def precision_flags(plan: Plan) -> list[Flag]:
    """The weights' dtype and autocast. Full fine-tuning under torch AMP (no ZeRO) keeps fp32 weights, as the plan
    counts them: swift loads the model in --torch_dtype, so those plans load float32 and autocast to bf16 / fp16.
    DeepSpeed keeps its own fp32 master copy; a LoRA base is half precision."""
    amp = plan.precision in ("bf16", "fp16")
    dtype = "fp32" if amp and not plan.lora_rank and not plan.zero_stage else plan.precision
    k = KEYS.pair
    return [k("precision", dtype), k("bf16", plan.precision == "bf16"), k("fp16", plan.precision == "fp16")]


def deepspeed_arg(plan: Plan) -> str:
    """swift's preset (its "auto" buckets) for the plan's stage and offload, or the plan's own JSON where the plan
    sets buckets of its own (zero_buckets) or no preset matches."""
    if zerobuckets.applied(plan.knobs.zero_buckets, plan.zero_stage):
        return configs.DS_CONFIG_NAME
    return DS_PRESETS.get((plan.zero_stage, plan.offload), configs.DS_CONFIG_NAME)


def fsdp_arg(plan: Plan, model: ModelSpec) -> str:
    """swift's fsdp2 preset (config/fsdp2.json: full shard, activation checkpointing, no offload) where it is the
    plan; otherwise the plan's own FSDP JSON. A VLM or a remote-code checkpoint always gets its own: the preset wraps
    the model's _no_split_modules (accelerate/utils/fsdp_utils.py:942-953, a name it cannot find stops it), which
    InternVLChatModel lists with classes it does not build (modeling_internvl_chat.py:43-44: LlamaDecoderLayer,
    Phi3DecoderLayer, ...) and Gemma-3's with SigLIP's pooling head its tower leaves out (the validators build both)."""
    preset = plan.fsdp == "full" and plan.checkpointing == "full" and plan.offload == "none"
    preset = preset and model.vision is None and not loaded(model).remote
    return "fsdp2" if preset else FSDP_NAME


def fsdp_json(plan: Plan, model: ModelSpec) -> dict:
    """What swift's --fsdp reads (sft_args.py:312-321): HF's fsdp string and its fsdp_config (FSDP2)."""
    f = configs.fsdp_config(plan, model, loaded(model).layer_classes)
    cfg = {
        "fsdp_version": 2,
        "reshard_after_forward": f["reshard_after_forward"],
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "cpu_ram_efficient_loading": True,
        "state_dict_type": f["state_dict_type"],
        "activation_checkpointing": f["activation_checkpointing"],
    }
    if "transformer_layer_cls_to_wrap" in f:
        cfg["transformer_layer_cls_to_wrap"] = f["transformer_layer_cls_to_wrap"]
    return {"fsdp": export.HF_FSDP[plan.fsdp] + (" offload" if plan.offload != "none" else ""), "fsdp_config": cfg}


def rlhf_flags(plan: Plan, procs: int = 1) -> list[Flag]:
    """DPO uses swift's defaults (beta 0.1, sigmoid loss); GRPO writes TRL's inputs, beta explicitly (swift's default
    is 0.04, rlhf_args.py:356-357, the plan's TRL's 0.0), and vLLM's placement in the line's words (writer_rollout),
    `procs` training processes a node."""
    w = plan.workload
    if w.kind == "gkd":  # the student's completions from vLLM where it generates with it (Framework.gkd_vllm)
        return gkd_flags(w) + (vllm_flags(plan, procs) if w.generation != "hf" else [])
    if w.kind != "grpo":
        return []
    k = KEYS.pair
    out: list[Flag] = [
        k("workload.num_generations", w.num_generations),
        k("workload.max_completion_length", w.max_completion_length),
        k("workload.beta", w.beta),
        k("workload.num_iterations", w.num_iterations),
    ]
    chord: list[Flag] = []
    if w.chord_sft_batch:  # CHORD's SFT rows (rlhf_trainers/args_mixin.py:388), their dataset the user's
        chord = [k("workload.chord_sft_batch", w.chord_sft_batch), ("chord_sft_dataset", "YOUR_SFT_DATASET")]
    return out + chord + teacher_flags(w) + vllm_flags(plan, procs) + [("reward_funcs", ["accuracy", "format"])]


# workload.teacher_sharding as --teacher_deepspeed's bundled names (reader_rl.TEACHER_DS)
TEACHER_DS = {"whole": "zero0", "zero3": "zero3", "zero3-offload": "zero3_offload"}


def teacher_flags(w) -> list[Flag]:
    """--teacher_model (GKD's, and GRPO's OPD-RL from v4.4.0) and --teacher_deepspeed where the teacher is placed
    apart from the student."""
    if not w.teacher_model:
        return []
    out: list[Flag] = [KEYS.pair("workload.teacher_model", export.hf_or_name(w.teacher_model))]
    if w.teacher_sharding != "as-student":
        out.append(("teacher_deepspeed", TEACHER_DS[w.teacher_sharding]))
    return out


def vllm_flags(plan: Plan, procs: int) -> list[Flag]:
    """--use_vllm and the engine's placement, share, tensor parallel size, sleep level and sync groups (GRPO's and,
    from v3.10.0, GKD's RolloutTrainerMixin); the generation batch."""
    w, k = plan.workload, KEYS.pair
    out: list[Flag] = [k("workload.use_vllm", w.generation != "hf")]
    if w.generation != "hf":
        out += placement_flags(plan, procs)
    if w.generation == "vllm-colocate":
        out.append(k("workload.vllm_gpu_memory_utilization", w.vllm_gpu_memory_utilization))
    if w.generation == "vllm-colocate" and w.roles.rollout_tp > 1:
        out.append((tp_key(plan), w.roles.rollout_tp))
    if w.generation == "vllm-colocate" and w.roles.sleep_level:
        out.append(k("workload.roles.sleep_level", w.roles.sleep_level))
    if w.steps_per_generation is not None:
        out.append(k("workload.steps_per_generation", w.steps_per_generation // split_steps(plan)))
    if w.roles.move_model_batches is not None:
        out.append(k("workload.roles.move_model_batches", w.roles.move_model_batches))
    return out


def gkd_flags(w) -> list[Flag]:
    """`swift rlhf --rlhf_type gkd`'s inputs (swift/arguments/rlhf_args.py:71 --teacher_model, :258 --temperature,
    :263 --lmbda, :516-518 --beta 0.5 for gkd, :242 --max_completion_length); no --teacher_model: the student is its
    own teacher (self-distillation, :403-407)."""
    k = KEYS.pair
    return [
        *teacher_flags(w),
        k("workload.lmbda", w.lmbda),
        k("workload.jsd_beta", w.jsd_beta),
        k("workload.max_completion_length", w.max_completion_length),
    ]
