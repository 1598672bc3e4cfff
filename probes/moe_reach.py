"""What a framework's "all linear" LoRA adapts in MoE decoders, with its own target finder and its own PEFT, run in
its venv: `python probes/moe_reach.py FRAMEWORK CONFIGS.json` builds each config (a config.json dict with its
model_type) on the meta device, asks the framework for its targets as its LoRA set-up does, applies PEFT, and prints
as JSON each model's trained parameters at rank 8 (LoRA dropout 0: PEFT's ParamWrapper refuses any other on the
stacked experts) and the PEFT and transformers it ran.

- llamafactory: lora_target all through find_all_linear_modules (v0.9.5 model/model_utils/misc.py:28), then its
  init_adapter (model/adapter.py:293) with FinetuningArguments(lora_target="all", lora_rank=8);
- ms-swift: find_all_linears through get_target_modules (4.6.0 swift/pipelines/train/tuner.py:107), then
  prepare_adapter (:174) with --target_modules all-linear;
- peft: PEFT's own LoraConfig(target_modules="all-linear") (verl 0.9.1 workers/config/model.py:126 and OpenRLHF
  0.11.2 cli/train_sft.py:260's default; memplan's trainer, hf and TRL pass the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import peft
import torch
import transformers


def build(config: dict):
    d = dict(config)
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("meta"):
        return cfg, transformers.AutoModelForCausalLM.from_config(cfg)


def llamafactory(cfg, model):
    from llamafactory.hparams import FinetuningArguments
    from llamafactory.model.adapter import init_adapter

    args = FinetuningArguments(finetuning_type="lora", lora_target="all", lora_rank=8, lora_dropout=0.0)
    keys = ("adapter_name_or_path", "use_unsloth", "use_kt", "resize_vocab", "quantization_bit")
    return init_adapter(cfg, model, NS(**dict.fromkeys(keys)), args, is_trainable=True)


def swift(cfg, model):
    import swift.model  # noqa: F401  (registers the model types)
    from swift.model.model_meta import get_matched_model_types
    from swift.model.register import MODEL_MAPPING
    from swift.pipelines.train.tuner import prepare_adapter

    types = get_matched_model_types(cfg.architectures or [type(model).__name__])
    model.model_meta = MODEL_MAPPING[types[0]] if types else NS(model_arch=None, is_multimodal=False)
    model.model_info = NS(is_moe_model=True, task_type="causal_lm")
    args = NS(
        target_modules=["all-linear"], freeze_llm=False, freeze_vit=True, freeze_aligner=True, modules_to_save=[],
        tuner_type="lora", use_swift_lora=False, tuner_backend="peft", target_parameters=None, lora_dtype=None,
        init_weights=True, lora_rank=8, lora_alpha=32, lora_dropout=0.0, lora_bias="none", use_rslora=False,
        use_dora=False, lorap_lr_ratio=None, task_type="causal_lm",
    )  # fmt: skip
    model.requires_grad_(False)
    return prepare_adapter(args, model, task_type="causal_lm")


def plain(cfg, model):
    return peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))


if __name__ == "__main__":
    apply = {"llamafactory": llamafactory, "ms-swift": swift, "peft": plain}[sys.argv[1]]
    configs = json.loads(Path(sys.argv[2]).read_text())
    out = {"peft": peft.__version__, "transformers": transformers.__version__, "trained": {}}
    for name, config in configs.items():
        adapted = apply(*build(config))
        out["trained"][name] = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    print(json.dumps(out))
