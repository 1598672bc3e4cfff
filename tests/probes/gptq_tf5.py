"""Tiny GPTQ 4-bit checkpoints (group 128, desc_act off, the `gptq` v1 packing AutoGPTQ and gptqmodel write; random
codes: loading and memory, not values, are measured) loaded by the transformers of the venv that runs this
(gptqmodel's: transformers 5.23, optimum 2.3.0, gptqmodel 7.7.0) on CPU with GPTQConfig(backend="auto_trainable"),
as memplan exports it. Prints one JSON line.

    python tests/probes/gptq_tf5.py llama|qwen3_moe

llama: each quantized linear's class, shape and tensors (buffers and other tensor attributes: bytes), after
model.train(); then, with a rank-8 LoRA beside every quantized linear (as PEFT's lora/gptq.py QuantLinear adds it: the
base's output plus lora_B(lora_A(x)) * scaling; PEFT is not in this venv), one bf16 forward and backward: what each
quantized linear saves for backward, and the peak its forward allocates beyond its output (probes.tracker.LiveBytes)
with a bf16 and an fp16 input. qwen3_moe: what loads (module classes, missing and unexpected keys)."""

import json
import os
import sys
import tempfile

os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM, GPTQConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probes.tracker import LiveBytes

G, TOKENS, RANK = 128, 64, 8
DIMS = {"hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4, "num_key_value_heads": 2}


def packed(prefix: str, out: int, inp: int) -> dict:
    """GPTQ v1's tensors of one linear: qweight [in/8, out], qzeros [in/g, out/8] (zero - 1 stored), fp16 scales
    [in/g, out], g_idx [in] (int32)."""
    return {
        f"{prefix}.qweight": torch.randint(-(2**31), 2**31 - 1, (inp // 8, out), dtype=torch.int32),
        f"{prefix}.qzeros": torch.full((inp // G, out // 8), 0x77777777, dtype=torch.int32),
        f"{prefix}.scales": torch.rand(inp // G, out, dtype=torch.float16) * 0.01,
        f"{prefix}.g_idx": torch.arange(inp, dtype=torch.int32) // G,
    }


def checkpoint(path: str, mt: str) -> None:
    """The config and a model.safetensors: every decoder linear packed (an MoE's experts one linear an expert, as
    gptqmodel writes them), the rest fp16."""
    extra = {"moe_intermediate_size": 256, "num_experts": 4, "num_experts_per_tok": 2} if mt == "qwen3_moe" else {}
    cfg = AutoConfig.for_model(mt, num_hidden_layers=2, vocab_size=512, head_dim=64, **DIMS, **extra)
    cfg.quantization_config = {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": False, "sym": True}
    cfg.save_pretrained(path)
    h, i, kv = 256, 768, 128
    sd = {"model.embed_tokens.weight": torch.zeros(512, h), "lm_head.weight": torch.zeros(512, h)}
    sd["model.norm.weight"] = torch.ones(h)
    for n in range(2):
        p = f"model.layers.{n}"
        for norm in ("input_layernorm", "post_attention_layernorm"):
            sd[f"{p}.{norm}.weight"] = torch.ones(h)
        for name, out, inp in (("q_proj", h, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, h)):
            sd.update(packed(f"{p}.self_attn.{name}", out, inp))
        if mt == "qwen3_moe":
            sd[f"{p}.self_attn.q_norm.weight"] = sd[f"{p}.self_attn.k_norm.weight"] = torch.ones(64)
            sd[f"{p}.mlp.gate.weight"] = torch.zeros(4, h)
            mlps = [f"{p}.mlp.experts.{e}" for e in range(4)]
            i = 256
        else:
            mlps = [f"{p}.mlp"]
        for mlp in mlps:
            for name, out, inp in (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)):
                sd.update(packed(f"{mlp}.{name}", out, inp))
    sd = {k: v.half() if v.is_floating_point() else v for k, v in sd.items()}
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def load(mt: str):
    quant = GPTQConfig(bits=4, group_size=G, backend="auto_trainable")
    with tempfile.TemporaryDirectory() as path:
        checkpoint(path, mt)
        return AutoModelForCausalLM.from_pretrained(
            path, device_map="cpu", dtype=torch.bfloat16, quantization_config=quant, output_loading_info=True
        )


def quantized(model) -> dict:
    return {n: m for n, m in model.named_modules() if hasattr(m, "qweight")}


def tensors(m) -> dict:
    """A quantized linear's own tensors, buffers and any other tensor attribute (qzeros_data_v1, ...), by storage."""
    out = dict(m.named_buffers(recurse=False)) | dict(m.named_parameters(recurse=False))
    out |= {k: v for k, v in vars(m).items() if isinstance(v, torch.Tensor)}
    seen, sizes = set(), {}
    for k, v in out.items():
        if v is not None and v.untyped_storage()._cdata not in seen:
            seen.add(v.untyped_storage()._cdata)
            sizes[k] = v.untyped_storage().nbytes()
    return sizes


def add_lora(model) -> None:
    """A rank-8 LoRA beside every quantized linear (lora_B zero-initialized, as PEFT's); the base frozen."""
    model.requires_grad_(False)
    for m in quantized(model).values():
        m.lora_A = torch.nn.Linear(m.in_features, RANK, bias=False, dtype=torch.bfloat16)
        m.lora_B = torch.nn.Linear(RANK, m.out_features, bias=False, dtype=torch.bfloat16)
        torch.nn.init.zeros_(m.lora_B.weight)
        m.register_forward_hook(lambda mod, args, out: out + mod.lora_B(mod.lora_A(args[0])) * 2.0)


def saved_by_linear(model, ids) -> dict:
    """What each quantized linear's own forward (the base, not its LoRA) saves for backward, in one training step."""
    current, saved = [None], {}
    for name, m in quantized(model).items():
        m.register_forward_pre_hook(lambda mod, args, name=name: current.__setitem__(0, name))
        m.lora_A.register_forward_pre_hook(lambda mod, args: current.__setitem__(0, None))

    def pack(t):
        if current[0] is not None:
            saved.setdefault(current[0], []).append({"shape": list(t.shape), "dtype": str(t.dtype), "bytes": t.nbytes})
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return saved


def transient(m, dtype) -> dict:
    """The peak one quantized linear's forward allocates beyond its output, input in `dtype`."""
    x = torch.randn(1, TOKENS, m.in_features, dtype=dtype)
    with LiveBytes() as t:
        y = m(x)
        out = y.numel() * y.element_size()
    return {"peak": t.peak, "output": out}


def torch_linear(k: int, n: int):
    """gptqmodel's TorchLinear (what a CUDA device trains through: its Triton dequantization is off in training,
    qlinear/torch.py:678-682) of the same shape, in training mode."""
    from gptqmodel_layers import layer

    return layer("gptq", k, n)


def main(mt: str) -> None:
    from importlib.metadata import version

    model, info = load(mt)
    model.train()
    result = {"versions": [version(p) for p in ("transformers", "optimum", "gptqmodel")]}
    result |= {"missing": sorted(info["missing_keys"]), "unexpected": sorted(info["unexpected_keys"])}
    result["linears"] = {
        n: {"class": type(m).__name__, "shape": [m.out_features, m.in_features], "tensors": tensors(m)}
        for n, m in quantized(model).items()
    }
    if mt == "qwen3_moe":
        experts = model.model.layers[0].mlp.experts
        result["experts"] = {n: [str(p.dtype), list(p.shape)] for n, p in experts.named_parameters()}
        result["experts_class"] = type(experts).__name__
    else:
        down = model.model.layers[0].mlp.down_proj  # the base alone, before its LoRA
        result["transient"] = {"bf16": transient(down, torch.bfloat16), "fp16": transient(down, torch.float16)}
        result["transient_shape"] = [down.out_features, down.in_features]
        result["transient_torch_linear"] = transient(torch_linear(down.in_features, down.out_features), torch.bfloat16)
        add_lora(model)
        result["saved"] = saved_by_linear(model, torch.randint(0, 512, (1, TOKENS)))
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
