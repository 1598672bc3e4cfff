"""A plan as axolotl 0.19.0 runs it: `axolotl.yaml`, the DeepSpeed JSON of a ZeRO plan, and the launch line.

Key names and defaults were read from the 0.19.0 wheel (paths under axolotl/):
utils/schemas/model.py:17 (base_model); utils/schemas/training.py:71,77 (gradient_accumulation_steps,
micro_batch_size), :116 (learning_rate, required), :122 (optimizer adamw_torch_fused); utils/schemas/config.py:561-598
(bf16 auto, fp16, bfloat16 / float16: half weights without autocast), :606 (gradient_checkpointing False), :629 (activation_offloading;
validation.py:1577-1592), :649 (freeze_mm_modules: utils/freeze.py:16-26 freezes the vision modules and their
projector), :671 (sequence_len), :694 (sample_packing), :845 (attn_implementation, which replaces the deprecated
flash_attention / sdp_attention flags, config.py:1546-1590), :997 (chunked_cross_entropy), :1051 (deepspeed: a JSON
path), :1068-1071 (fsdp_config, fsdp_version; without a version FSDP1 is assumed, validation.py:1215-1233);
utils/schemas/fsdp.py:10-90 (fsdp_config keys, unprefixed); utils/schemas/peft.py:31-80 (adapter lora | qlora,
load_in_4bit, lora_r, lora_alpha, lora_target_linear, lora_target_modules, lora_target_parameters,
lora_modules_to_save, lora_dropout), :149 (bnb_config_kwargs, over loaders/model.py:806-824's nf4 double-quant
default); integrations/liger/args.py:35-69 (liger_fused_linear_cross_entropy, with the LigerPlugin listed);
utils/schemas/enums.py:31-41 (rl: dpo, grpo); utils/schemas/trl.py (trl: beta, max_completion_length, use_vllm,
vllm_mode, generation_batch_size, num_generations, num_iterations, reward_funcs); utils/schemas/vllm.py
(vllm.gpu_memory_utilization, read by core/trainers/grpo/__init__.py:74-75); config.py:317
(precompute_ref_log_probs). Launch: cli/main.py:80-129 and cli/utils/train.py:157-191 (`axolotl train x.yaml` runs
`accelerate launch -m axolotl.cli.train x.yaml`). Unknown keys are dropped silently by axolotl's validator, so this
module writes only keys its schema has. The YAML imitates examples/llama-3/lora-1b.yml and 3b-fp8-fsdp2.yaml.
"""

from __future__ import annotations

import json

from planner.config.spec import Goal, Hardware, Plan
from planner.estimate.quant import FOUR_BIT
from planner.export import configs, export
from planner.frameworks import FRAMEWORKS, check_plan
from planner.frameworks.axolotl.keys import KEYS, OWN_OPTIMS
from planner.model.catalog import checkpoints
from planner.model.lora_targets import end_modules, peft_target_modules, peft_target_parameters
from planner.model.modelspec import ModelSpec

VERSION = "axolotl 0.19.0"
CONFIG_NAME = "axolotl.yaml"
LIGER = "axolotl.integrations.liger.LigerPlugin"
OLD_ATTENTION = {"flash": "flash", "sdpa": "sdp", "eager": "eager"}
DATASET_TYPE = {"sft": "chat_template", "dpo": "chat_template.default", "grpo": "YOUR_REWARDS_MODULE.transform"}
# a reward model's pairs (v0.18.0 examples/qwen2/reward-model.yaml)
DATASET_TYPE["seq-cls"] = "bradley_terry.chat_template"
# KTO's prompt / completion / label rows (0.19.0 prompt_strategies/kto/chatml.py:88 ultra; no chat_template strategy)
DATASET_TYPE["kto"] = "chatml.ultra"


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """{file name: text}: axolotl's YAML and, for a ZeRO plan, the DeepSpeed JSON it names."""
    check(plan, model, hw)
    out = {CONFIG_NAME: render(config(plan, model, seq_len), comments(plan, hw))}
    if plan.zero_stage:
        out[configs.DS_CONFIG_NAME] = json.dumps(configs.deepspeed_config(plan, model), indent=2) + "\n"
    return out


def command(plan: Plan, hw: Hardware) -> str:
    """`axolotl train` on one GPU; on more, what it runs itself (cli/utils/train.py:179-181), `accelerate launch -m
    axolotl.cli.train`, with the process count and, over nodes, the rendezvous."""
    if hw.world_size == 1:
        return f"axolotl train {CONFIG_NAME}"
    a = ["accelerate", "launch", "--num_processes", str(hw.world_size)]
    if hw.nodes > 1:
        a += [
            "--num_machines",
            str(hw.nodes),
            "--machine_rank",
            "$NODE_RANK",
            "--main_process_ip",
            "$MASTER_ADDR",
            "--main_process_port",
            "$MASTER_PORT",
        ]
    return " ".join([*a, "-m", "axolotl.cli.train", CONFIG_NAME])


def check(plan: Plan, model: ModelSpec, hw: Hardware) -> None:
    """ValueError for what axolotl 0.19.0 cannot run as planned (its rules: planner/frameworks/axolotl/__init__.py)."""
    check_plan("axolotl", plan, model, hw)


def config(plan: Plan, model: ModelSpec, seq_len: int) -> dict:
    k = KEYS.pair
    data = {"path": "YOUR_DATASET", "type": DATASET_TYPE[plan.workload.kind if plan.task == "causal-lm" else plan.task]}
    cfg: dict = dict(
        [
            k("model", loaded(model).path),
            *task_keys(plan).items(),
            *adapter_keys(plan, model).items(),
            ("datasets", [data]),
        ]
    )
    if plan.workload.rl:
        cfg.update([k("workload.kind", plan.workload.kind)])
    if plan.workload.kind == "kto":  # utils/schemas/validation.py:713-719 refuses kto without it
        cfg["remove_unused_columns"] = False
    cfg["output_dir"] = "./outputs/memplan"
    cfg.update([k("seq_len", seq_len), (KEYS.key("batching"), plan.batching == "packed")])
    cfg.update([k("micro_batch", plan.micro_batch), k("grad_accum", plan.grad_accum), ("num_epochs", 1)])
    optim = export.HF_OPTIM.get(
        plan.optimizer, OWN_OPTIMS.get(plan.optimizer, plan.optimizer)
    )  # muon: its own (v0.18.0 schemas/enums.py:92)
    cfg.update([k("optimizer", optim), ("lr_scheduler", "cosine")])
    cfg.update(low_rank_keys(plan))
    cfg["learning_rate"] = 2e-4 if plan.lora_rank else 2e-5
    if plan.eval_batch:  # per_device_eval_batch_size
        cfg.update([k("eval_batch", plan.eval_batch)])
    cfg.update(precision_keys(plan))
    cfg.update(checkpoint_keys(plan))
    cfg.update(attention_keys(plan))
    cfg.update(loss_keys(plan))
    cfg.update(sharding_keys(plan, model))
    if plan.context_parallel > 1:  # ring-flash-attn's ring attention
        cfg.update([k("context_parallel", plan.context_parallel)])
    if plan.tensor_parallel > 1:  # AutoTP beside DeepSpeed, transformers' tp_plan beside FSDP2 (its adapter)
        cfg.update([k("tensor_parallel", plan.tensor_parallel)])
    cfg.update(rl_keys(plan))
    if plan.frozen != "none":
        cfg.update([k("frozen", True)])
    return cfg


def task_keys(plan: Plan) -> dict:
    """A seq-cls plan as axolotl runs it, its reward model (the axolotl rules leave no other: one label, chosen and
    rejected rows), in the keys v0.18.0 examples/qwen2/reward-model.yaml writes."""
    if plan.task != "seq-cls":
        return {}
    pairs = [("model_type", "AutoModelForSequenceClassification"), KEYS.pair("num_labels", plan.num_labels)]
    return dict([*pairs, KEYS.pair("task", plan.task)])


def adapter_keys(plan: Plan, model: ModelSpec) -> dict:
    if not plan.lora_rank:
        return {}
    k = KEYS.pair
    out: dict = dict([k("lora", "qlora" if plan.quant in FOUR_BIT else "lora")])
    if plan.quant == "int8":  # loaders/model.py: adapter lora with load_in_8bit
        out.update([k("quant_8bit", True)])
    elif plan.quant == "gptq":  # the checkpoint's GPTQ config
        out.update([k("quant_gptq", True)])
    elif plan.quant != "none":
        kwargs = {"bnb_4bit_quant_type": plan.quant, "bnb_4bit_use_double_quant": plan.quant_absmax == "8bit"}
        out.update([k("quant_4bit", True), k("quant_kwargs", kwargs)])
    out.update([k("lora_rank", plan.lora_rank), k("lora_alpha", 2 * plan.lora_rank)])
    out.update([k("lora_dropout", plan.lora_dropout)])
    targets, ends = peft_target_modules(plan.lora_targets), end_modules(plan.lora_ends)
    if targets == "all-linear":  # its loader adds every linear to lora_target_modules (loaders/adapter.py:174-182)
        out.update([k("lora_target_linear", True), *([k("lora_targets", ends)] if ends else [])])
    elif targets:
        out.update([k("lora_targets", loaded(model).lora_names(targets) + ends)])
    if peft_target_parameters(plan.lora_targets):
        out.update([k("lora_target_parameters", peft_target_parameters(plan.lora_targets))])
    if plan.lora_train_embeddings:
        out.update([k("lora_train_embeddings", ["embed_tokens", "lm_head"])])
    if plan.lora_variant == "dora":
        out.update([k("lora_variant", plan.lora_variant)])
    return out


def loaded(model: ModelSpec) -> checkpoints.Checkpoint:
    """The checkpoint axolotl builds: transformers' classes (Framework.remote_code), so a model whose default id is a
    remote-code checkpoint is named by its native conversion."""
    return checkpoints.for_framework(model, FRAMEWORKS["axolotl"].remote_code)


def precision_keys(plan: Plan) -> dict:
    """bf16 / fp16: autocast (axolotl loads the weights in that dtype, utils/config/__init__.py:197-202); bf16-pure:
    bfloat16 without autocast; fp32: neither (bf16 is "auto" unless given)."""
    if plan.precision == "bf16-pure":
        return dict([KEYS.pair("bf16", False), KEYS.pair("bfloat16", True)])
    return dict([KEYS.pair("bf16", plan.precision == "bf16"), KEYS.pair("fp16", plan.precision == "fp16")])


def _before_012(plan: Plan) -> bool:
    """A line before v0.12.0 (planner.frameworks.axolotl.releases): no attn_implementation, no activation_offloading."""
    release = getattr(plan.knobs, "release", "")
    return bool(release) and FRAMEWORKS["axolotl"].release(release).first < (0, 12)


def checkpoint_keys(plan: Plan) -> dict:
    """FSDP plans checkpoint through fsdp_config.activation_checkpointing (HF refuses both at once); offload-inputs is
    checkpointing with the layers' inputs in host RAM (`activation_offloading: true`, what the deprecated
    `gradient_checkpointing: offload` becomes, validation.py:1577-1592, or hidden_states where an adapter would turn
    true into offload; before v0.12.0 `gradient_checkpointing: offload`, v0.8.0 config.py:179, or "unsloth" before
    v0.8.0, v0.5.0 utils/models.py:380-381); offload, an adapter's `activation_offloading: true` (0.19.0)."""
    gc = KEYS.key("checkpointing")
    if plan.fsdp != "off" and plan.checkpointing == "full":
        return {gc: False}
    if plan.checkpointing == "offload-inputs" and _before_012(plan):
        return {gc: "offload" if FRAMEWORKS["axolotl"].release(plan.knobs.release).first >= (0, 8) else "unsloth"}
    if plan.checkpointing == "offload-inputs" and plan.lora_rank:  # 0.19.0's adapter runs: reader_training
        return {gc: True, KEYS.key("activation_offloading"): "hidden_states"}
    if plan.checkpointing.startswith("offload"):
        return {gc: True, KEYS.key("activation_offloading"): True}
    return {gc: plan.checkpointing == "full"}


def attention_keys(plan: Plan) -> dict:
    """attn_implementation from v0.12.0; before it the flags flash_attention / sdp_attention / eager_attention (v0.8.0
    utils/schemas/config.py:224-233, utils/models.py:887-892), which a line that drops attn_implementation reads."""
    if _before_012(plan):
        return {f"{OLD_ATTENTION[plan.attention]}_attention": True}
    return dict([KEYS.pair("attention", plan.attention)])


def loss_keys(plan: Plan) -> dict:
    if plan.loss == "chunked":
        return {KEYS.key("loss_chunked"): True}
    if plan.loss == "fused":
        return {KEYS.key("plugins"): [LIGER], KEYS.key("loss_fused"): True}
    return {}


def sharding_keys(plan: Plan, model: ModelSpec) -> dict:
    if plan.zero_stage:
        return {KEYS.key("zero_stage"): configs.DS_CONFIG_NAME}
    if plan.fsdp == "off":
        return {}
    f = configs.fsdp_config(plan, model, loaded(model).layer_classes)
    cfg = {
        "fsdp_version": 2,
        "offload_params": f["cpu_offload"],
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "reshard_after_forward": f["reshard_after_forward"],
        "state_dict_type": f["state_dict_type"],
        "cpu_ram_efficient_loading": True,
        "activation_checkpointing": plan.checkpointing == "full",
    }
    if "transformer_layer_cls_to_wrap" in f:
        cfg["transformer_layer_cls_to_wrap"] = ",".join(f["transformer_layer_cls_to_wrap"])
    return {KEYS.key("fsdp_version"): 2, KEYS.key("fsdp"): cfg}


def rl_keys(plan: Plan) -> dict:
    w = plan.workload
    if w.kind == "dpo":
        return dict([KEYS.pair("workload.precompute_ref_log_probs", True)]) if w.precompute_ref_log_probs else {}
    if w.kind != "grpo":
        return {}
    trl = {
        "beta": w.beta,
        "max_completion_length": w.max_completion_length,
        "num_generations": w.num_generations,
        "num_iterations": w.num_iterations,
        "use_vllm": w.generation != "hf",
        "reward_funcs": ["YOUR_REWARDS_MODULE.reward"],
        # TRL's own (per-device x world x steps per generation): without it axolotl checks micro x accum instead
        # (utils/schemas/validation.py:829-903)
        "generation_batch_size": w.generation_batch(plan.micro_batch, plan.grad_accum, plan.world_size),
    }
    out: dict = {"trl": trl}
    if w.generation != "hf":
        trl["vllm_mode"] = w.generation.removeprefix("vllm-")
    if w.generation == "vllm-colocate":
        out["vllm"] = {"gpu_memory_utilization": w.vllm_gpu_memory_utilization}
    if w.generation == "vllm-colocate" and w.roles.rollout_tp > 1:  # core/trainers/grpo/__init__.py:77-79
        out["vllm"]["tensor_parallel_size"] = w.roles.rollout_tp
    return out


def comments(plan: Plan, hw: Hardware) -> dict[str, str]:
    """The title, and a comment after some top-level keys."""
    out = {
        "": (
            f"memplan plan for {VERSION}: micro {plan.micro_batch} x accum {plan.grad_accum} x "
            f"{plan.world_size} GPUs ({hw.gpu.name}) = {plan.global_batch}, {plan.sharding}, {plan.precision}, "
            f"checkpointing {plan.checkpointing}; {plan.memory.device_total_bytes / 2**30:.1f} of "
            f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU"
        ),
        "base_model": "the Hugging Face id, or your local path",
        "datasets": "your dataset and its axolotl type",
        "deepspeed": "written beside this file",
    }
    if getattr(plan.knobs, "release", ""):  # an older line: its attention and offload keys are written as it names them
        out[""] += (
            f"; planned as axolotl@{plan.knobs.release} (its attention and offload keys; the rest are {VERSION}'s)"
        )
    if plan.precision in ("bf16", "fp16") and not plan.lora_rank and not plan.zero_stage:
        out[plan.precision] = "axolotl loads the weights in this dtype: fewer bytes than the plan's fp32 ones"
    if plan.workload.kind == "grpo":
        out["trl"] = "reward_funcs and the dataset's type: your own rewards module"
    return out


def render(cfg: dict, notes: dict[str, str]) -> str:
    """YAML of dicts, lists and JSON scalars (JSON scalars are YAML), with a comment after some top-level keys."""
    lines = [f"# {notes['']}"] if "" in notes else []
    for key, value in cfg.items():
        block = node(key, value, 0)
        if key in notes:
            block[0] += f"  # {notes[key]}"
        lines += block
    return "\n".join(lines) + "\n"


def node(key: str, value: object, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        return [f"{pad}{key}:"] + [line for k, v in value.items() for line in node(k, v, indent + 2)]
    if isinstance(value, list):
        out = [f"{pad}{key}:"]
        for item in value:
            if isinstance(item, dict):
                rows = [line for k, v in item.items() for line in node(k, v, indent + 4)]
                out += [f"{pad}  - {rows[0].lstrip()}"] + rows[1:]
            else:
                out.append(f"{pad}  - {scalar(item)}")
        return out
    return [f"{pad}{key}: {scalar(value)}"]


def scalar(value: object) -> str:
    """JSON's scalar, with a float's mantissa dotted: YAML 1.1 (PyYAML, which axolotl reads with) takes 2e-05 for a
    string and 2.0e-05 for a float."""
    text = json.dumps(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        text = text.replace("e", ".0e", 1)
    return text


def low_rank_keys(plan) -> dict:
    """GaLore's / APOLLO's optim_target_modules (utils/schemas/training.py:132: names or all_linear, which transformers
    takes for all-linear: trainer_optimizer.py:132-134) and optim_args, handed to TrainingArguments."""
    out = export.low_rank_args(plan)
    return out | ({"optim_target_modules": "all_linear"} if out.get("optim_target_modules") == "all-linear" else {})
