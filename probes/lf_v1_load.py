"""What LLaMA-Factory 0.9.5's v1 trainer loads onto each rank's device before FSDP2 shards it, under its default
init_config (init_on_default: from_pretrained(device_map=the rank's device, dtype "auto"), a full fine-tune cast to
fp32, LoRA's base kept in the checkpoint's dtype; src/llamafactory/v1/core/model_engine.py:110-180), run in
LLaMA-Factory's venv on a tiny Qwen2 saved in bf16. `python probes/lf_v1_load.py` prints, for full fine-tuning and
LoRA (rank 8 on all linears, peft_config's defaults), the parameters' bytes of the model ModelEngine._init_model
returns, their dtypes and device, and the config, as JSON."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

CONFIG = {
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": False,
}


def loaded(path: str, peft: dict | None) -> dict:
    from llamafactory.v1.config.model_args import ModelArguments
    from llamafactory.v1.core.model_engine import ModelEngine
    from transformers import AutoConfig

    engine = ModelEngine.__new__(ModelEngine)  # _init_model alone: no tokenizer or renderer for the tiny model
    engine.args = ModelArguments(model=path, peft_config=peft)
    engine.is_train = True
    engine.model_config = AutoConfig.from_pretrained(path)
    engine._deepspeed_zero3_enabled = False
    model = engine._init_model()
    params = list(model.parameters())
    return {
        "bytes": sum(p.numel() * p.element_size() for p in params),
        "dtypes": sorted({str(p.dtype) for p in params}),
        "device": str(params[0].device),
        "init": model._init_mode,
    }


if __name__ == "__main__":
    from transformers import AutoModelForCausalLM, Qwen2Config

    folder = tempfile.mkdtemp()
    cfg = Qwen2Config(**CONFIG, torch_dtype="bfloat16")
    AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(folder)
    out = {"full": loaded(folder, None), "lora": loaded(folder, {"name": "lora", "r": 8, "target_modules": "all"})}
    saved = json.loads((Path(folder) / "config.json").read_text())  # what the test's plan reads back
    print(json.dumps({**out, "config": saved}))
