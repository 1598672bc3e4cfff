"""PEFT's adapters under FSDP2's bf16 MixedPrecisionPolicy: stored fp32, computed in bf16 (probes.sim.as_fsdp_casts,
where the sources are cited). The sim's one-rank trace of an FSDP bf16 plan casts the module to bf16
(Knobs.for_probe keeps fsdp for it); a real FSDP2 step on two gloo ranks (probes/fsdp_cast.py) saves what the cast
module saves. Measured 2026-12-05, debug-llama LoRA r16, 2 x 512: both ranks' forward saved 40,304,640 B bf16 +
42,106,884 B fp32 + 8,192 B int64 (78.60 MiB), the cast one-process module the same bytes, the uncast one (bf16-pure,
what the sim traced before) 29,556,736 + 80,379,908 + 8,192 (104.85 MiB); the sim's activations 104.84 MiB before,
78.59 MiB cast (activations + temporaries 168.84 -> 142.59)."""

import pytest

from planner.config.spec import Knobs


@pytest.mark.parametrize("fsdp", ["full", "grad-op", "hybrid"])
def test_an_fsdp_bf16_plan_has_its_own_probe_key_and_the_others_keep_theirs(fsdp):
    k = Knobs(precision="bf16", fsdp=fsdp, lora_rank=16).for_probe("sim")
    assert (k.precision, k.fsdp) == ("bf16", "full")
    for precision in ("bf16-pure", "fp32"):  # no policy: the one-process trace, the key as before
        k = Knobs(precision=precision, fsdp=fsdp, lora_rank=16).for_probe("sim")
        assert (k.precision, k.fsdp) == (precision, "off")


def test_the_sim_computes_an_fsdp_bf16_plans_adapters_in_bf16():
    """The sim's fake module for an FSDP bf16 LoRA plan: every parameter bf16, PEFT's fp32 adapters included (one
    layer of debug-llama, LoRA r16: 4,994,048 elements, 73,984 of them the adapters'); bf16-pure keeps them fp32."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from planner.model.catalog import load_model
    from probes.sim import fake_model
    from probes.step import Case

    config = load_model("debug-llama").config

    def dtypes(knobs):
        out = {}
        for p in fake_model(Case(config, knobs.for_probe("sim"), 1, 1, 32), 1, FakeTensorMode()).parameters():
            out[p.dtype] = out.get(p.dtype, 0) + p.numel()
        return out

    fsdp, pure = (
        dtypes(Knobs(precision="bf16", fsdp="full", lora_rank=16)),
        dtypes(Knobs(precision="bf16-pure", fsdp="full", lora_rank=16)),
    )
    assert fsdp == {torch.bfloat16: sum(pure.values())}
    assert pure[torch.float32] == 73_984


@pytest.mark.sweep  # make test-all: about 20 s (two FSDP2 ranks on CPU, two one-process forwards)
def test_a_real_fsdp2_bf16_step_saves_what_the_cast_module_saves():
    """Exact: the same storages by dtype (parameters left out)."""
    pytest.importorskip("peft")
    from planner.model.catalog import load_model
    from probes.fsdp_cast import measure_fsdp_saved, one_process_saved
    from probes.step import Case

    model = load_model("debug-llama")
    k = Knobs(precision="bf16", fsdp="full", lora_rank=16)
    rows = measure_fsdp_saved(Case(model.config, k, 1, 1, 256))
    one = Case(model.config, Knobs(precision="bf16-pure", lora_rank=16), 1, 1, 256)
    cast, uncast = one_process_saved(one, cast=True), one_process_saved(one, cast=False)
    assert cast != uncast
    for r in rows:
        assert r["trained_dtypes_stored"] == ["torch.float32"]  # the shards as built: PEFT's fp32
        assert r["saved"] == cast
