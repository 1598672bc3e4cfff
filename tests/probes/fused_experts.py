"""Tiny MoE models built from config at the transformers of the venv that runs this (argv: bitsandbytes formats to
load them in, "" none): per family, the weights of the decoder layers held by nn.Linear modules (what a quantizer
that replaces nn.Linear quantizes) and by other modules, and, loaded in each format, the bytes each kind of module
keeps. Prints one JSON line; tests/probes/test_fused_experts.py reads it."""

import json
import sys
import tempfile

BASE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "head_dim": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "num_experts_per_tok": 2,
}
DEEPSEEK = {"n_routed_experts": 8, "n_shared_experts": 1, "first_k_dense_replace": 0, "n_group": 1, "topk_group": 1}
MLA = {"kv_lora_rank": 16, "q_lora_rank": None, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16}
FAMILIES = {
    "qwen3_moe": {"num_experts": 8},
    "qwen2_moe": {"num_experts": 8, "shared_expert_intermediate_size": 64},
    "mixtral": {"num_local_experts": 4},
    "olmoe": {"num_experts": 8},
    "deepseek_v3": {**DEEPSEEK, **MLA},
    "glm4_moe": DEEPSEEK,
    "gpt_oss": {"num_local_experts": 4, "layer_types": ["full_attention"] * 2},
}
LOADED = ("qwen3_moe", "qwen2_moe", "mixtral")  # the ones loaded through bitsandbytes


def config(mt: str) -> dict:
    return {"model_type": mt, **BASE, **FAMILIES[mt]}


def layout(model) -> dict:
    """Weights (numel) of the decoder layers under a plain nn.Linear and under other modules (two or more dims)."""
    from torch import nn

    out = {"linear": 0, "other": 0}
    for name, module in model.model.layers.named_modules():
        for p in module.parameters(recurse=False):
            if type(module) is nn.Linear and p.dim() == 2:
                out["linear"] += p.numel()
            elif p.dim() >= 2:
                out["other"] += p.numel()
    return out


def loaded(path: str, fmt: str) -> dict:
    """Bytes of the decoder layers' parameters loaded in `fmt`: quantized linears' weights (with their quant state),
    and the dense 2-D+ parameters of other modules."""
    import bitsandbytes as bnb
    import torch
    from torch import nn
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    qc = (
        BitsAndBytesConfig(load_in_8bit=True)
        if fmt == "int8"
        else BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True)
    )
    m = AutoModelForCausalLM.from_pretrained(path, quantization_config=qc, dtype=torch.bfloat16, device_map="cpu")
    out = {"quantized_weights": 0, "dense_bytes": 0, "dense_dtype": []}
    for module in m.model.layers.modules():
        if isinstance(module, (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt)):
            out["quantized_weights"] += module.in_features * module.out_features
        elif not isinstance(module, nn.Linear):
            for p in module.parameters(recurse=False):
                if p.dim() >= 2:
                    out["dense_bytes"] += p.numel() * p.element_size()
                    out["dense_dtype"] = sorted({*out["dense_dtype"], str(p.dtype)})
    return out


def main() -> None:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    out = {"transformers": transformers.__version__, "families": {}}
    for mt in FAMILIES:
        c = config(mt)
        torch.manual_seed(0)
        m = AutoModelForCausalLM.from_config(AutoConfig.for_model(c.pop("model_type"), **c), dtype=torch.bfloat16)
        row = out["families"][mt] = {"layout": layout(m)}
        if mt in LOADED and sys.argv[1:] != [""]:
            with tempfile.TemporaryDirectory() as path:
                m.save_pretrained(path)
                row.update({fmt: loaded(path, fmt) for fmt in sys.argv[1:]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
