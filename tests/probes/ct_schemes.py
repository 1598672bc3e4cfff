"""compressed-tensors' schemes (llm-compressor's presets W4A16 at groups of 32, 64 and 128, W4A16_ASYM, W8A16,
FP8_DYNAMIC and FP8_BLOCK; W4A16 and W8A16 in 128 x 128 blocks, FP8 weights alone a row or a block) on a tiny Llama:
each quantized with compressed-tensors' own API and compressed in its format by ModelCompressor, saved, loaded back
through transformers (run compressed), wrapped in a PEFT LoRA adapter and trained one step on CPU. Prints one JSON
line: per scheme, the quantized linears' shapes and the bytes of their tensors as saved (safetensors), as loaded and
after the step, by tensor name and dtype. PEFT 0.17.1 gives an fp8 base's adapter the float8 dtype; the schemes
named in UPCAST are stepped as PEFT >= 0.19 runs them, with that adapter upcast to fp32 (0.19.0
tuners/tuners_utils.py:2166-2190 _cast_adapter_dtype; the same bytes measured with PEFT 0.19.1 itself).
Run by tests/probes/test_ct_schemes.py and test_ct_fp8.py with the python MEMPLAN_PREQUANT_PYTHON names
(usage: ct_schemes.py [scheme ...]; none: the schemes test_ct_schemes.py reads, and the MoE)."""

import json
import sys
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from prequant_layers import (  # this folder's, on sys.path
    DTYPE,
    TOKENS,
    is_quantized,
    quantized_bytes,
    saved_tensors,
    step,
    tiny,
    transient_bytes,
)
from safetensors import safe_open
from transformers import AutoModelForCausalLM

BLOCK = {"strategy": "block", "block_structure": [128, 128], "group_size": None}
FP8_WEIGHTS = {"num_bits": 8, "type": "float", "strategy": "channel", "group_size": None}
# name: (preset, group_size or None, format[, the preset's weights changed])
SCHEMES = {
    "w4a16-g32": ("W4A16", 32, "pack-quantized"),
    "w4a16-g64": ("W4A16", 64, "pack-quantized"),
    "w4a16-g128": ("W4A16", 128, "pack-quantized"),
    "w4a16-asym-g128": ("W4A16_ASYM", 128, "pack-quantized"),
    "w8a16": ("W8A16", None, "pack-quantized"),
    "w8a16-int": ("W8A16", None, "int-quantized"),
    "fp8-dynamic": ("FP8_DYNAMIC", None, "float-quantized"),
}
MORE = {  # test_ct_fp8.py's (sweep tier)
    "w4a16-block": ("W4A16", None, "pack-quantized", BLOCK),
    "w8a16-block": ("W8A16", None, "pack-quantized", BLOCK),
    "fp8": ("W8A16", None, "float-quantized", FP8_WEIGHTS),
    "fp8-block": ("W8A16", None, "float-quantized", {**FP8_WEIGHTS, **BLOCK}),
    "fp8-block-dynamic": ("FP8_BLOCK", None, "float-quantized"),
    "fp8-dynamic-peft19": ("FP8_DYNAMIC", None, "float-quantized"),
    "w8a8-int": ("W8A8", None, "int-quantized"),  # int8 weights a row, int8 activations a token (dynamic)
}
UPCAST = ("fp8", "fp8-block", "fp8-block-dynamic", "fp8-dynamic-peft19")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def calibrate(model, args) -> None:
    """Each quantized linear's scales (and zero points) from its weight's min and max, per channel or group."""
    from compressed_tensors.quantization.utils import calculate_qparams

    for m in model.modules():
        if not hasattr(m, "weight_scale"):
            continue
        w = m.weight.detach()
        if args.strategy == "block":  # one scale a block of rows x cols
            rows, cols = args.block_structure
            groups = w.view(w.shape[0] // rows, rows, -1, cols).transpose(1, 2).flatten(2)
        else:
            cols = args.group_size if args.strategy == "group" else w.shape[1]
            groups = w.view(w.shape[0], -1, cols)
        scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
        m.weight_scale.data.copy_(scale.view_as(m.weight_scale))
        if hasattr(m, "weight_zero_point"):
            m.weight_zero_point.data.copy_(zero.view_as(m.weight_zero_point))


def checkpoint(path: str, preset: str, group: int | None, fmt: str, model=None, weights: dict | None = None) -> None:
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        apply_quantization_config,
        preset_name_to_scheme,
    )

    model = model or tiny()
    scheme = preset_name_to_scheme(preset, ["Linear"])
    if group:
        scheme.weights.group_size = group
    if weights:
        scheme.weights = QuantizationArgs.model_validate({**scheme.weights.model_dump(), **weights})
    ignore = ["lm_head", "re:.*mlp.gate$"]  # the head and an MoE's router, as llm-compressor's MoE examples leave them
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=ignore, format=fmt)
    apply_quantization_config(model, config)
    calibrate(model, scheme.weights)
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=fmt)
    compressor.compress_model(model)
    model.save_pretrained(path)
    compressor.update_config(path)


def saved_bytes(path: str) -> dict[str, int]:
    """The checkpoint's tensors of the decoder linears, by tensor name and dtype."""
    out: dict[str, int] = {}
    with safe_open(str(Path(path, "model.safetensors")), "pt") as f:
        for key in f.keys():  # noqa: SIM118 (safe_open is no dict)
            if ".layers." in key and any(f".{t}." in key for t in TARGETS):
                t = f.get_tensor(key)
                name = f"{key.rsplit('.', 1)[1]}:{str(t.dtype).removeprefix('torch.')}"
                out[name] = out.get(name, 0) + t.numel() * t.element_size()
    return out


def upcast_float8_adapter(model) -> None:
    """PEFT >= 0.19's _cast_adapter_dtype (0.19.0 tuners/tuners_utils.py:2166-2190): a float8 adapter to fp32."""
    for name, p in model.named_parameters():
        if "lora_" in name and p.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            p.data = p.data.to(torch.float32)


def without_grad(model) -> list[str]:
    """The adapted linears (q_proj, ...) whose LoRA B got no gradient in some layer."""
    out = {n.split(".")[-4] for n, p in model.named_parameters() if "lora_B" in n and not (p.grad is not None and
           p.grad.float().abs().sum() > 0)}  # fmt: skip
    return sorted(out)


def input_reaches_output(model) -> bool:
    """Whether a quantized linear's output requires grad when its input does (its weight is frozen)."""
    layer = next(m for n, m in model.named_modules() if n.endswith("layers.0.mlp.down_proj.base_layer"))
    x = torch.randn(1, TOKENS, layer.in_features, dtype=DTYPE, requires_grad=True)
    with torch.autocast("cpu", dtype=DTYPE):
        return layer(x).requires_grad


def measure(preset: str, group: int | None, fmt: str, weights: dict | None = None, upcast: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as path:
        checkpoint(path, preset, group, fmt, weights=weights)
        saved = saved_bytes(path)
        qc = json.loads(Path(path, "config.json").read_text())["quantization_config"]
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPE)
    shapes = [[m.out_features, m.in_features] for n, m in model.named_modules() if is_quantized(m) and "lm_" not in n]
    model = get_peft_model(model, LoraConfig(r=8, target_modules=TARGETS))
    loaded = quantized_bytes(model)
    lora = {str(p.dtype).removeprefix("torch.") for n, p in model.named_parameters() if "lora_" in n}
    if upcast:
        upcast_float8_adapter(model)
    try:
        step(model, torch.randint(0, 512, (1, TOKENS)))
    except ValueError as e:  # compressed-tensors 0.12.2 cannot decompress packed zero points
        return {"qc": qc, "linears": shapes, "saved": saved, "loaded": loaded, "error": str(e)}
    trained = [p for n, p in model.named_parameters() if "lora_B" in n]
    missing = without_grad(model)
    try:
        torch.optim.AdamW(trained).step()
        optimizer = None
    except (RuntimeError, NotImplementedError) as e:  # an fp8 adapter: AdamW has no fp8 kernels
        optimizer = str(e)
    after = quantized_bytes(model)
    if optimizer or missing:  # whether a quantized linear's output depends on its input for autograd
        forward = {"output_requires_grad": input_reaches_output(model)}
    else:
        forward = {"transient": transient_bytes(model, 0), "saved_for_backward": saved_tensors(model)}
    return {"qc": qc, "linears": shapes, "saved": saved, "loaded": loaded, "after_step": after,
            "lora_grads": not missing, "without_grad": missing, "lora_dtypes": sorted(lora),
            "optimizer_error": optimizer} | forward  # fmt: skip


def moe() -> dict:
    """A tiny Qwen3-MoE (8 experts a layer, 2 routed a token) in W4A16: how many expert linears hold a dense copy
    after a step over one token, then after one over 8 x TOKENS tokens (each CompressedLinear decompresses at its own
    first forward, which transformers 4.57 runs only for the experts routing reaches)."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(vocab_size=512, hidden_size=256, intermediate_size=768, moe_intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=8,
                         num_experts_per_tok=2, head_dim=64)  # fmt: skip
    with tempfile.TemporaryDirectory() as path:
        checkpoint(path, "W4A16", 128, "pack-quantized", Qwen3MoeForCausalLM(cfg).to(DTYPE))
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPE)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    experts = [m for n, m in model.named_modules() if ".experts." in n and type(m).__name__ == "CompressedLinear"]
    dense = []
    for tokens in (1, 8 * TOKENS):
        step(model, torch.randint(0, 512, (1, tokens)))
        dense.append(sum(isinstance(getattr(m, "weight", None), torch.Tensor) for m in experts))
    return {"expert_linears": len(experts), "dense_after": dense, "top_k": 2, "experts": 8, "layers": 2}


def main(names: list[str]) -> None:
    every = SCHEMES | MORE
    out = {name: measure(*every[name], upcast=name in UPCAST) for name in names or SCHEMES if name != "moe"}
    print(json.dumps(out | ({"moe": moe()} if not names or "moe" in names else {})))


if __name__ == "__main__":
    main(sys.argv[1:])
