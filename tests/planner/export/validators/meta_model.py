"""The model an export names, built on the meta device as its framework builds it, with the export's FSDP wrap
classes and LoRA targets applied: a class accelerate cannot find or a target PEFT matches nowhere fails the file.

Imported by the validator scripts (each framework's venv). `check_names(model_id, trust_remote_code, fsdp, wrap, targets)`:
1. the model: a Hub id with a folder in tests/data/checkpoints ships its own modeling code (config.json auto_map):
   without trust_remote_code it is refused as transformers refuses it, with it the module tree of that code is built
   (tests/data/checkpoints/SOURCES.md); any other id is a catalog model (planner/model/catalog/hf_ids.json), built from
   its bundled config by transformers' own classes (AutoModelForImageTextToText for a VLM, else
   AutoModelForCausalLM), two layers a stack;
2. the wrap classes: the written transformer_layer_cls_to_wrap, else the model's _no_split_modules (what accelerate
   1.x wraps without a list, accelerate/utils/fsdp_utils.py:942-953), each looked up with accelerate's own
   get_module_class_from_name; a miss raises accelerate's "Could not find the transformer layer class";
3. the LoRA targets (a list of names; all-linear / all are the framework's own search and are skipped): each must
   match at least one module under PEFT's own matcher (peft.tuners.tuners_utils.check_target_module_exists);
4. `modules`: module paths the framework itself looks up (ms-swift's model_arch: the language model, tower and
   aligner it freezes and keeps LoRA off) must be modules of the model."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
CATALOG = ROOT / "planner" / "model" / "catalog"
REMOTE = ROOT / "tests" / "data" / "checkpoints"
SEARCHED = ("all-linear", "all")


def small(cfg: dict) -> dict:
    """The catalog config with two layers in each stack, one of each kind where a stack mixes kinds (names and
    classes do not depend on the depth)."""
    cfg = json.loads(json.dumps(cfg))
    for part in (cfg, cfg.get("text_config"), cfg.get("vision_config")):
        if not isinstance(part, dict):
            continue
        for key in ("num_hidden_layers", "depth"):
            if key in part:
                part[key] = 2
        if "fullatt_block_indexes" in part:
            part["fullatt_block_indexes"] = [1]
        if "deepstack_visual_indexes" in part:
            part["deepstack_visual_indexes"] = [0, 1]
        if "num_global_layers" in part:  # Llama-3.2-Vision: one gated layer, one cross-attention decoder layer
            part["num_global_layers"] = 1
        if "cross_attention_layers" in part:
            part["cross_attention_layers"] = [1]
        if part.get("first_k_dense_replace", 0) > 1:  # DeepSeek: keep one routed layer among the two
            part["first_k_dense_replace"] = 1
        if "layer_types" in part:  # a hybrid stack (Qwen3.5's linear and full attention): one layer of each kind
            kinds = list(dict.fromkeys(part["layer_types"]))
            part["layer_types"] = (kinds * 2)[:2] if len(kinds) < 2 else kinds
            part["num_hidden_layers"] = len(part["layer_types"])
        elif "full_attention_interval" in part:  # Qwen3-Next: every 4th layer full; with two, the second
            part["full_attention_interval"] = 2
    return cfg


def remote_model(folder: Path):
    cfg = json.loads((folder / "config.json").read_text())
    spec = importlib.util.spec_from_file_location("internvl_chat", REMOTE / "internvl_chat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(cfg)


def build(model_id: str, trust_remote_code: bool):
    import torch
    import transformers

    folder = REMOTE / model_id
    if (folder / "config.json").is_file():
        if not trust_remote_code:
            raise ValueError(
                f"{model_id} ships its own modeling code (config.json auto_map): transformers loads it only with "
                "trust_remote_code=True"
            )
        with torch.device("meta"):
            return remote_model(folder)
    ids = json.loads((CATALOG / "hf_ids.json").read_text())["models"]
    if model_id not in ids:
        raise ValueError(f"{model_id}: not a catalog id (planner/model/catalog/hf_ids.json) nor a remote-code one")
    cfg = small(json.loads((CATALOG / "models" / f"{ids[model_id]}.json").read_text()))
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    auto = transformers.AutoModelForImageTextToText if "vision_config" in cfg else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        return auto.from_config(conf)


def check_wrap(model, wrap: list[str] | None) -> list[str]:
    from accelerate.utils.dataclasses import get_module_class_from_name

    names = list(wrap) if wrap else list(getattr(model, "_no_split_modules", None) or [])
    for name in names:
        if get_module_class_from_name(model, name) is None:
            raise ValueError(f"Could not find the transformer layer class {name} in the model.")
    return names


def check_targets(model, targets: list[str] | None) -> list[str]:
    if not targets or targets in SEARCHED or list(targets) in ([t] for t in SEARCHED):
        return []  # no PEFT needed (the TRL venvs hold none: their full plans name no targets)
    from peft import LoraConfig
    from peft.tuners.tuners_utils import check_target_module_exists

    modules = [n for n, _ in model.named_modules() if n]
    for t in targets:
        if t in SEARCHED:  # ms-swift expands all-linear beside other names (v4.5.2 pipelines/train/tuner.py:97-110)
            continue
        cfg = LoraConfig(r=8, target_modules=[t])
        if not any(check_target_module_exists(cfg, n) for n in modules):
            raise ValueError(f"LoRA target {t!r} matches no module of the model")
    return list(targets)


def check_modules(model, modules: list[str]) -> list[str]:
    names = {n for n, _ in model.named_modules()}
    missing = [m for m in modules if m not in names]
    if missing:
        raise ValueError(
            f"modules {missing} are not in the model (its top modules: {sorted(dict(model.named_children()))})"
        )
    return modules


def check_names(
    model_id: str,
    trust_remote_code: bool,
    fsdp: bool,
    wrap: list[str] | None,
    targets: list[str] | None,
    modules: list[str] = (),
) -> str:
    """Build the model and check the written names on it (the wrap classes under FSDP only; `modules`: module paths
    that must exist, such as the tower a framework freezes); a one-line summary."""
    model = build(model_id, trust_remote_code)
    wrapped = check_wrap(model, wrap) if fsdp else []
    adapted = check_targets(model, targets)
    found = check_modules(model, list(modules))
    return f"{type(model).__name__} wraps {','.join(wrapped) or '-'} lora {','.join(adapted) or '-'}" + (
        f" modules {','.join(found)}" if found else ""
    )
