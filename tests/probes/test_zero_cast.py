"""PEFT's adapters under DeepSpeed: the engine casts the whole module to bf16/fp16 at initialize, adapters included,
and keeps the fp32 master copy in ZeRO's optimizer partitions (probes.sim.as_deepspeed_casts, where the sources are
cited); without DeepSpeed (torch AMP) PEFT's fp32 adapters stay. The sim's LoRA model states under ZeRO against the
analytic params_bytes, and real DeepSpeed ZeRO-2 on two gloo ranks (probes/zero.py) against the sim's cast.
Measured 2026-12-05, debug-llama LoRA r16 ZeRO-2 bf16, 2 x 512: the sim's peak 183.51 MiB with fp32 adapters,
156.70 MiB cast (planned 165.93 then; the cast layer term since, tests/planner/estimate/test_fsdp_lora.py)."""

from math import ceil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
from planner.config.spec import Knobs
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.estimate.trained import trainable_params
from planner.model.catalog import load_model
from probes.sim import as_deepspeed_casts, simulate
from probes.step import Case, build_model

# The tracker rounds each tensor to the CUDA allocator's 512 B: 1,024 B over debug-llama's 14.8 MB (0.007%).
PARAMS_TOLERANCE = 0.001


@pytest.mark.parametrize(
    "knobs",
    [
        {"zero_stage": 2, "precision": "bf16"},  # cast: 14,786,048 B traced, 14,785,024 planned (fp32: 15,377,920)
        {"zero_stage": 0, "precision": "bf16"},  # torch AMP: fp32 adapters on the bf16 base, 15,377,920 / 15,376,896
    ],
    ids=["zero2", "amp"],
)
def test_the_sims_lora_weights_are_the_planned_ones(knobs):
    model = load_model("debug-llama")
    k = Knobs(lora_rank=16, **knobs)
    sim = simulate(Case(model.config, k, 1, 1, 32))
    assert sim.by_category["params"] == pytest.approx(params_bytes(Setup(model, k, 1, 1, 32)), rel=PARAMS_TOLERANCE)


def _dtype_elements(case: Case, cast: bool) -> dict:
    from probes.zero import dtype_elements

    with torch.device("meta"):
        m = build_model(case, paths="cpu")
        if cast:
            as_deepspeed_casts(m, case.knobs)
    return dtype_elements(m)


@pytest.mark.sweep  # make test-all: about 10 s (two DeepSpeed ranks on CPU, one step)
def test_deepspeed_zero2_casts_the_adapters_as_the_sim_does_and_keeps_fp32_masters():
    """After deepspeed.initialize every parameter is bf16 (PEFT built the adapters fp32); the fp32 copy of the trained
    elements is ZeRO-2's master partition, half of them on each rank (2026-12-05: 7,392,512 elements all bf16, the
    295,936 trained among them; 147,968 fp32 master elements a rank, no padding)."""
    pytest.importorskip("deepspeed")
    from probes.zero import measure_zero

    model = load_model("debug-llama")
    k = Knobs(precision="bf16", zero_stage=2, optimizer="sgd", lora_rank=16)
    case = Case(model.config, k, 2, 1, 64)
    rows = measure_zero(case, {}, world=2, steps=1)
    trained = trainable_params(Setup(model, k, 2, 1, 64))
    assert _dtype_elements(case, cast=False)["trained"] == {"torch.float32": trained}
    for r in rows:
        assert r["param_dtype_elements"] == _dtype_elements(case, cast=True)
        assert r["param_dtype_elements"]["trained"] == {"torch.bfloat16": trained}
        assert r["master_partition_element_bytes"] == [4]
        assert r["master_partition_numel"] == ceil(trained / 2)
