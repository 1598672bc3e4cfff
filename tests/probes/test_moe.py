"""Issue 18 on the tiny MoE preset (debug-moe: Qwen3-MoE, 8 experts, top-2): the analytic peak, the sim (fake
tensors through the real modules) and real CPU steps (real routing, counted by the same tracker) agree within 3%
(the issue's acceptance); the sim also matches the real routed step's every category, and real routing is
uneven, which the saved total does not depend on under grouped_mm."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model import catalog
from planner.model.families import from_config
from probes.cpu import measure
from probes.sim import simulate
from probes.step import Case

TOLERANCE = 0.03


# fp32, where CPU and CUDA run the same code paths (half precision differs on CPU: benchmarks/accuracy.py --moe
# compares those through the sim with each device's paths); at vocabulary 256 the peak is inside the last
# layer's backward, at the experts (moe.backward_transient_bytes).
# The eager dispatch (a config's experts_implementation) routes by data: the sim fixes each expert's tokens by the
# plan's imbalance (probes.routing), the real step routes as its router says.
@pytest.mark.parametrize(
    "precision,ckpt,micro,seq,vocab,dispatch",
    [
        ("fp32", "off", 2, 512, None, "grouped_mm"),
        ("fp32", "full", 4, 1024, 256, "grouped_mm"),
        ("fp32", "full", 4, 1024, 256, "eager"),
    ],
)
def test_analytic_sim_and_real_cpu_steps_agree_on_the_tiny_moe(precision, ckpt, micro, seq, vocab, dispatch):
    cfg = catalog.model_config("debug-moe")
    cfg.update({"vocab_size": vocab} if vocab else {})
    cfg.update({"experts_implementation": dispatch})
    knobs = Knobs(precision=precision, checkpointing=ckpt)
    case = Case(cfg, knobs, micro, 1, seq)
    real = measure(case)
    sim = simulate(case, paths="cpu")
    analytic = breakdown(Setup(from_config(cfg, "debug-moe"), knobs, micro, 1, seq), 80 * 2**30).peak_allocated_bytes
    assert abs(sim.peak_allocated_bytes / real["peak_allocated_bytes"] - 1) <= TOLERANCE
    assert abs(analytic / real["peak_allocated_bytes"] - 1) <= TOLERANCE, (analytic, real["peak_allocated_bytes"])
    assert abs(analytic / sim.peak_allocated_bytes - 1) <= TOLERANCE


def test_the_sims_eager_routing_follows_the_stated_imbalance():
    """probes.routing: the busiest expert takes F x its fair share (at most every token), the others split the rest;
    the traced peak grows with F (the eager backward runs one expert at a time), and the analytic follows within 1%."""
    from probes.routing import expert_counts

    assert expert_counts(1024, 2, 8, 1.0) == [256] * 8
    assert expert_counts(1024, 2, 8, 2.0) == [512] + [220, 220, 220, 219, 219, 219, 219]
    assert expert_counts(1024, 2, 8, 8.0)[0] == 1024 and sum(expert_counts(1000, 3, 7, 2.5)) == 3000
    cfg = {**catalog.model_config("debug-moe"), "vocab_size": 256, "experts_implementation": "eager"}
    peaks = []
    for f in (1.0, 4.0):
        knobs = Knobs(precision="fp32", checkpointing="full", expert_imbalance=f)
        sim = simulate(Case(cfg, knobs, 4, 1, 1024), paths="cpu").peak_allocated_bytes
        analytic = breakdown(Setup(from_config(cfg, "debug-moe"), knobs, 4, 1, 1024), 80 * 2**30).peak_allocated_bytes
        assert analytic == pytest.approx(sim, rel=0.01)
        peaks.append(sim)
    assert peaks[1] > peaks[0]


def test_real_routing_is_uneven_and_the_sim_routes_every_pair():
    """Random router weights send tokens unevenly (the busiest expert gets more than its fair share), yet the
    experts run every one of tokens x top_k pairs: the gate-up projection's output has that many rows."""
    import torch
    import transformers

    from recipe import hf_config

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(catalog.model_config("debug-moe"), layers=1))
    block, rows = model.model.layers[0].mlp, []
    block.experts.register_forward_hook(lambda mod, args, out: rows.append(args[1].flatten()))
    model(torch.randint(0, 8192, (2, 256)))
    counts = torch.bincount(rows[0], minlength=8)
    assert counts.sum() == 2 * 256 * 2
    assert counts.max() > counts.sum() / 8  # uneven: the imbalance the plan states is real


SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 128,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
    "head_dim": 16,
}


@pytest.mark.parametrize(
    "name",
    [
        *("debug-moe", "mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2-lite", "olmoe-1b-7b", "gpt-oss-20b"),
        *("glm-4.5-air", "qwen3-next-80b-a3b"),
    ],
)
@pytest.mark.parametrize("targets", ["all-linear", "attention", "q_proj,experts.down_proj"])
def test_lora_adapter_counts_are_what_peft_builds_on_moe(name, targets):
    """The PEFT installed (0.22.0, constraints.txt) on transformers 5.25's MoE blocks, through recipe.lora_config (what
    the exports and the trainer pass): all-linear adapts family by family (planner.frameworks.peft: the other PEFTs
    and the frameworks' own lists in tests/probes/test_moe_reach.py), stacked experts named in --lora-targets are
    target_parameters with a LoRA pair per expert. Qwen3-Next's experts were left out until stop 78 (PEFT maps its
    family as Qwen2-MoE's; 0.21.2 adapted them too)."""
    import torch
    import transformers
    from peft import get_peft_model

    from recipe import hf_config, lora_config

    base = catalog.model_config(name)
    cfg = {**base, **{k: v for k, v in SMALL.items() if k in base}, "num_hidden_layers": 2, "num_experts_per_tok": 2}
    cfg.update({k: 4 for k in ("num_local_experts", "num_experts", "n_routed_experts") if k in base})
    cfg.update({"layer_types": base["layer_types"][:2]} if "layer_types" in base else {})
    # Qwen3-Next: a full-attention layer every 4 (its first two linear): every 2 here, one of each
    cfg.update({"full_attention_interval": 2} if "full_attention_interval" in base else {})
    cfg.update({"pad_token_id": 0} if "pad_token_id" in base else {})  # within the small vocabulary
    spec = from_config(cfg, name)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config(cfg))
    if name == "gpt-oss-20b" and targets != "all-linear":
        targets = targets.replace("experts.down_proj", "experts.gate_up_proj") if "experts" in targets else targets
    peft = get_peft_model(model, lora_config(Knobs(lora_rank=8, lora_targets=targets)))
    assert spec.lora_params(8, targets) == sum(p.numel() for p in peft.parameters() if p.requires_grad)


def test_deepseek_caches_the_compressed_latent():
    """planner.estimate.rl.kv_cache_bytes against the DynamicCache a real tiny DeepSeek-V2 fills (fp32, 2 x 40 tokens)."""
    import torch
    import transformers

    from planner.estimate.rl import kv_cache_bytes
    from planner.estimate.setup import Setup
    from recipe import hf_config

    cfg = {
        **catalog.model_config("deepseek-v2-lite"),
        **{k: v for k, v in SMALL.items()},
        "num_hidden_layers": 2,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
    }
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(cfg), dtype=torch.float32)
    with torch.no_grad():
        cache = model(torch.randint(0, 128, (2, 40)), use_cache=True).past_key_values
    real = sum(x.numel() * x.element_size() for layer in cache.layers for x in (layer.keys, layer.values))
    setup = Setup(from_config(cfg, "deepseek-tiny"), Knobs(precision="fp32"), 2, 1, 40)
    assert kv_cache_bytes(setup, 2, 40) == real == 2 * 2 * 40 * (16 + 8) * 4


@pytest.mark.parametrize(
    "targets,grad", [(None, "full"), ("attention", "frozen"), ("experts.gate_up_proj,experts.down_proj", "lora")]
)
def test_expert_terms_under_lora_are_what_autograd_saves(targets, grad):
    """One real bf16 Qwen3-MoE block (debug-moe, 1,024 tokens, grouped_mm) under PEFT 0.21: the large tensors
    autograd saves for backward (every pair's, and LoRA's merged expert weights) against moe.experts_saved_bytes
    less its index bytes. Frozen experts (LoRA elsewhere) keep neither projection's input; adapted ones run on a
    merged weight grouped_mm keeps. Tolerance 1%."""
    import torch
    import transformers
    from peft import get_peft_model

    from planner.estimate import moe
    from planner.estimate.recipe_terms import text_spec
    from recipe import hf_config, lora_config

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        hf_config(catalog.model_config("debug-moe"), layers=1), dtype=torch.bfloat16
    )
    knobs = Knobs.make(precision="bf16-pure", **({"lora_rank": 16, "lora_targets": targets} if targets else {}))
    if targets:
        model = get_peft_model(model, lora_config(knobs))
    block = next(m for m in model.modules() if type(m).__name__ == "Qwen3MoeSparseMoeBlock")
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    y = block(torch.randn(2, 512, 256, dtype=torch.bfloat16, requires_grad=True))
    saved, seen, todo = {}, set(), [y.grad_fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        for name in (a for a in dir(f) if a.startswith("_saved_")):
            t = getattr(f, name, None)
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in params:
                saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        todo += [n for n, _ in f.next_functions]
    large = sum(b for b in saved.values() if b > 1024 * 256 * 2)  # past one token-wide tensor (the router's)
    t = text_spec(catalog.load_model("debug-moe").text, knobs, experts_adapted=grad == "lora")
    assert t.moe.experts_grad == grad
    analytic = moe.experts_saved_bytes(t, 1024, "half") - (4 + 3 * moe.INDEX_BYTES) * 2048
    assert analytic == pytest.approx(large, rel=0.01)
