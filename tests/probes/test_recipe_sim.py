"""The recipe knobs' terms (planner/recipes.py) pinned to the allocation tracker: the analytic peak against the sim
probe (the real transformers model's step on fake tensors, every allocation counted), and the sim against real CPU
steps counted by the same tracker, one knob at a time, on catalog models at a real depth."""
import pytest

pytest.importorskip("transformers")
from planner.catalog import load_model, model_config
from planner.memory import Setup, breakdown
from planner.spec import Knobs
from probes.cpu import measure
from probes.sim import simulate
from probes.step import Case

ANALYTIC_VS_SIM = 0.03      # the acceptance: analytic within 3% of the sim
SIM_VS_REAL = 0.01          # as tests/probes/test_sim.py

CASES = [   # (model, precision, knobs, micro-batch, sequence): each the term the knob adds or removes at the peak
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "selective-op"}, 4, 4096),   # kept mm outputs + kernel output
    ("qwen2.5-0.5b", "bf16", {"checkpointing": "selective-op"}, 2, 2048),        # addmm (q/k/v bias) not kept
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "every-4"}, 4, 4096),        # traced over whole periods
    ("gemma-2-2b", "bf16", {"checkpointing": "every-2"}, 2, 2048),
    ("llama-3.2-1b", "bf16-pure", {"checkpointing": "offload"}, 4, 4096),        # one layer brought back
    ("llama-3.2-1b", "bf16-pure", {"loss": "chunked"}, 2, 1024),                 # summed head gradients
    ("llama-3.2-1b", "bf16-pure", {"loss": "chunked"}, 4, 4096),                 # 4 bytes/token/entry saved
    ("qwen2.5-0.5b", "bf16", {"loss": "fused"}, 2, 2048),                        # no logits kept
    ("gemma-2-2b", "bf16", {"loss": "fused"}, 2, 2048),                          # softcap
    ("llama-3.2-1b", "bf16-pure", {"attention": "flash"}, 4, 4096),              # no mask, no bias, k/v unrepeated
    ("llama-3.2-1b", "bf16-pure", {"attention": "eager"}, 4, 4096),              # s^2 scores
    ("llama-3.2-1b", "bf16-pure", {"batching": "packed"}, 4, 4096),              # one (T, T) block mask
    ("llama-3.2-1b", "bf16-pure", {"batching": "packed", "attention": "flash"}, 4, 4096),
    ("qwen2.5-0.5b", "fp32", {"optimizer_in_backward": True}, 2, 2048),          # one gradient at a time
]


@pytest.mark.parametrize("name,precision,kw,mb,seq", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}-{c[3]}x{c[4]}" for c in CASES])
def test_analytic_peak_within_3_percent_of_the_sim(name, precision, kw, mb, seq):
    model, knobs = load_model(name), Knobs.make(precision=precision, **kw)
    sim = simulate(Case(model.config, knobs, mb, 1, seq))
    analytic = breakdown(Setup(model, knobs, mb, 1, seq), 80 * 2**30).peak_allocated_bytes
    assert analytic == pytest.approx(sim.peak_allocated_bytes, rel=ANALYTIC_VS_SIM)


@pytest.mark.parametrize("kw", [{"checkpointing": "selective-op"}, {"checkpointing": "every-2"}, {"loss": "chunked"},
                                {"loss": "fused"}, {"batching": "packed"}, {"optimizer_in_backward": True}],
                         ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_sim_of_the_knob_matches_real_cpu_steps(kw):
    """The knob as the probes run it (recipe/knobs.py), real tensors on the CPU vs fake ones, traced at 3 and 4
    (every-2: 4 and 6) layers and read at 8."""
    cfg = dict(model_config("debug-llama"), num_hidden_layers=8)
    case = Case(cfg, Knobs.make(precision="fp32", **kw), 2, 1, 128)
    sim = simulate(case, paths="cpu")
    real = measure(case)
    assert sim.peak_allocated_bytes == pytest.approx(real["peak_allocated_bytes"], rel=SIM_VS_REAL)
