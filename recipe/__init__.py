"""The HF training recipe that the probes and the bundled trainer share, so that what a probe measures is
what the trainer runs: half dtypes by precision, the transformers model from its config, the LoRA
adapters, and the optimizers as they run on CUDA."""
from __future__ import annotations

import copy

import torch

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16, "bf16-pure": torch.bfloat16}


def hf_config(cfg: dict, layers: int | None = None):
    """A transformers config from a config.json dict (cache off; optionally fewer decoder layers)."""
    import transformers

    cfg = copy.deepcopy(cfg)     # transformers rewrites nested dicts (rope_scaling) in place
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = False
    if layers is not None:
        config.get_text_config().num_hidden_layers = layers
    return config


def text_layers(cfg: dict) -> int:
    return hf_config(cfg).get_text_config().num_hidden_layers


def lora_config(rank: int):
    """The adapters of a LoRA plan: every linear layer, alpha 2r, no dropout (the probes and the bundled
    trainer train the same ones)."""
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear", lora_dropout=0.0)


def make_optimizer(params: list, optimizer: str, lr: float = 1e-5) -> torch.optim.Optimizer:
    """torch's optimizers as they run on CUDA: AdamW foreach (CUDA's default), fused on request
    (the probes and the bundled trainer)."""
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, foreach=True)
    if optimizer == "adamw-fused":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=True)
    if optimizer == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=lr, scale_parameter=False, relative_step=False)
    raise ValueError(f"optimizer {optimizer!r} needs bitsandbytes, which is not installed")
