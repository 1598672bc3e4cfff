"""Memory terms pinned to published numbers (ZeRO paper), to DeepSpeed's own estimators on a real
model, and the breakdown invariant (terms add up to the total)."""

import pytest

from planner.config.spec import GIB, Knobs
from planner.estimate import activation_terms, nograd, overheads, state_terms, trained
from planner.estimate import memory as mem
from planner.estimate.setup import Setup
from planner.model.catalog import load_model
from planner.model.modelspec import ModelSpec, Tensors, TextSpec

PHI = 7_500_000_000


def flat_model(params: int, hidden: int = 4096) -> ModelSpec:
    text = TextSpec(
        hidden=hidden,
        layers=1,
        heads=32,
        kv_heads=32,
        head_dim=hidden // 32,
        intermediate=4 * hidden,
        vocab=32000,
        tied=False,
        max_positions=4096,
    )
    return ModelSpec("flat", "llama", text, (Tensors("layer", (params,)),))


def model_states(s: Setup) -> int:
    return state_terms.params_bytes(s) + state_terms.gradients_bytes(s) + state_terms.optimizer_bytes(s)


@pytest.mark.parametrize(
    "stage,paper_gb,tolerance",
    [
        (0, 120.0, 0.001),  # torch AMP: fp32 weights (the master), fp32 grads, fp32 Adam = 16 bytes/param
        (1, 31.4, 0.01),  # DeepSpeed also keeps the averaged gradient partition: +2/N bytes/param (+0.7%)
        (2, 16.6, 0.005),  # the paper rounds 16.64 GB
        (3, 1.9, 0.02),  # 16/N = 1.875 GB, printed as 1.9
    ],
)
def test_zero_paper_model_state_table(stage, paper_gb, tolerance):
    """Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, mixed-precision Adam."""
    s = Setup(flat_model(PHI), Knobs(precision="bf16", zero_stage=stage), 1, 1, 1024, 8, 8)
    assert model_states(s) / 1e9 == pytest.approx(paper_gb, rel=tolerance)


@pytest.fixture(scope="module")
def real_small_model():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from planner.model.catalog import model_config

    cfg = model_config("debug-llama")
    model_type = cfg.pop("model_type")
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **cfg))


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_zero2_matches_deepspeed_estimate(real_small_model, gpus):
    """DeepSpeed's estimate_zero2_model_states_mem_needs counts 2 + 18/N bytes per parameter (16-bit
    params, 16-bit grad partition, fp32 grad partition, fp32 master, Adam): our model states are its 2 + 14/N, and
    in place of its fp32 gradient partition (4/N) we count what the step allocates, measured by probes/zero.py
    (tests/probes/test_zero.py): the flat 16-bit copy beside the fp32 one (6/N), or the fp64 norm of the largest
    gradient piece where that is larger."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs, model_to_params

    total = model_to_params(real_small_model)
    spec = load_model("debug-llama")
    assert total == spec.params
    _, ds_gpu = estimate_zero2_model_states_mem_needs(total, gpus, 1, cpu_offload=False)
    s = Setup(spec, Knobs(precision="bf16", zero_stage=2), 1, 1, 128, gpus, 1)
    ours = model_states(s) + state_terms.optimizer_step_temp_bytes(s)
    step = max(6 * total // gpus, 8 * min(spec.largest_matrix_params(), total // gpus))
    assert state_terms.optimizer_step_temp_bytes(s) == pytest.approx(step, abs=8)
    assert ours - step == pytest.approx(ds_gpu - 4 * total // gpus, abs=3 * gpus)  # integer division per term
    ds_cpu, ds_gpu_off = estimate_zero2_model_states_mem_needs(
        total, gpus, 1, cpu_offload=True, additional_buffer_factor=1.0
    )
    off = Setup(spec, Knobs(precision="bf16", zero_stage=2, offload="optimizer"), 1, 1, 128, gpus, 1)
    assert model_states(off) == ds_gpu_off
    # host: 16 bytes/param over the node; DeepSpeed's estimate takes max(4N, 16) for model loading
    assert state_terms.host_offload_bytes_per_node(off) == pytest.approx(ds_cpu * 16 / max(4 * gpus, 16), abs=gpus)


def test_zero3_matches_deepspeed_estimate_with_named_differences(real_small_model):
    """estimate_zero3_model_states_mem_needs: 4 x largest layer + 18/N. Beside the 18/N we count the 16-bit
    parameter partition (2/N, which stage3.py keeps besides the 16-bit gradient partition) and the flat 16-bit
    copy of a sub-group's gradients the step makes before its fp32 copy (2/N here: one sub-group); in place of
    the 4 x largest layer, the gathered working set DeepSpeed's prefetch and reuse distance keep, measured
    (planner.estimate.zero, tests/probes/test_zero.py)."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs, model_to_params

    total, largest = model_to_params(real_small_model)
    spec = load_model("debug-llama")
    assert largest == spec.largest_matrix_params()
    n = 8
    _, ds_gpu, _ = estimate_zero3_model_states_mem_needs(total, largest, n, 1, cpu_offload=False)
    s = Setup(spec, Knobs(precision="bf16", zero_stage=3), 1, 1, 128, n, 1)
    ours = model_states(s) + state_terms.optimizer_step_temp_bytes(s)
    assert ours - 4 * total // n == pytest.approx(ds_gpu - 4 * largest, abs=8)


def test_lora_makes_72b_model_states_small():
    m = load_model("qwen2.5-72b")
    full = Setup(m, Knobs(precision="bf16", zero_stage=3), 1, 1, 2048, 8, 1)
    lora = Setup(m, Knobs(precision="bf16", lora_rank=16), 1, 1, 2048, 8, 1)
    assert model_states(full) == pytest.approx(16 * m.params / 8, abs=8)  # 16 bytes/param over 8 ranks
    assert state_terms.params_bytes(lora) == 2 * m.params + 4 * m.lora_params(16)  # bf16 base, fp32 adapters
    assert state_terms.optimizer_bytes(lora) == 8 * m.lora_params(16)


@pytest.mark.parametrize("opt,per_param", [("adamw", 8), ("adamw-fused", 8), ("sgd", 4)])
def test_optimizer_states_and_foreach_temporary(opt, per_param):
    m = load_model("qwen2.5-0.5b")
    s = Setup(m, Knobs(precision="bf16", optimizer=opt), 1, 1, 512)
    assert state_terms.optimizer_bytes(s) == per_param * m.params
    assert state_terms.optimizer_step_temp_bytes(s) == (4 * m.params if opt == "adamw" else 0)


def test_adafactor_factored_states_are_small():
    m = load_model("llama-2-7b")
    s = Setup(m, Knobs(precision="bf16", optimizer="adafactor"), 1, 1, 512)
    assert state_terms.optimizer_bytes(s) < 0.01 * 8 * m.params


def test_8bit_adamw_about_a_quarter_of_adamw():
    m = load_model("llama-2-7b")
    s8 = Setup(m, Knobs(precision="bf16", optimizer="adamw-8bit"), 1, 1, 512)
    s32 = Setup(m, Knobs(precision="bf16"), 1, 1, 512)
    assert state_terms.optimizer_bytes(s8) / state_terms.optimizer_bytes(s32) == pytest.approx(
        (2 + 2 * 4 / 256) / 8, rel=0.001
    )


CASES = [
    ("llama-3.1-8b", Knobs(), 1, 4, 8),
    ("llama-3.1-8b", Knobs(zero_stage=3, checkpointing="full"), 2, 1, 8),
    ("qwen2.5-vl-7b", Knobs(zero_stage=2), 1, 2, 4),
    ("gemma-2-2b", Knobs(precision="bf16-pure"), 2, 1, 1),
    ("gpt2", Knobs(precision="fp32"), 8, 1, 2),
    ("qwen2.5-72b", Knobs(zero_stage=3, offload="optimizer+params"), 1, 1, 64),
    ("llama-2-7b", Knobs(lora_rank=16, optimizer="adafactor"), 4, 2, 2),
]


@pytest.mark.parametrize("name,knobs,micro,accum,world", CASES)
def test_breakdown_total_is_sum_of_terms(name, knobs, micro, accum, world):
    s = Setup(load_model(name), knobs, micro, accum, 2048, world, 1, 256 if "vl" in name else 0)
    b = mem.breakdown(s, 80 * GIB)
    assert b.terms_sum() == b.peak_allocated_bytes
    assert b.device_total_bytes == b.peak_allocated_bytes + b.overhead_bytes
    assert b.headroom_bytes == b.capacity_bytes - b.device_total_bytes
    assert min(b.params_bytes, b.grads_bytes, b.optimizer_bytes, b.activations_bytes, b.temp_bytes) >= 0


def test_checkpointing_saves_memory_and_amp_copies_count():
    m = load_model("llama-3.1-8b")
    off = activation_terms.activations_bytes(Setup(m, Knobs(zero_stage=3), 2, 1, 4096, 8))
    full = activation_terms.activations_bytes(Setup(m, Knobs(zero_stage=3, checkpointing="full"), 2, 1, 4096, 8))
    assert full < 0.2 * off
    amp = Setup(m, Knobs(), 1, 1, 1024)
    embedding = m.text.vocab * m.text.hidden  # a lookup, never cast
    assert activation_terms.autocast_weight_copy_bytes(amp, m.text.layers) == pytest.approx(
        2 * (m.params - embedding), rel=0.001
    )


def test_logits_loss_term_matches_measured_hf_loss():
    """HF's ForCausalLMLoss forward + backward on bf16 logits, every allocation tracked (probes.tracker):
    the peak above the logits themselves is 12 bytes per token per vocabulary entry. Tolerance 0.5%."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.loss.loss_utils import ForCausalLMLoss

    from planner.estimate import activations as act
    from probes.tracker import LiveBytes

    b, s, vocab = 2, 256, 8192
    logits = torch.randn(b, s, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (b, s))
    with LiveBytes() as t:
        ForCausalLMLoss(logits, labels, vocab).backward()
    text = load_model("debug-llama").text
    assert act.logits_loss_bytes(text, b, s, "half") == pytest.approx(t.peak, rel=0.005)


@pytest.mark.parametrize("impl,temp_params", [("foreach", 1.0), ("fused", 0.0)])
def test_adamw_step_temporary_matches_measurement(impl, temp_params):
    """torch AdamW's step, tracked: foreach allocates one full-size temporary, fused none. Exact."""
    torch = pytest.importorskip("torch")
    from probes.tracker import LiveBytes

    params = [torch.nn.Parameter(torch.randn(512, 512)) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, **{impl: True})
    opt.step()  # states exist from here on: steady state
    with LiveBytes() as t:
        opt.step()
    assert t.peak == temp_params * sum(p.numel() * 4 for p in params)
    spec = flat_model(sum(p.numel() for p in params))
    s = Setup(spec, Knobs(precision="fp32", optimizer="adamw" if impl == "foreach" else "adamw-fused"), 1, 1, 8)
    assert state_terms.optimizer_step_temp_bytes(s) == t.peak


def test_evaluation_is_a_phase_of_its_own_only_when_the_run_evaluates():
    """The plan names every phase's peak; evaluation (no grad, eval_batch rows at the full length) is one of them
    only with --eval-batch, and holds gradients only where ZeRO-3 keeps its partition buffer."""
    m = load_model("llama-3.1-8b")
    cap = 80 * 2**30
    plain = mem.breakdown(Setup(m, Knobs(precision="bf16", zero_stage=3, checkpointing="full"), 1, 1, 4096, 8), cap)
    assert set(plain.phases) == {"backward", "end-of-backward", "optimizer-step", "load", "checkpoint-save"}
    assert plain.phases[plain.peak_phase] == plain.peak_allocated_bytes == max(plain.phases.values())
    k = Knobs(precision="bf16", zero_stage=3, checkpointing="full", eval_batch=16)
    s = Setup(m, k, 1, 1, 4096, 8)
    b = mem.breakdown(s, cap)
    assert b.peak_phase == "evaluation" and b.activations_bytes == 0
    assert b.phases["backward"] == plain.phases["backward"]  # training is unchanged
    assert b.grads_bytes == state_terms.gradients_bytes(s) + state_terms.comm_bucket_bytes(s)  # ZeRO-3's buffer stays
    ddp = mem.breakdown(Setup(m, k.model_copy(update={"zero_stage": 0}), 1, 1, 4096, 8), cap)
    assert ddp.phases["evaluation"] - ddp.params_bytes - ddp.optimizer_bytes - state_terms.comm_bucket_bytes(
        Setup(m, k.model_copy(update={"zero_stage": 0}), 1, 1, 4096, 8)
    ) == nograd.eval_forward_bytes(s)  # no gradients after HF's zero_grad


def test_a_vlms_tower_takes_no_gradient_on_text_rows_on_one_gpu():
    """The H100 window's Qwen2.5-VL-3B text rows ran 14% under the plan until the tower and projector counted no
    gradient, optimizer state or step copy on text-only rows (torch's AdamW skips parameters without a gradient):
    now within 1% (tests/benchmarks/test_gpu_results.py). Images, several GPUs, ZeRO or LoRA keep --frozen's."""
    m = load_model("qwen2.5-vl-3b")
    text = Setup(m, Knobs(precision="bf16"), 1, 1, 1024)
    assert trained.frozen_modules(text) == "vision+projector"
    assert trained.trainable_params(text) == m.params - m.frozen_params("vision+projector")
    for other in (
        Setup(m, Knobs(precision="bf16"), 1, 1, 1024, image_tokens=256),
        Setup(m, Knobs(precision="bf16"), 1, 1, 1024, 2),
        Setup(m, Knobs(precision="bf16", zero_stage=2), 1, 1, 1024),
        Setup(m, Knobs(precision="bf16", lora_rank=8), 1, 1, 1024),
    ):
        assert trained.frozen_modules(other) == "none"
    assert trained.frozen_modules(Setup(load_model("llama-3.2-1b"), Knobs(), 1, 1, 1024)) == "none"


def test_paged_optimizer_states_are_counted_apart_from_the_device_peak():
    """bitsandbytes' paged optimizers: the states of tensors of 1e5 elements or more live in CUDA unified memory,
    outside the allocator's peak (tests/probes/test_paged.py reads the rule in bitsandbytes); smaller ones, and
    every LoRA factor of a 1B model at rank 16, stay in torch's allocator."""
    m = load_model("llama-3.2-1b")
    full = Setup(m, Knobs(precision="bf16-pure", optimizer="paged-adamw"), 1, 1, 1024)
    big = sum(t.numel for t in m.tensors if t.numel // t.count >= state_terms.PAGED_MIN_ELEMENTS)
    assert state_terms.paged_optimizer_bytes(full) == 8 * big  # fp32 states whatever the parameters
    assert state_terms.optimizer_bytes(full) + state_terms.paged_optimizer_bytes(full) == 8 * m.params
    b = mem.breakdown(full, 80 * 2**30)
    assert b.paged_bytes == 8 * big and b.optimizer_bytes == 8 * (m.params - big)
    plain = mem.breakdown(Setup(m, Knobs(precision="bf16-pure", optimizer="adamw"), 1, 1, 1024), 80 * 2**30)
    assert plain.paged_bytes == 0 and plain.optimizer_bytes == 4 * m.params
    lora = Setup(m, Knobs(precision="bf16", optimizer="paged-adamw", lora_rank=16), 1, 1, 1024)
    factors = [16 * d for t in m.tensors if t.lora for d in t.shape]  # one A (r x d_in) or B (d_out x r)
    assert min(factors) < state_terms.PAGED_MIN_ELEMENTS < max(factors)  # attention's under 1e5, the MLP's over
    paged = sum(
        16 * d * t.count for t in m.tensors if t.lora for d in t.shape if 16 * d >= state_terms.PAGED_MIN_ELEMENTS
    )
    assert state_terms.paged_optimizer_bytes(lora) == 8 * paged > 0
    assert state_terms.paged_optimizer_bytes(Setup(m, Knobs(optimizer="paged-adamw", zero_stage=2), 1, 1, 1024, 2)) == 0


def _overhead_fraction(cal, **knobs) -> float:
    s = Setup(load_model("llama-3.2-1b"), Knobs(**knobs), 1, 1, 1024, gpu="h100-80gb")
    return overheads.fragmentation_fraction(s, cal)


def test_expandable_segments_prior_is_the_median_the_h100_measured():
    """The prior with expandable segments is the median reserved/allocated - 1 of the priors' four expandable steps
    (benchmarks/results/gpu/priors.json); the default allocator's median of the same file's steps stays apart."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "benchmarks"))
    import gpu_apply

    rows = json.loads((root / "benchmarks/results/gpu/priors.json").read_text())["rows"]
    assert gpu_apply.fragmentation_fraction(rows, expandable=True) == overheads.FRAGMENTATION_FRACTION_EXPANDABLE
    assert gpu_apply.fragmentation_fraction(rows) > 2 * overheads.FRAGMENTATION_FRACTION_EXPANDABLE


def test_the_fraction_follows_the_allocator_and_the_measured_edge_bounds_it():
    from planner.estimate.calibration import Calibration

    assert _overhead_fraction(None) == overheads.FRAGMENTATION_FRACTION
    assert _overhead_fraction(None, expandable_segments=True) == overheads.FRAGMENTATION_FRACTION_EXPANDABLE
    cal = Calibration(
        gpu="h100-80gb", measured="test", fragmentation_fraction=0.12, fragmentation_fraction_expandable=0.05
    )
    assert (_overhead_fraction(cal), _overhead_fraction(cal, expandable_segments=True)) == (0.12, 0.05)
    edged = cal.model_copy(update={"edge_fraction": 0.03, "edge_fraction_expandable": 0.08})
    assert (_overhead_fraction(edged), _overhead_fraction(edged, expandable_segments=True)) == (0.03, 0.05)


@pytest.mark.parametrize("precision", ["bf16", "bf16-pure", "fp32"])
def test_a_frozen_heads_input_is_taken_only_from_what_the_device_holds(precision):
    """LoRA with offloaded checkpointing: the final norm's tensors are on the host, so nothing of them is taken off the
    device's activations (a property test found -32 MiB once); with full checkpointing the frozen head's input is."""
    m = load_model("llama-3.1-8b")
    off = Setup(m, Knobs(lora_rank=16, checkpointing="offload", precision=precision), 1, 1, 4096)
    assert activation_terms.activations_bytes(off) == 0 and activation_terms.frozen_ends_bytes(off) == 0
    full = Setup(m, Knobs(lora_rank=16, checkpointing="full", precision=precision), 1, 1, 4096)
    profile = activation_terms.activation_profile(full.knobs)  # a LoRA base in bf16 trains in half precision, not AMP
    c = {"amp": 0, "half": 2, "fp32": 4}[profile]
    assert activation_terms.frozen_ends_bytes(full) == c * 4096 * m.text.hidden


@pytest.mark.parametrize("opt,client,per_element", [("adamw", True, 8), ("adamw-fused", True, 6), ("adamw", False, 6)])
def test_zero2_step_counts_a_client_optimizers_temporaries(opt, client, per_element):
    """ZeRO-2 in bf16: the flat and fp32 gradient copies (6 bytes an element of the partition); a client torch AdamW
    (the user's DeepSpeed config names no optimizer) steps beside the fp32 gradient, foreach with its sqrt (8)."""
    m = load_model("qwen2.5-7b")
    k = Knobs(precision="bf16", zero_stage=2, optimizer=opt, client_optimizer=client, framework="deepspeed")
    s = Setup(m, k, 1, 1, 512, 8)
    assert state_terms.optimizer_step_temp_bytes(s) == per_element * -(-m.params // 8)
