"""A tiny AWQ checkpoint of a Qwen3-MoE (one packed GEMM linear an expert, as AutoAWQ and llm-compressor write an MoE;
zero weights: loading, not values, is measured) loaded by the transformers of the venv that runs this (gptqmodel's:
transformers 5.23, gptqmodel 7.7.0) on CPU. Prints one JSON line: the classes and dtypes of the first layer's
attention and MLP modules, and from_pretrained's missing and unexpected keys. gptqmodel's post-init (its kernels'
buffers) is skipped: the modules are built and the weights loaded before it."""

import json
import os
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.quantizers import quantizer_awq

G, H, E = 128, 128, 4  # group size, hidden and expert width, experts


def packed(prefix: str, out: int, inp: int) -> dict:
    """AWQ GEMM's tensors of one linear: qweight [in, out/8], qzeros [in/g, out/8], fp16 scales [in/g, out]."""
    return {
        f"{prefix}.qweight": torch.zeros(inp, out // 8, dtype=torch.int32),
        f"{prefix}.qzeros": torch.zeros(inp // G, out // 8, dtype=torch.int32),
        f"{prefix}.scales": torch.ones(inp // G, out, dtype=torch.float16),
    }


def checkpoint(path: str) -> None:
    cfg = AutoConfig.for_model(
        "qwen3_moe",
        hidden_size=H,
        intermediate_size=2 * H,
        moe_intermediate_size=H,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=E,
        num_experts_per_tok=2,
        vocab_size=256,
    )
    cfg.quantization_config = {"quant_method": "awq", "bits": 4, "group_size": G, "zero_point": True, "version": "gemm"}
    cfg.save_pretrained(path)
    half, p = torch.float16, "model.layers.0"
    sd = {
        "model.embed_tokens.weight": torch.zeros(256, H, dtype=half),
        "lm_head.weight": torch.zeros(256, H, dtype=half),
    }
    for name, n in (
        ("model.norm", H),
        (f"{p}.input_layernorm", H),
        (f"{p}.post_attention_layernorm", H),
        (f"{p}.self_attn.q_norm", 32),
        (f"{p}.self_attn.k_norm", 32),
    ):
        sd[f"{name}.weight"] = torch.ones(n, dtype=half)
    sd[f"{p}.mlp.gate.weight"] = torch.zeros(E, H, dtype=half)
    for name, out in (("q_proj", H), ("k_proj", 64), ("v_proj", 64), ("o_proj", H)):
        sd.update(packed(f"{p}.self_attn.{name}", out, H))
    for e in range(E):
        for name in ("gate_proj", "up_proj", "down_proj"):
            sd.update(packed(f"{p}.mlp.experts.{e}.{name}", H, H))
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def main() -> None:
    quantizer_awq.AwqQuantizer._process_model_after_weight_loading = lambda self, model, **kw: model
    with tempfile.TemporaryDirectory() as path:
        checkpoint(path)
        m, info = AutoModelForCausalLM.from_pretrained(
            path, device_map="cpu", dtype=torch.float16, output_loading_info=True
        )
    layer = m.model.layers[0]
    mlp = {
        n: [type(layer.mlp.get_submodule(n.rpartition(".")[0])).__name__, str(t.dtype), list(t.shape)]
        for n, t in layer.mlp.named_parameters()
    }
    attn = {n: type(mod).__name__ for n, mod in layer.self_attn.named_children()}
    print(
        json.dumps(
            {
                "mlp": mlp,
                "attn": attn,
                "missing": sorted(info["missing_keys"]),
                "unexpected": sorted(info["unexpected_keys"]),
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
