"""A plan in its framework's own keys, flat (`key: value`), and what changes from one plan to another in those keys:
how `check --config` says the nearest settings that fit (`per_device_train_batch_size: 2`,
`gradient_accumulation_steps: 8`, `deepspeed: ds_z3_config.json`). Read off the very files planner.export.launch
writes, so the keys are the ones a user pastes."""

from __future__ import annotations

import json
import shlex

from planner.config.spec import Hardware, Plan
from planner.export import configs, export, launch
from planner.model.modelspec import ModelSpec

# not memory: left out of the settings
SKIPPED = {
    "output_dir",
    "dataset",
    "template",
    "datasets",
    "run_name",
    "logging_steps",
    "save_steps",
    "report_to",
    "learning_rate",
    "--learning_rate",
    "num_train_epochs",
    "--num_train_epochs",
    "warmup_ratio",
}
# what of a DeepSpeed JSON a user changes: the stage and where states live (the rest follows from the arguments)
DS_KEYS = (
    "zero_optimization.stage",
    "zero_optimization.offload_optimizer.device",
    "zero_optimization.offload_param.device",
)


def deepspeed_keys(ds: dict) -> dict[str, object]:
    f = flat(ds)
    return {f"deepspeed {k}": f[k] for k in DS_KEYS if k in f}


def flat(cfg: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif f"{prefix}{k}" not in SKIPPED:
            out[f"{prefix}{k}"] = v
    return out


def script_flags(text: str) -> dict[str, object]:
    """`--flag value` pairs of a shell script's command (continuations joined; env lines as NAME keys)."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    out: dict[str, object] = {}
    for i, w in enumerate(words):
        if w in SKIPPED:
            continue
        if w.startswith("--"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True
            out[w] = value
        elif "=" in w and w.split("=", 1)[0].isupper():
            out[w.split("=", 1)[0]] = w.split("=", 1)[1]
        elif "=" in w and "." in w.split("=", 1)[0]:  # a Hydra override (verl): key=value, +key=value
            out[w.split("=", 1)[0].lstrip("+")] = w.split("=", 1)[1]
    return out


def settings(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int) -> dict[str, object]:
    """The plan's settings as its framework's keys: the main config file of a LLaMA-Factory, ms-swift or axolotl
    plan (the DeepSpeed JSON as `deepspeed.*`); HF's TrainingArguments (and the DeepSpeed JSON) otherwise."""
    files = launch.files(plan, hw, model, seq_len) if launch.exporter(plan.framework) is not None else {}
    out: dict[str, object] = {}
    for name, text in files.items():
        if name.endswith((".yaml", ".yml")):
            import yaml  # here: a plan without YAML files imports no YAML parser

            out.update(flat(yaml.safe_load(text) or {}, "" if "accelerate" not in name else "accelerate."))
        elif name.endswith(".sh"):
            out.update(script_flags(text))
        elif name.endswith(".json"):
            cfg = json.loads(text)
            out.update(deepspeed_keys(cfg) if "fsdp_config" not in cfg else fsdp_keys(out, name, cfg))
    if not files:
        out.update(flat(export.hf_args(plan, model)))
        out.update(deepspeed_keys(configs.deepspeed_config(plan, model) or {}))
        out.update(flat(configs.peft_config(plan, model) or {}, "LoraConfig."))
        out.update(flat(configs.quantization_config(plan) or {}, configs.quantization_config_class(plan) + "."))
    return fsdp_checkpointing(out, plan)


FSDP_JSON = "fsdp json "  # the keys of a framework's FSDP file (ms-swift's --fsdp), as `deepspeed ` is DeepSpeed's


def fsdp_keys(out: dict[str, object], name: str, cfg: dict) -> dict[str, object]:
    """An FSDP JSON the launch material writes (ms-swift's --fsdp FILE) as its keys: `check` writes no file, so the key
    that names it says what the file holds instead of a name the user cannot find."""
    for k, v in out.items():
        if v == name:
            out[k] = f"(a JSON file of the '{FSDP_JSON.strip()}' keys)"
    return flat(cfg, FSDP_JSON)


def fsdp_checkpointing(out: dict[str, object], plan: Plan) -> dict[str, object]:
    """A framework's gradient_checkpointing is off where FSDP checkpoints itself (its activation_checkpointing, or a
    preset's): said so, since the plan checkpoints."""
    if plan.fsdp != "off" and plan.checkpointing == "full":
        for k in ("--gradient_checkpointing", "gradient_checkpointing"):
            if out.get(k) in (False, "false"):
                out[k] = "false (FSDP's own activation_checkpointing checkpoints)"
    return out


def changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """`key: value` for every key whose value `after` sets differently (or newly), in `after`'s order, then
    `key: (remove)` for each key `after` no longer sets."""
    out = [f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in after.items() if before.get(k) != v]
    return out + [f"{k}: (remove)" for k in before if k not in after and not k.startswith("deepspeed ")]
