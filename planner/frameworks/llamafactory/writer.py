"""A plan as LLaMA-Factory 0.9.5 runs it: `llamafactory_train.yaml` (its v0 training YAML), the DeepSpeed JSON of a
ZeRO plan or the accelerate config of an FSDP plan, and the launch line.

Key names and defaults were read from the 0.9.5 wheel (paths under src/llamafactory/):
hparams/model_args.py:117 (flash_attn: auto/disabled/sdpa/fa2), :133 (use_unsloth_gc: layer inputs kept on the host),
:137 (enable_liger_kernel), :145 (disable_gradient_checkpointing False: LF checkpoints by default,
model/model_utils/checkpointing.py:173-176), :279-291 (quantization_method bnb, quantization_bit, quantization_type
nf4, double_quantization True); hparams/finetuning_args.py:59 (additional_target), :69/:568 (lora_alpha, 2 x rank when
unset), :77 (lora_rank 8), :81 (lora_target all), :171 (pref_beta), :456 (pure_bf16), :460 (stage), :464
(finetuning_type lora), :527/:531 (freeze_vision_tower, freeze_multi_modal_projector True), :574 (DPO keeps a reference
model unless orpo/simpo); hparams/data_args.py:46 (cutoff_len), :108/:112/:185-189 (packing, neat_packing);
data/collator.py:524-532 (neat_packing: a 4-D mask without FA2, one row per batch with it); hparams/parser.py:353-354
(DeepSpeed needs FORCE_TORCHRUN=1), :512-515 (bf16 or pure_bf16 sets the compute dtype); launcher.py:60-68
(FORCE_TORCHRUN, NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR/PORT); examples/README.md l.93/l.100 (launch lines)
and examples/extras/fsdp_qlora/train.sh (FSDP: `accelerate launch --config_file ... src/train.py x.yaml`). Unknown keys
raise (transformers hf_argparser.py:382-383); choices are checked only on the argv path, so this module writes only
values LF's enums hold. The YAML imitates examples/train_lora/qwen3_lora_sft_ds3.yaml.
"""

from __future__ import annotations

import json

from planner.config.spec import Goal, Hardware, Plan
from planner.export import configs, export
from planner.frameworks import FRAMEWORKS, check_plan
from planner.frameworks.llamafactory import FRAMEWORK
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.releases import TRAIN_BASH, takes
from planner.frameworks.llamafactory.releases import writes_pixels as line_writes_pixels
from planner.frameworks.llamafactory.writer_media import media_entries
from planner.frameworks.llamafactory.writer_optim import matrix_optimizer_entries
from planner.model.catalog import checkpoints
from planner.model.lora_targets import end_modules, linear_module_names, peft_target_modules
from planner.model.modelspec import ModelSpec

VERSION = "llamafactory 0.9.5"
CONFIG_NAME = "llamafactory_train.yaml"
CLI_TORCHRUN = (0, 8)  # the first release whose llamafactory-cli starts torchrun (v0.8.0 src/llamafactory/cli.py:75)
ACCELERATE_NAME = "accelerate_fsdp_config.yaml"
LEARNING_RATE = {"lora": 1.0e-4, "full": 1.0e-5, "dpo": 5.0e-6}  # the 0.9.5 examples' values

Entry = tuple[str, object, str]  # key, value, trailing comment ("" for none)


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """{file name: text}: the training YAML (`goal`: writer_media) and the DeepSpeed JSON (ZeRO) or accelerate
    config (FSDP) it names."""
    check(plan)
    out = {CONFIG_NAME: train_yaml(plan, model, hw, seq_len, goal)}
    if plan.zero_stage:
        out[ds_name(plan)] = json.dumps(configs.deepspeed_config(plan, model), indent=2) + "\n"
    if plan.fsdp != "off":
        out[ACCELERATE_NAME] = configs.yaml_text(accelerate_config(plan, hw, model))
    return out


def command(plan: Plan, hw: Hardware) -> str:
    """LLaMA-Factory's launcher under torchrun (examples/README.md l.93, l.100); FSDP plans run LF's training script
    under `accelerate launch` with the accelerate config (examples/extras/fsdp_qlora/train.sh). Before v0.8.0 the CLI
    started no torchrun (FORCE_TORCHRUN: v0.8.0 src/llamafactory/cli.py:75-87), so an older line's plan runs its
    script (Framework.entry_points: src/train_bash.py to v0.7.0, src/train.py from v0.7.1) under torchrun itself."""
    check(plan)
    rendezvous = (
        ["--machine_rank", "$NODE_RANK", "--main_process_ip", "$MASTER_ADDR", "--main_process_port", "$MASTER_PORT"]
        if hw.nodes > 1
        else []
    )
    release = FRAMEWORK.release(plan.release)
    script = "src/train_bash.py" if release.name in TRAIN_BASH else "src/train.py"
    if plan.fsdp != "off":
        return " ".join(["accelerate", "launch", "--config_file", ACCELERATE_NAME, *rendezvous, script, CONFIG_NAME])
    if plan.dataparallel:  # before v0.8.0 LLaMA-Factory trained in its own process (v0.7.1 src/llmtuner/cli.py:64-65)
        devices = ",".join(map(str, range(hw.gpus_per_node)))
        start = f"python {script}" if release.name in TRAIN_BASH else "llamafactory-cli train"
        return f"CUDA_VISIBLE_DEVICES={devices} {start} {CONFIG_NAME}"
    if release.first < CLI_TORCHRUN:
        nodes = ["--nnodes", str(hw.nodes)]
        if hw.nodes > 1:
            nodes += ["--node_rank", "$NODE_RANK", "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
        return " ".join(["torchrun", *nodes, "--nproc_per_node", str(hw.gpus_per_node), script, CONFIG_NAME])
    env = ["FORCE_TORCHRUN=1", f"NNODES={hw.nodes}"]
    if hw.nodes > 1:
        env += ["NODE_RANK=$NODE_RANK", "MASTER_ADDR=$MASTER_ADDR", "MASTER_PORT=$MASTER_PORT"]
    return " ".join([*env, f"NPROC_PER_NODE={hw.gpus_per_node}", "llamafactory-cli", "train", CONFIG_NAME])


def check(plan: Plan) -> None:
    """ValueError for what LLaMA-Factory 0.9.5 cannot run as planned (its rules: planner/frameworks/llamafactory/__init__.py)."""
    check_plan("llamafactory", plan)


def ds_name(plan: Plan) -> str:
    """LF's naming of its DeepSpeed JSONs (examples/deepspeed/ds_z{0,2,3}[_offload]_config.json)."""
    return f"ds_z{plan.zero_stage}{'_offload' if plan.offload != 'none' else ''}_config.json"


def accelerate_config(plan: Plan, hw: Hardware, model: ModelSpec) -> dict:
    """configs.accelerate_config without FSDP's own activation checkpointing: LF checkpoints the model itself
    (disable_gradient_checkpointing, checkpointing.py:157-176), so both would recompute twice."""
    cfg = configs.accelerate_config(plan, hw, model, loaded(model).layer_classes)
    cfg["fsdp_config"]["fsdp_activation_checkpointing"] = False
    return cfg


def train_yaml(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> str:
    title = (
        f"# memplan plan for {f'llamafactory@{plan.release}' if plan.release else VERSION}: micro {plan.micro_batch} x accum {plan.grad_accum} x {plan.world_size} "
        f"GPUs ({hw.gpu.name}) = {plan.global_batch}, {plan.sharding}, {plan.precision}, checkpointing "
        f"{plan.checkpointing}; {plan.memory.device_total_bytes / 2**30:.1f} of "
        f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU"
    )
    if plan.release:  # an older line's keys (planner.frameworks.llamafactory RELEASES, keys.py renames)
        title += f"\n# the keys below are LLaMA-Factory {plan.release}'s; requirements.txt beside this file pins it"
    sections = {
        "model": model_entries(plan, model),
        "method": method_entries(plan, model),
        "dataset": dataset_entries(plan, seq_len) + media_entries(plan, goal, keys_of(plan)),
        "output": output_entries(plan, model),
        "train": train_entries(plan),
    }
    body = "\n".join(f"### {name}\n" + "".join(line(*e) for e in entries) for name, entries in sections.items())
    return f"{title}\n{body}"


def keys_of(plan: Plan):
    """KEYS.pair at the plan's release line: ValueError naming the release and the setting for a key or a value not
    every version of the line takes (the line's rules refuse such a plan first: llamafactory.lines)."""
    line = plan.release

    def pair(name: str, value: object) -> tuple[str, object]:
        key = KEYS.key(name, line)
        if not takes(key, line) or not KEYS[name].spelled(value, line):
            shown = line or FRAMEWORK.newest.name
            raise ValueError(f"LLaMA-Factory {shown}'s YAML has no key for {name} {value!r} ({key} at the newest)")
        return KEYS.pair(name, value, line)

    return pair


def method(plan: Plan) -> list[Entry]:
    """quantization_method bnb, from v0.8.3; before, quantization_bit was bitsandbytes' alone (v0.6.0 src/llmtuner/
    hparams/model_args.py:44-47 "quantize the model using bitsandbytes")."""
    return [(*keys_of(plan)("quant_method", "bnb"), "")] if takes(KEYS.key("quant_method"), plan.release) else []


def line(key: str, value: object, comment: str = "") -> str:
    return f"{key}: {scalar(value)}" + (f"  # {comment}" if comment else "") + "\n"


def scalar(value: object) -> str:
    """A YAML scalar as LF's examples write it: small floats as 1.0e-4 (OmegaConf reads 1e-4 as a float, PyYAML as a
    string: REPORT.md section 1)."""
    if isinstance(value, float) and 0 < abs(value) < 1e-3:
        return f"{value:.1e}".replace("e-0", "e-")
    return json.dumps(value)


def model_entries(plan: Plan, model: ModelSpec) -> list[Entry]:
    k = keys_of(plan)
    out: list[Entry] = [
        (*keys_of(plan)("model", loaded(model).path), "or your local path"),
    ]
    if takes("trust_remote_code", plan.release):  # before v0.9.2 the loader sets it itself (SPANS)
        out.append(("trust_remote_code", True, ""))
    if plan.quant == "int8":  # model/model_utils/quantization.py:168-170: BitsAndBytesConfig(load_in_8bit=True)
        out += [(*k("quant", 8), "bitsandbytes LLM.int8 base"), *method(plan)]
    elif plan.quant in ("gptq", "awq"):  # model_utils/quantization.py:117-124: read from the checkpoint's own config
        pass
    elif plan.quant != "none":
        out += [
            (*k("quant", 4), "QLoRA: bitsandbytes 4-bit base"),
            *method(plan),
            (*k("quant_type", plan.quant), ""),
            (*k("quant_absmax", plan.quant_absmax == "8bit"), ""),
        ]
    out.append((*k("attention", plan.attention), "auto/disabled/sdpa/fa2" if not plan.release else ""))
    out.append((*k("checkpointing", plan.checkpointing == "off"), "LF checkpoints every layer unless this is true"))
    if plan.checkpointing == "offload-inputs":
        out.append((*k("checkpointing_offload", True), "checkpointed layers' inputs kept in host RAM"))
    if plan.loss == "fused":
        out.append((*k("loss", plan.loss), "Liger's fused linear cross-entropy (liger-kernel installed)"))
    return out


def method_entries(plan: Plan, model: ModelSpec) -> list[Entry]:
    k = keys_of(plan)
    out: list[Entry] = [
        # a seq-cls plan is its reward model: stage rm, trl's value-head model (Framework.value_head_rm)
        (*k("workload.kind", "rm"), "a reward model over chosen and rejected rows")
        if plan.task == "seq-cls"
        else (*k("workload.kind", plan.workload.kind), ""),
        ("do_train", True, ""),
        (
            *k(
                "lora",
                "oft" if oft(plan) else "lora" if plan.lora_rank else "freeze" if plan.trained_layers else "full",
            ),
            "",
        ),
    ]
    if plan.trained_layers:  # model/adapter.py:89-92: the last N layers trained (the first -N), the rest frozen
        first = plan.trained_layout == "first"
        n, what = (-plan.trained_layers, "first") if first else (plan.trained_layers, "last")
        out.append((*k("trained_layers", n), f"the {what} {plan.trained_layers} decoder layers trained"))
        out.append((*k("freeze_modules", "all"), "every module of those layers (v0.5 requires the key)"))
        if plan.trained_layout == "interleaved":  # the checkpoint scripts/llama_pro.py expanded
            out.append((*k("trained_layout", plan.trained_layout), "LLaMA-Pro: every (layers/N)-th layer trained"))
    if oft(plan):  # PEFT's OFTConfig(r=0, oft_block_size) (v0.9.5 model/adapter.py:243-250)
        out += [
            (*k("oft_block_size", plan.lora_rank), "OFT's block size (oft_rank 0: LF's default)"),
            (*k("oft_targets", lora_target(plan, model)), ""),
        ]
    elif plan.lora_rank:
        peft = configs.peft_config(plan, model)
        out += [
            (*k("lora_rank", plan.lora_rank), ""),
            (*k("lora_alpha", peft["lora_alpha"]), ""),
            (*k("lora_dropout", plan.lora_dropout), ""),
            (*k("lora_targets", lora_target(plan, model)), ""),
        ]
        if plan.lora_train_embeddings:
            out.append((*k("lora_train_embeddings", "embed_tokens,lm_head"), "trained beside the adapters"))
        if plan.lora_vision and model.vision is not None:  # lora_target all reaches the tower (misc.py:40-41)
            out.append((*k("frozen_vision", False), "adapters on the vision tower too"))
        if plan.lora_variant == "dora":
            out.append((*k("lora_variant", plan.lora_variant), ""))
    elif model.vision is not None:  # LF freezes both by default
        out += [
            (*k("frozen_vision", "vision" in plan.frozen), ""),
            (*k("frozen_projector", "projector" in plan.frozen), ""),
            (*k("frozen_language", "language" in plan.frozen), ""),
        ]
    if plan.workload.kind == "kto":
        out.append((*k("pref_beta", 0.1), "KTO's beta (kto_chosen_weight / kto_rejected_weight 1.0: LF's defaults)"))
    if plan.workload.kind == "dpo":
        out += [
            (*k("pref_beta", 0.1), "TRL's DPO beta"),
            (*k("pref_loss", "sigmoid"), "dpo (a reference model: adapters off under LoRA, a copy otherwise)"),
        ]
    if plan.zero_stage:
        out.append((*k("zero_stage", ds_name(plan)), f"ZeRO-{plan.zero_stage}, written beside this file"))
    return out


def oft(plan: Plan) -> bool:
    return bool(plan.lora_rank) and plan.lora_variant == "oft"


def lora_target(plan: Plan, model: ModelSpec) -> str:
    """`all`, or the plan's module names that are linears of this model (comma-separated); with --lora-ends the
    linears by name and embed_tokens / lm_head (`all` is taken only alone: v0.9.5 src/llamafactory/model/adapter.py:205-208)."""
    targets, ends = peft_target_modules(plan.lora_targets), end_modules(plan.lora_ends)
    if targets == "all-linear" and not ends:
        return "all"
    if targets == "all-linear":
        targets = linear_module_names(model)
    return ",".join(loaded(model).lora_names(targets) + ends)


def loaded(model: ModelSpec) -> checkpoints.Checkpoint:
    """The checkpoint LLaMA-Factory builds: transformers' classes (Framework.remote_code), so a model whose default id
    is a remote-code checkpoint is named by its native conversion (InternVL: the -hf ids its constants list)."""
    return checkpoints.for_framework(model, FRAMEWORKS["llamafactory"].remote_code)


def dataset_entries(plan: Plan, seq_len: int) -> list[Entry]:
    out: list[Entry] = [
        ("dataset", "YOUR_DATASET", "a name in data/dataset_info.json"),
        ("template", "YOUR_TEMPLATE", "your model's chat template (data/template.py)"),
        (*keys_of(plan)("seq_len", seq_len), "the plan's sequence length"),
    ]
    if plan.batching == "packed":
        if plan.attention == "flash" and plan.micro_batch == 1 and takes("neat_packing", plan.release):
            why = "packed rows, no attention across samples (FA2, one row per batch)"
            out.append((*keys_of(plan)("neat_packing", True), why))
        else:
            out.append((*keys_of(plan)("packing", True), "rows packed to cutoff_len"))
    return out + [("preprocessing_num_workers", 16, ""), ("dataloader_num_workers", 4, "")]


def writes_pixels(plan: Plan) -> bool:
    """Whether the plan's YAML takes the images' and the videos' caps (writer_media; planner.export.launch asks)."""
    return line_writes_pixels(plan.release)


writes_video = writes_pixels


def output_entries(plan: Plan, model: ModelSpec) -> list[Entry]:
    kind = "lora" if plan.lora_rank else "full"
    return [
        ("output_dir", f"saves/{model.name}/{kind}/{plan.workload.kind}", "where checkpoints go"),
        ("logging_steps", 10, ""),
        ("save_steps", 500, ""),
        ("plot_loss", True, ""),
        ("overwrite_output_dir", True, ""),
        ("report_to", "none", ""),
    ]


def train_entries(plan: Plan) -> list[Entry]:
    lr = LEARNING_RATE["dpo" if plan.workload.kind in ("dpo", "kto") else "lora" if plan.lora_rank else "full"]
    out: list[Entry] = [
        (*keys_of(plan)("micro_batch", plan.micro_batch), ""),
        (*keys_of(plan)("grad_accum", plan.grad_accum), ""),
        *([(*keys_of(plan)("eval_batch", plan.eval_batch), "")] if plan.eval_batch else []),
        ("learning_rate", lr, ""),
        ("num_train_epochs", 3.0, ""),
        ("lr_scheduler_type", "cosine", ""),
        ("warmup_ratio", 0.1, ""),
    ]
    out += matrix_optimizer_entries(plan) or [(*keys_of(plan)("optimizer", export.HF_OPTIM[plan.optimizer]), "")]
    out += precision_entries(plan)
    return out + [("ddp_timeout", 180000000, "")]


def precision_entries(plan: Plan) -> list[Entry]:
    """bf16 / fp16: autocast over fp32 trainable weights (LF upcasts them, model/adapter.py:313-325); bf16-pure: LF's
    pure_bf16 (weights kept in bf16, no autocast); fp32: neither."""
    if plan.precision == "bf16-pure":
        return [(*keys_of(plan)("pure_bf16", True), "bf16 weights, no autocast"), (*keys_of(plan)("bf16", False), "")]
    return [
        (*keys_of(plan)("bf16", plan.precision == "bf16"), ""),
        (*keys_of(plan)("fp16", plan.precision == "fp16"), ""),
    ]
