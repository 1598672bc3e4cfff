"""LLaMA-Factory's freeze tuning on a real transformers model: a model built from `config` in bf16 (LF loads in the
compute dtype), then LLaMA-Factory's own _setup_freeze_tuning (0.9.5 src/llamafactory/model/adapter.py:57-138) with
the trainable parameters upcast to fp32 (cast_trainable_params_to_fp32: bf16 without pure_bf16, :316-325).
`python probes/lf_freeze.py CONFIG_JSON N` under LLaMA-Factory's venv prints {parameter: [dtype, trained]} as JSON
(tests/probes/test_freeze.py compares it with recipe.model's build for --trained-layers N)."""

from __future__ import annotations

import json
import sys


def parameters(config: dict, n: int) -> dict[str, list]:
    import torch
    from llamafactory.hparams import FinetuningArguments
    from llamafactory.model.adapter import _setup_freeze_tuning
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.bfloat16)
    args = FinetuningArguments(finetuning_type="freeze", freeze_trainable_layers=n)
    _setup_freeze_tuning(model, args, is_trainable=True, cast_trainable_params_to_fp32=True)
    return {name: [str(p.dtype).removeprefix("torch."), p.requires_grad] for name, p in model.named_parameters()}


if __name__ == "__main__":
    print(json.dumps(parameters(json.loads(sys.argv[1]), int(sys.argv[2]))))
