"""DeepSpeed as it allocates: planner.estimate.zero's terms against DeepSpeed's own state during real ZeRO steps on
CPU ranks (probes/zero.py): debug-llama, bf16, SGD as the client optimizer (in-place steps, so what the step
allocates is DeepSpeed's own), micro-batch 2 x 64 tokens; and Qwen2.5-7B at 1/16 of its width, where HF's "auto"
buckets are the size of its matrices as on the 7B."""

from math import ceil

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed")
from planner.config.spec import Knobs
from planner.estimate import zero
from planner.estimate.nograd import compute_dtype_bytes
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params
from planner.model.catalog import model_config
from probes.step import Case
from probes.zero import measure_zero, narrowed_case, planned

# The step's bytes: every allocation is rounded to the CUDA allocator's 512 B (probes.tracker), a few per step.
STEP_TOLERANCE = 0.001


def _measure(stage: int, world: int = 2, **settings) -> tuple[Setup, zero.ZeroSettings, list[dict]]:
    case = Case(model_config("debug-llama"), Knobs(precision="bf16", zero_stage=stage, optimizer="sgd"), 2, 1, 64)
    rows = measure_zero(case, settings, world=world)
    s, z = planned(case, settings, world)
    return s, z, rows


def test_zero3_defaults_gather_a_small_model_whole_and_keep_its_buffers():
    """With HF's "auto" values and DeepSpeed's defaults (max live and reuse distance 1e9) the 7.1M-element model
    stays gathered from the second step on (the first records DeepSpeed's trace); the norm weights under 10*h
    persist; the gradient partition buffer and one reduce bucket of h*h exist whatever the accumulation."""
    s, z, rows = _measure(3)
    m = s.model
    for r in rows:
        assert r["model_numel"] == m.params
        assert r["gathered_numel"][1:] == [zero.zero3_gathered_param_elements(s, z)] * 2 == [m.params] * 2
        assert r["persistent_numel"] == zero.persistent_param_elements(s)
        # DeepSpeed pads each parameter's partition to ceil(numel / N): a few elements over T / N
        assert 0 <= r["grad_partition_numel"] - m.params // 2 <= len(m.tensors) * max(t.count for t in m.tensors)
        assert r["grad_partition_element_bytes"] == compute_dtype_bytes(s) == 2
        assert r["reduce_bucket_numels"] == [m.text.hidden**2] and r["reduce_bucket_element_bytes"] == [2]
        assert zero.reduce_buckets_bytes(s) == 2 * m.text.hidden**2
        assert r["sub_group_numels"] == [r["grad_partition_numel"]]
        assert r["step_peak_bytes"][-1] == pytest.approx(zero.zero_step_temp_bytes(s, m.params), rel=STEP_TOLERANCE)


# (settings, how far above the measured working set the term may be): an upper bound where prefetch decides, within
# 3% (max live 1e5 to 1e6), 19% at 3e6; a reuse distance 6 x max live is held by the half-distance rule at 1.6 x.
LIMITS = [
    ({"stage3_max_live_parameters": 10**6, "stage3_max_reuse_distance": 0}, 0.03),
    ({"stage3_max_live_parameters": 10**5, "stage3_max_reuse_distance": 10**5}, 0.03),
    ({"stage3_max_live_parameters": 3 * 10**6, "stage3_max_reuse_distance": 0, "sub_group_size": 10**6}, 0.20),
    ({"stage3_max_live_parameters": 10**6, "stage3_max_reuse_distance": 6 * 10**6}, 0.61),
]


# a max live alone and the half-distance rule on every commit; the reuse distance at max live and the sub-groups (15 s
# each under load) in the sweep tier since stop 68, for CI's room
ON_COMMIT = ("live-1e6", "reuse-6e6")
LIMIT_IDS = ["live-1e6", "live-1e5-reuse-1e5", "live-3e6-sub-1e6", "reuse-6e6"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings,over",
    [pytest.param(*row, id=i, marks=() if i in ON_COMMIT else pytest.mark.sweep) for row, i in zip(LIMITS, LIMIT_IDS)],
)
def test_zero3_gathered_working_set_is_bounded_by_the_term(settings, over):
    s, z, rows = _measure(3, **settings)
    predicted = zero.zero3_gathered_param_elements(s, z)
    for r in rows:
        for measured in r["gathered_numel"][1:]:
            assert measured <= predicted <= measured * (1 + over), (measured, predicted)
        if "sub_group_size" in settings:  # the step converts one sub-group at a time
            assert max(r["sub_group_numels"]) <= zero.step_group_elements(s, s.model.params, z)
            assert max(r["sub_group_numels"]) < ceil(s.model.params / 2)
            flat_and_fp32 = 6 * max(r["sub_group_numels"])
            assert r["step_peak_bytes"][-1] == pytest.approx(flat_and_fp32, rel=STEP_TOLERANCE)


# ZeRO-2 at 4 ranks (28 s under load) in the sweep tier since stop 68; the fp64 norm copy it shows is also on every
# commit in the offloaded ZeRO-2 test below
@pytest.mark.parametrize(
    "stage,world", [pytest.param(2, 4, marks=pytest.mark.sweep), pytest.param(1, 2, marks=pytest.mark.slow)]
)
def test_zero12_step_allocates_the_flat_and_fp32_copies_or_the_fp64_norm(stage, world):
    """ZeRO-1/2 convert the whole gradient partition at once (no sub-groups): 6 bytes an element in bf16 at 2 ranks;
    at 4 ranks the fp64 norm of the embedding's gradient piece (8 bytes an element) is the larger."""
    s, _, rows = _measure(stage, world=world)
    predicted = zero.zero_step_temp_bytes(s, s.model.params)
    partition = ceil(s.model.params / world)
    assert predicted == max(6 * partition, 8 * min(s.model.largest_matrix_params(), partition))
    assert max(r["step_peak_bytes"][-1] for r in rows) == pytest.approx(predicted, rel=STEP_TOLERANCE)


# Qwen2.5-7B at 1/16 of its width (probes.zero.narrowed): its 28 layers, every matrix 1/256 of its elements, DeepSpeed's
# max live and reuse distance 1e9 / 256, HF's "auto" buckets from the hidden size 224 (reduce h^2, prefetch 0.9 h^2),
# full checkpointing, micro-batch 1 x 64 tokens. LoRA rank 1 is the 7B's rank 16 scaled (every factor under the
# persistence threshold 10h here); rank 16 leaves the A factors and most B factors above it, as on the 7B.
NARROW = 16
# (LoRA rank, how far above the measured largest gathered set zero3_gathered_param_elements may be, and how far above
# the largest gathered set with the all-gather buffers alive at the same moment it may be with zero3_staging_elements):
# rank 1 is 310 elements (0.005%) under its measurement, every other an upper bound
NARROWED = [(16, 0.01, 0.02), (1, 0.0001, 0.01), (0, 0.03, 0.04)]


@pytest.mark.parametrize(
    "rank,gathered_over,held_over",
    # LoRA (rank 1 since stop 65, rank 16 since stop 66: 35 s in make test) in the sweep tier, for CI's room: full
    # fine-tuning runs on every commit
    [pytest.param(*row, marks=pytest.mark.sweep if row[0] else ()) for row in NARROWED],
    ids=["lora-16", "lora-1", "full"],
)
def test_zero3_on_a_narrowed_7b_holds_what_the_terms_say(rank, gathered_over, held_over):
    """A 7B LoRA gathers its frozen base for the recomputation and the backward like a trained one: 1e9 elements plus
    the largest parameter, not a layer. Exact: the persistent parameters (LoRA factors under 10h among them), every
    partitioned element, the largest full gradient the reduce hook takes (a LoRA factor under LoRA), the reduce
    bucket (h^2), the gradient partition buffer; the step's bytes within 0.5% (allocator rounding of a small step)."""
    case, limits = narrowed_case("qwen2.5-7b", rank, NARROW)
    (r, *_) = measure_zero(case, limits)
    s, z = planned(case, limits)
    assert r["persistent_numel"] == zero.persistent_param_elements(s)
    assert r["model_numel"] == zero.zero3_param_elements(s)
    assert r["full_grad_numel"][-1] == zero.largest_trained_param_elements(s)
    assert r["reduce_bucket_numels"] == [s.model.text.hidden**2]
    assert r["grad_partition_numel"] == trainable_params(s) // 2
    gathered, held = zero.zero3_gathered_param_elements(s, z), r["held_numel"][-1]
    assert r["gathered_numel"][-1] * (1 - 1e-4) <= gathered <= r["gathered_numel"][-1] * (1 + gathered_over)
    assert held <= gathered + zero.zero3_staging_elements(s, z) <= held * (1 + held_over)
    step = zero.zero_step_temp_bytes(s, trainable_params(s), z)
    assert step == pytest.approx(r["step_peak_bytes"][-1], rel=0.005)


# fused (14 s under load) in the sweep tier since stop 68: foreach's sqrt is the case the term adds bytes for
@pytest.mark.parametrize(
    "optimizer,per_element", [("adamw", 8), pytest.param("adamw-fused", 6, marks=pytest.mark.sweep)]
)
def test_zero2_steps_a_client_torch_adamw_on_the_fp32_partition(optimizer, per_element):
    """A DeepSpeed config without an optimizer entry: HF's Trainer hands DeepSpeed its own torch AdamW, which ZeRO-2
    steps on the flat fp32 partition beside its fp32 gradient. foreach allocates the partition's sqrt on top (8 bytes
    an element in all); fused nothing (the flat and fp32 copies, 6 bytes, stay the larger)."""
    knobs = Knobs(precision="bf16", zero_stage=2, optimizer=optimizer, client_optimizer=True, framework="deepspeed")
    case = Case(model_config("debug-llama"), knobs, 2, 1, 64)
    rows = measure_zero(case, {}, world=2)
    s, _ = planned(case, {}, 2)
    predicted = zero.zero_step_temp_bytes(s, s.model.params)
    assert predicted == per_element * ceil(s.model.params / 2)
    assert max(r["step_peak_bytes"][-1] for r in rows) == pytest.approx(predicted, rel=STEP_TOLERANCE)


# the boundary backward's other allocations beside the largest gradient and its fp64 copy (the smaller gradients in
# the reduce bucket, the last layer's gradients): on debug-llama 1.3% to 5.0% of them, as the two ranks' hand-offs
# interleave (10 rank-runs of measure_zero on this case, 2026-12-06: 21,236,224 to 22,013,440 bytes against
# 20,971,520; the 2% this band was before failed one run in three)
BOUNDARY_OVER = 0.06


def test_zero2_with_the_optimizer_offloaded_keeps_a_staging_buffer_and_copies_the_largest_gradient_in_fp64():
    """ZeRO-2 with offload_optimizer cpu keeps, for the whole run, a model-dtype buffer the size of the largest
    parameter (debug-llama's embedding) on the accelerator, where the plan had none (OpenRLHF#519's actor and critic:
    1 GB each for a Llama-3-8B). Each backward here is an accumulation boundary (accumulation 1), where the hand-off
    to the host takes each gradient piece's norm through an fp64 copy: the backward's peak (the live bytes it
    allocates) is the largest gradient (the embedding on rank 0, the head on rank 1, each whole in its partition)
    and that copy, 10 bytes an element (OpenRLHF#519: 4.2 GB beside a Llama-3-8B's embedding)."""
    knobs = Knobs(precision="bf16", zero_stage=2, optimizer="sgd", offload="optimizer")
    case = Case(model_config("debug-llama"), knobs, 2, 1, 64)
    rows = measure_zero(case, {}, world=2, steps=1)
    s, _ = planned(case, {}, 2)
    largest = s.model.largest_matrix_params()
    assert zero.offload_staging_bytes(s) == 2 * largest
    assert zero.offload_norm_copy_bytes(s) == 8 * largest  # the embedding is under the 3.5M-element partition
    for r in rows:
        assert r["offload_staging_numel"] * r["offload_staging_element_bytes"] == zero.offload_staging_bytes(s)
        at_boundary = 2 * largest + zero.offload_norm_copy_bytes(s)
        assert at_boundary <= r["backward_peak_bytes"][-1] <= at_boundary * (1 + BOUNDARY_OVER)


# (interleave_moe_layer_step, zero_optimization, the measured largest gathered set, how far above it the term may be)
LLAMA4 = [
    (2, {"stage3_max_live_parameters": 10**4, "stage3_max_reuse_distance": 0}, 214592, 0.05),
    (1, {"stage3_max_live_parameters": 10**4, "stage3_max_reuse_distance": 0}, 215616, 0.05),
    (2, {"stage3_max_live_parameters": 10**5, "stage3_max_reuse_distance": 10**5}, 255552, 0.24),
    (2, {}, 538176, 0.0),
]


@pytest.mark.sweep
@pytest.mark.parametrize("step,settings,measured,over", LLAMA4, ids=["alternating", "routed", "reuse-1e5", "defaults"])
def test_zero3_gathers_a_stacked_experts_module_whole_past_max_live(step, settings, measured, over):
    """A tiny Llama-4 text model (probes.fsdp1.TINY), bf16, 2 ranks, 32 tokens: the experts module's gate_up_proj and
    down_proj (196,608 elements) are fetched together past a max live of 1e4, beside the head (16,384) and the
    persistent norms: 33% over the old bound of max live plus the largest parameter. Alternating routed and dense
    layers (step 2) hold what every layer routed (step 1) holds: the limits count elements, not layers. About 40 s a
    case on 2 cores; the cheap default-tier case: tests/planner/estimate/test_moe.py."""
    import transformers

    from probes.fsdp1 import TINY

    config = transformers.AutoConfig.for_model("llama4_text", interleave_moe_layer_step=step, **TINY).to_dict()
    case = Case(config, Knobs(precision="bf16", zero_stage=3, optimizer="sgd"), 1, 1, 32)
    rows = measure_zero(case, settings)
    s, z = planned(case, settings)
    planned_elements = zero.zero3_gathered_param_elements(s, z)
    for r in rows:
        assert r["gathered_numel"][1:] == [measured] * 2
    assert measured <= planned_elements <= measured * (1 + over), (measured, planned_elements)
