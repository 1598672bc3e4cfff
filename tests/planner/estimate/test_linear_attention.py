"""A hybrid model's generation cache (planner/estimate/linear_attention.py, rl.kv_cache_bytes) against the cache HF's
own forward builds on a tiny Qwen3.5 (transformers 5.25, CPU, bf16): keys and values in the full-attention layers
only, a fixed recurrent (fp32) and conv state per sequence in each linear-attention layer, whatever the length."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import generation, rl
from planner.estimate.setup import Setup
from planner.model.families import from_config

TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "intermediate_size": 128,
    "vocab_size": 256,
}


def _cache_bytes(cache) -> int:
    seen, total = set(), 0
    for layer in cache.layers:
        for name in ("keys", "values", "conv_states", "recurrent_states"):
            x = getattr(layer, name, None)
            for t in x.values() if isinstance(x, dict) else x if isinstance(x, list) else [x]:
                if t is not None and hasattr(t, "untyped_storage") and id(t) not in seen:
                    seen.add(id(t))
                    total += t.numel() * t.element_size()
    return total


@pytest.mark.parametrize("rows,length", [(3, 40), (2, 130)])
def test_the_cache_is_hf_generations(rows, length):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model("qwen3_5_text", **TINY)
    model = transformers.AutoModelForCausalLM.from_config(conf).to(torch.bfloat16).eval()
    with torch.no_grad():
        cache = model(torch.randint(0, 256, (rows, length)), use_cache=True).past_key_values
    spec = from_config(conf.to_dict(), "tiny")
    setup = Setup(spec, Knobs(precision="bf16-pure"), rows, 1, length)
    assert rl.kv_cache_bytes(setup, rows, length) == _cache_bytes(cache)
    dense = (
        generation.cache_width(spec.text) * spec.text.layers * rows * length * 2
    )  # every layer caching keys and values
    assert rl.kv_cache_bytes(setup, rows, length) != dense
