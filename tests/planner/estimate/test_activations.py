"""Activation formulas against the real transformers models: bytes of every tensor autograd saves
in a forward pass (saved_tensors_hooks, unique storages, parameters excluded), on CPU.

Tolerance: 3%. The CPU and CUDA SDPA kernels save the same tensors (q, k, v, out, lse and the float
bias made from the padding mask); dropout is off because CPU SDPA falls back to the math kernel
with dropout, where CUDA's memory-efficient kernel does not.
"""

import pytest

from planner.estimate import activations as act
from planner.model.catalog import model_config
from planner.model.families import from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def saved_bytes(cfg: dict, dtype, batch: int, seq: int) -> int:
    cfg = dict(cfg)
    model_type = cfg.pop("model_type")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **cfg))
    model = model.to(dtype).train()
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, -3:] = 0  # padding present: the worst case the planner sizes for
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, attention_mask=mask)
    return sum(n for ptr, n in seen.items() if ptr not in params)


@pytest.mark.parametrize("name", ["debug-llama", "debug-gpt2"])
@pytest.mark.parametrize("dtype,profile", [("float32", "fp32"), ("bfloat16", "half")])
def test_saved_activations_match_real_model(name, dtype, profile):
    cfg = model_config(name)
    cfg.update({k: 0.0 for k in ("attn_pdrop", "resid_pdrop", "embd_pdrop") if k in cfg})
    spec = from_config(cfg, name)
    measured = saved_bytes(cfg, getattr(torch, dtype), 2, 256)
    predicted = act.text_activations_bytes(spec.text, 2, 256, profile, "off")
    assert predicted == pytest.approx(measured, rel=0.03)


def test_checkpointing_keeps_layer_inputs_only():
    spec = from_config(model_config("llama-3.1-8b"), "l")
    full = act.text_activations_bytes(spec.text, 1, 4096, "amp", "off")
    ckpt = act.text_activations_bytes(spec.text, 1, 4096, "amp", "full")
    assert ckpt < full / 10
    assert act.checkpointed_layer_bytes(spec.text, 1, 4096, "amp") == 4 * 4096 * 4096


def test_logits_term_dominates_for_large_vocabularies():
    """Qwen2.5-0.5B at 2048 tokens: 12 bytes x 2048 x 151,936 = 3.73 GB of fp32 logits/loss tensors,
    more than all its layers' saved activations in bf16."""
    spec = from_config(model_config("qwen2.5-0.5b"), "q")
    logits = act.logits_loss_bytes(spec.text, 1, 2048, "half")
    assert logits == 12 * 2048 * 151_936
    assert logits > act.text_activations_bytes(spec.text, 1, 2048, "half", "off")
