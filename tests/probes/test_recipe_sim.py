"""The recipe knobs' terms (planner/estimate/recipe_terms.py) pinned to the allocation tracker: the analytic peak against the sim
probe (the real transformers model's step on fake tensors, every allocation counted), and the sim against real CPU
steps counted by the same tracker, one knob at a time, on catalog models at a real depth."""

import pytest

pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config
from planner.model.families import from_config
from probes.cpu import measure
from probes.sim import simulate
from probes.step import Case

ANALYTIC_VS_SIM = 0.03  # the acceptance: analytic within 3% of the sim
SIM_VS_REAL = 0.01  # as tests/probes/test_sim.py

CASES = [  # (model, precision, knobs, micro-batch, sequence): each the term the knob adds or removes at the peak
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "selective-op"}, 4, 4096),  # kept mm outputs + kernel output
    ("qwen2.5-0.5b", "bf16", {"checkpointing": "selective-op"}, 2, 2048),  # addmm (q/k/v bias) not kept
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "every-4"}, 4, 4096),  # traced over whole periods
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "offload"}, 4, 4096),  # one layer brought back
    # full checkpointing less each layer's input (1 GiB here: 16 layers x 16,384 tokens x 2,048 x 2 B), sim and analytic
    # 32,967,810,048 and 32,966,586,368 bytes (full: 34,041,551,872 and 34,040,328,192); sweep tier (~15 s)
    pytest.param("llama-3.2-1b", "bf16-pure", {"checkpointing": "offload-inputs"}, 4, 4096, marks=pytest.mark.sweep),
    # the chunked loss at a second shape and packing under flash attention: the sweep tier's since stop 69 (CI's room;
    # each knob alone stays on every commit)
    pytest.param(
        "llama-3.2-1b", "bf16-pure", {"loss": "chunked"}, 2, 1024, marks=pytest.mark.sweep
    ),  # summed head grads
    ("llama-3.2-1b", "bf16-pure", {"loss": "chunked"}, 4, 4096),  # 4 bytes/token/entry saved
    ("qwen2.5-0.5b", "bf16", {"loss": "fused"}, 2, 2048),  # no logits kept
    ("gemma-2-2b", "bf16", {"loss": "fused"}, 2, 2048),  # softcap
    ("llama-3.2-1b", "bf16-pure", {"attention": "flash"}, 4, 4096),  # no mask, no bias, k/v unrepeated
    ("llama-3.2-1b", "bf16-pure", {"batching": "packed"}, 4, 4096),  # one (T, T) block mask
    pytest.param(
        "llama-3.2-1b", "bf16-pure", {"batching": "packed", "attention": "flash"}, 4, 4096, marks=pytest.mark.sweep
    ),
    ("qwen2.5-0.5b", "fp32", {"optimizer_in_backward": True}, 2, 2048),  # one gradient at a time
]


@pytest.mark.parametrize(
    "name,precision,kw,mb,seq",
    CASES,
    ids=[
        f"{c[0]}-{c[1]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}-{c[3]}x{c[4]}"
        for c in (getattr(c, "values", c) for c in CASES)
    ],
)
def test_analytic_peak_within_3_percent_of_the_sim(name, precision, kw, mb, seq):
    model, knobs = load_model(name), Knobs.make(precision=precision, **kw)
    sim = simulate(Case(model.config, knobs, mb, 1, seq))
    analytic = breakdown(Setup(model, knobs, mb, 1, seq), 80 * 2**30).peak_allocated_bytes
    assert analytic == pytest.approx(sim.peak_allocated_bytes, rel=ANALYTIC_VS_SIM)


@pytest.mark.parametrize(
    "kw",
    [
        {"checkpointing": "selective-op"},
        {"checkpointing": "every-2"},
        {"loss": "chunked"},
        {"loss": "fused"},
        {"batching": "packed"},
        {"optimizer_in_backward": True},
    ],
    ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()),
)
def test_sim_of_the_knob_matches_real_cpu_steps(kw):
    """The knob as the probes run it (recipe/checkpointing.py, loss.py, attention.py), real tensors on the CPU vs fake ones, traced at 3 and 4
    (every-2: 4 and 6) layers and read at 8."""
    cfg = dict(model_config("debug-llama"), num_hidden_layers=8)
    case = Case(cfg, Knobs.make(precision="fp32", **kw), 2, 1, 128)
    sim = simulate(case, paths="cpu")
    real = measure(case)
    assert sim.peak_allocated_bytes == pytest.approx(real["peak_allocated_bytes"], rel=SIM_VS_REAL)


LORA_CASES = [  # LoRA's terms, pinned as the change they make to the peak against the change the sim measures
    ("llama-3.2-1b", "bf16", {"lora_targets": "attention"}),
    ("llama-3.2-1b", "fp32", {"lora_targets": "q_proj,v_proj"}),
    ("llama-3.2-1b", "bf16", {"lora_dropout": 0.1}),
    pytest.param("llama-3.2-1b", "fp32", {"lora_dropout": 0.1}, marks=pytest.mark.sweep),  # bf16's above: stop 74
    ("llama-3.2-1b", "bf16-pure", {"lora_train_embeddings": True}),
    ("llama-3.2-1b", "bf16", {"quant": "nf4"}),
    ("qwen2.5-0.5b", "bf16", {"quant": "fp4", "lora_targets": "attention"}),
    ("llama-3.2-1b", "bf16", {"quant": "nf4", "quant_absmax": "fp32"}),  # no double quantization
    ("llama-3.2-1b", "bf16", {"quant": "int8"}),  # inputs kept in ctx where lora_A saves its own copy
    ("llama-3.2-1b", "fp32", {"quant": "int8", "lora_targets": "attention"}),  # only unadapted groups' inputs
    ("llama-3.2-1b", "bf16", {"quant": "int8", "checkpointing": "every-4"}),  # every input in checkpointed layers
    # the offload hooks miss them too (the sweep tier's since stop 74, 9 s of a worker in make test, for CI's room)
    pytest.param("llama-3.2-1b", "bf16", {"quant": "int8", "checkpointing": "offload"}, marks=pytest.mark.sweep),
    # GPTQ/AWQ as gptqmodel trains them (recipe.quant.GptqStandIn, AwqStandIn); the bundled trainer refuses them
    ("llama-3.2-1b", "bf16", {"quant": "gptq", "framework": "hf"}),  # every dequantized weight saved
    ("llama-3.2-1b", "bf16", {"quant": "gptq", "framework": "hf", "checkpointing": "full"}),  # one layer's
    ("llama-3.2-1b", "fp16", {"quant": "awq", "framework": "hf"}),  # inputs saved, weight repeated per row
    # AWQ's checkpointed layer as GPTQ's (the sweep tier's since stop 74, 11 s)
    pytest.param(
        "llama-3.2-1b", "fp16", {"quant": "awq", "framework": "hf", "checkpointing": "full"}, marks=pytest.mark.sweep
    ),
    # compressed-tensors and HQQ as transformers 4.57 runs them (recipe.prequant.CtStandIn, HqqStandIn; the layers'
    # bytes pinned to the real ones in tests/probes/test_prequant.py)
    ("llama-3.2-1b", "bf16", {"quant": "ct-w4a16", "framework": "hf", "release": "4.54"}),  # the dense copies
    ("llama-3.2-1b", "bf16", {"quant": "hqq", "framework": "hf", "release": "4.54"}),  # fp32 dequantization
    # an FP8 base: the dense weight in place of the float8 one, the float8 copy in its fake quantization (sweep tier)
    pytest.param(
        "llama-3.2-1b",
        "bf16",
        {"quant": "ct-w8a16-fp8-block", "framework": "hf", "release": "4.54"},
        marks=pytest.mark.sweep,
    ),
]


_SIM_PEAKS: dict[tuple[str, str], int] = {}
LORA_LAYERS = 8  # since stop 69, for CI's room: the models cut to 8 layers (Llama-3.2-1B has 16), two every-4 groups


def _cut(name: str) -> dict:
    return {**load_model(name).config, "num_hidden_layers": LORA_LAYERS}


def _sim_peak(name: str, knobs: Knobs) -> int:
    """The sim's peak at 2 x 2048 tokens, once per model and knobs: the plain LoRA base is shared by most cases."""
    key = (name, knobs.model_dump_json())
    if key not in _SIM_PEAKS:
        _SIM_PEAKS[key] = simulate(Case(_cut(name), knobs, 2, 1, 2048)).peak_allocated_bytes
    return _SIM_PEAKS[key]


@pytest.mark.parametrize(
    "name,precision,kw",
    LORA_CASES,
    ids=[
        f"{c[0]}-{c[1]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}"
        for c in (getattr(c, "values", c) for c in LORA_CASES)
    ],
)
def test_lora_terms_change_the_peak_as_the_sim_measures(name, precision, kw):
    """Against plain LoRA (all-linear, rank 16; the case's checkpointing held) at 2 x 2048 tokens, 8 layers: the analytic change
    in the peak within 3% of the peak of the sim's change (the plain LoRA peak itself is pinned by the accuracy
    benchmark's rows)."""
    model = from_config(_cut(name), name)
    held = {k: v for k, v in kw.items() if k in ("checkpointing", "framework", "release")}
    base = Knobs.make(precision=precision, lora_rank=16, **held)
    knobs = Knobs.make(precision=precision, lora_rank=16, **kw)
    sims = [_sim_peak(name, k) for k in (base, knobs)]
    ana = [breakdown(Setup(model, k, 2, 1, 2048), 80 * 2**30).peak_allocated_bytes for k in (base, knobs)]
    assert abs((ana[1] - ana[0]) - (sims[1] - sims[0])) <= ANALYTIC_VS_SIM * sims[1]


@pytest.mark.parametrize(
    "kw",
    [
        {"quant": "nf4"},
        {"lora_train_embeddings": True},
        {"quant": "int8", "checkpointing": "full"},
        {"lora_ends": "both", "lora_dropout": 0.1},  # PEFT's lora.Embedding and lm_head adapter (test_lora_ends)
        # each stand-in above on every commit; its variants the sweep tier's since stop 69, for CI's room (real
        # bitsandbytes steps, about 10 s each in make test)
        *(
            pytest.param(kw, marks=pytest.mark.sweep)
            for kw in (
                {"quant": "fp4", "lora_targets": "attention"},
                {"lora_targets": "q_proj,v_proj"},
                {"quant": "nf4", "quant_absmax": "fp32"},
                {"quant": "int8"},
            )
        ),
    ],
    ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()),
)
def test_lora_sim_matches_real_cpu_steps(kw):
    """Quantized bases: the sim's stand-ins (recipe.quant.Linear4bitStandIn, Linear8bitStandIn) against
    bitsandbytes' real Linear4bit and Linear8bitLt on the CPU, where its CPU backend imports. (On the CPU a training
    Linear8bitLt runs MatMul8bitFp, which dequantizes in forward too but keeps its input as MatMul8bitLt does.)"""
    if "quant" in kw:
        pytest.importorskip("bitsandbytes")
    cfg = dict(model_config("debug-llama"), num_hidden_layers=6)
    case = Case(cfg, Knobs.make(precision="bf16", lora_rank=8, **kw), 2, 1, 128)
    sim = simulate(case, paths="cpu")
    real = measure(case)
    assert sim.peak_allocated_bytes == pytest.approx(real["peak_allocated_bytes"], rel=SIM_VS_REAL)


def test_four_bit_storage_is_bitsandbytes():
    """planner.estimate.quant's bytes per 4-bit weight against what bitsandbytes' quantize_4bit stores (packed weights, 8-bit
    absmax per 64, fp32 absmax per 256 blocks; the per-tensor code tables, 1.1 KiB, left out)."""
    pytest.importorskip("bitsandbytes")
    import torch
    from bitsandbytes import functional as F

    from planner.estimate import quant

    w = torch.randn(2048, 1024, dtype=torch.bfloat16)
    for q_type in ("nf4", "fp4"):
        q, st = F.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type=q_type)
        stored = sum(t.numel() * t.element_size() for t in (q, st.absmax, st.state2.absmax))
        assert stored == pytest.approx(w.numel() * quant.stored_bytes_per_weight(q_type), rel=1e-6)
        q, st = F.quantize_4bit(w, blocksize=64, compress_statistics=False, quant_type=q_type)  # fp32 absmax
        stored = sum(t.numel() * t.element_size() for t in (q, st.absmax))
        assert stored == w.numel() * quant.stored_bytes_per_weight(q_type, absmax="fp32")


def test_int8_storage_is_bitsandbytes():
    """int8: bitsandbytes' Linear8bitLt quantized by its move to the device keeps CB (int8 [N, K]) and SCB (fp32 [N]):
    planner.estimate.quant's 1 + 4/K bytes a weight, exactly."""
    pytest.importorskip("bitsandbytes")
    import torch

    from planner.estimate import quant
    from recipe.quant import _bnb_linear8

    q = _bnb_linear8(torch.nn.Linear(1024, 768, bias=False, dtype=torch.bfloat16))
    stored = q.weight.numel() * q.weight.element_size() + q.weight.SCB.numel() * q.weight.SCB.element_size()
    assert q.weight.dtype == torch.int8
    assert stored == 768 * 1024 * quant.stored_bytes_per_weight("int8", 1024)


@pytest.mark.parametrize(
    "kw",
    [
        {"lora_targets": "attention"},
        {"lora_targets": "q_proj,down_proj"},
        {"lora_train_embeddings": True},
        {"lora_ends": "both"},  # all-linear's names and the ends (lora_targets.with_ends), the head tied
        {"lora_targets": "q_proj", "lora_ends": "head"},
    ],
)
def test_trainable_count_is_pefts(kw):
    """The adapters (and trained embedding copies) counted as PEFT builds them on the real model."""
    import torch
    import transformers
    from peft import get_peft_model

    from planner.estimate.trained import trainable_params
    from recipe import hf_config, lora_config

    model = load_model("qwen2.5-0.5b")
    knobs = Knobs.make(lora_rank=8, **kw)
    with torch.device("meta"):
        hf = transformers.AutoModelForCausalLM.from_config(hf_config(model.config))
    peft = get_peft_model(hf, lora_config(knobs, model))
    assert sum(p.numel() for p in peft.parameters() if p.requires_grad) == trainable_params(
        Setup(model, knobs, 1, 1, 8)
    )
