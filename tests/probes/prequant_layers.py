"""A tiny Llama quantized with compressed-tensors' or hqq's own API, saved, loaded back through transformers,
wrapped in a PEFT LoRA adapter and trained two steps on CPU: the bytes the quantized linears hold after loading,
after each step, and the peak a quantized linear's forward allocates beyond its output (probes.tracker.LiveBytes).
Run by tests/probes/test_prequant.py with a python that has compressed-tensors or hqq importable
(usage: prequant_layers.py ct|hqq; prints one JSON line)."""

import json
import sys
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from probes.tracker import LiveBytes

DTYPE = torch.bfloat16
CFG = {"hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 2, "num_attention_heads": 4}
TOKENS = 64


def tiny() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=512, num_key_value_heads=2, **CFG)).to(DTYPE)


def ct_checkpoint(path: str) -> None:
    """llm-compressor's W4A16 (4-bit int, symmetric, groups of 128, lm_head left out), packed (`pack-quantized`)."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        QuantizationScheme,
        apply_quantization_config,
    )
    from compressed_tensors.quantization.utils import calculate_qparams

    model = tiny()
    args = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=128)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"], format="pack-quantized")
    apply_quantization_config(model, config)
    for m in model.modules():
        if hasattr(m, "weight_scale"):
            groups = m.weight.detach().view(m.weight.shape[0], -1, 128)
            scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
            m.weight_scale.data.copy_(scale.view_as(m.weight_scale))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.data.copy_(zero.view_as(m.weight_zero_point))
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="pack-quantized")
    compressor.compress_model(model)
    model.save_pretrained(path)
    compressor.update_config(path)


def load(mode: str, path: str):
    if mode == "ct":
        ct_checkpoint(path)
        return AutoModelForCausalLM.from_pretrained(path, dtype=DTYPE)
    from transformers import HqqConfig

    tiny().save_pretrained(path)
    quant = HqqConfig(nbits=4, group_size=64)  # transformers' defaults: axis 1
    return AutoModelForCausalLM.from_pretrained(path, dtype=DTYPE, quantization_config=quant, device_map="cpu")


def is_quantized(m: torch.nn.Module) -> bool:
    return type(m).__name__ in ("CompressedLinear", "HQQLinear") or hasattr(m, "quantization_scheme")


def module_tensors(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A quantized linear's own tensors: parameters, buffers and, for HQQLinear, the tensors of its meta dict."""
    out = dict(m.named_parameters(recurse=False)) | dict(m.named_buffers(recurse=False))
    for key, value in (getattr(m, "meta", None) or {}).items():
        if isinstance(value, torch.Tensor):
            out[f"meta.{key}"] = value
    return {k: v for k, v in out.items() if v is not None}


def quantized_bytes(model) -> dict[str, int]:
    """Bytes of the quantized linears' tensors, by tensor name (weight_packed, weight, W_q, meta.scale, ...)."""
    out: dict[str, int] = {}
    for m in model.modules():
        if is_quantized(m) and not type(m).__name__.startswith("Lora"):
            for name, t in module_tensors(m).items():
                key = f"{name}:{str(t.dtype).removeprefix('torch.')}"
                out[key] = out.get(key, 0) + t.numel() * t.element_size()
    return out


def step(model, ids) -> None:
    """One forward and backward under bf16 autocast, as the Trainer runs with bf16=True (transformers 4.57 builds
    HQQLinear in fp32 whatever dtype is asked: quantizers/quantizer_hqq.py:74-79, create_quantized_param gets none)."""
    with torch.autocast("cpu", dtype=DTYPE):
        model(input_ids=ids, labels=ids).loss.backward()


def transient_bytes(model, layer: int) -> dict:
    """The peak one quantized linear's forward (a layer's MLP down_proj) allocates beyond its output."""
    layer = next(m for n, m in model.named_modules() if n.endswith(f"layers.{layer}.mlp.down_proj.base_layer"))
    x = torch.randn(1, TOKENS, layer.in_features, dtype=DTYPE, requires_grad=True)
    with LiveBytes() as t, torch.autocast("cpu", dtype=DTYPE):
        y = layer(x)
        out = y.numel() * y.element_size()
    return {"peak": t.peak, "output": out, "shape": [layer.out_features, layer.in_features]}


def saved_tensors(model) -> list[dict]:
    """What one quantized linear's forward saves for backward (a layer's MLP down_proj, input requiring grad)."""
    layer = next(m for n, m in model.named_modules() if n.endswith("layers.0.mlp.down_proj.base_layer"))
    x = torch.randn(1, TOKENS, layer.in_features, dtype=DTYPE, requires_grad=True)
    stored = [*layer.parameters(), *layer.buffers()]
    saved = []

    def pack(t):  # is_stored: the layer's own tensor object (its memory counted with the base, not anew)
        saved.append({"bytes": t.nbytes, "is_input": t is x, "is_stored": any(t is w for w in stored)})
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=DTYPE):
        layer(x).sum().backward()
    return saved


def main(mode: str) -> None:
    with tempfile.TemporaryDirectory() as path:
        model = load(mode, path)
    shapes = [
        [m.out_features, m.in_features] for n, m in model.named_modules() if is_quantized(m) and "lm_head" not in n
    ]
    lora = LoraConfig(r=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, lora)
    ids = torch.randint(0, 512, (1, TOKENS))
    loaded = quantized_bytes(model)
    first_forward = transient_bytes(model, 1)  # compressed-tensors: the forward that decompresses
    step(model, ids)
    first = quantized_bytes(model)
    step(model, ids)
    second = quantized_bytes(model)
    result = {"linears": shapes, "loaded": loaded, "after_step1": first, "after_step2": second}
    result["transient"] = {"first": first_forward, "later": transient_bytes(model, 0)}
    result["saved"] = saved_tensors(model)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
