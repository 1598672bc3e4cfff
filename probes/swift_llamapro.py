"""ms-swift's LLaMA-Pro on a real transformers model: a model built from `config` on the meta device in bf16 (the
--torch_dtype it loads in), every parameter frozen as its tuner pipeline freezes an adapter's base (4.6.0
swift/pipelines/train/tuner.py:378-382), then ms-swift's own Swift.prepare_model with LLaMAProConfig (tuner.py:271-276;
swift/tuners/llamapro.py:46-131, the new blocks trainable through its mark_trainable_callback, swift/tuners/base.py:
102-105). `python probes/swift_llamapro.py CONFIG_JSON N` under ms-swift's venv prints {"layers", "trained",
"frozen", "trained_ids"} as JSON (tests/probes/test_freeze.py compares them with planner.estimate.trained)."""

from __future__ import annotations

import json
import re
import sys


def counts(config: dict, n: int) -> dict:
    import torch
    from swift.model.model_arch import ModelArch  # tuner.py:274-277 passes model_meta.model_arch.arch_name
    from swift.tuners import Swift
    from swift.tuners.llamapro import LLaMAProConfig
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.bfloat16)
        model.requires_grad_(False)
        model = Swift.prepare_model(model, LLaMAProConfig(model_type=ModelArch.llama, num_new_blocks=n))
    params = list(model.named_parameters())
    ids = sorted(
        {int(m.group(1)) for name, p in params if p.requires_grad for m in [re.search(r"\.(\d+)\.", name)] if m}
    )
    return {
        "layers": model.config.num_hidden_layers,
        "trained": sum(p.numel() for _, p in params if p.requires_grad),
        "frozen": sum(p.numel() for _, p in params if not p.requires_grad),
        "trained_ids": ids,
        "dtypes": sorted({str(p.dtype).removeprefix("torch.") for _, p in params}),
    }


if __name__ == "__main__":
    print(json.dumps(counts(json.loads(sys.argv[1]), int(sys.argv[2]))))
