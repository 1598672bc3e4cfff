"""Freeze tuning (--trained-layers N; LLaMA-Factory's finetuning_type freeze: planner.estimate.freeze) against real
steps: which parameters train and in what dtype against LLaMA-Factory 0.9.5's own _setup_freeze_tuning (its venv,
probes/lf_freeze.py), and the planned peak against a real CPU training step of a transformers model frozen by the same
rule (probes.cpu: the live-bytes tracker) and against the sim probe's trace at the model's full depth.

Measured when pinned (2026-12-05, torch 2.13 CPU; `python -m pytest tests/probes/test_freeze.py -s`): debug-llama,
2 rows x 512 tokens, the last 2 of 4 layers trained: real CPU step 154.0 MiB (bf16 AMP), 140.0 (bf16-pure), 179.8
(fp32); planned 157.5 / 141.4 / 181.2 (+2.2%, +1.0%, +0.8%). Sim at full depth, 1 x 512 (llama-3.2-1b) and 2 x 512
(qwen2.5-0.5b): llama-3.2-1b N=2 4,626.0 MiB planned 4,638.1 (+0.3%), N=8 10,709.7 (0.0%), N=2 checkpointed 4,445.3
(0.0%); qwen2.5-0.5b N=8 4,610.7 planned 4,642.5 (+0.7%); as ms-swift runs it (bf16-pure, checkpointed, its frozen layers
recomputed: enable_input_require_grads), N=2 2,882.7 planned 2,882.6 (0.0%; -1.3% had it been planned as LLaMA-Factory's).
LLaMA-Pro (--trained-layout interleaved: 4 blocks of qwen2.5-0.5b's 24 layers): 4,320.3 planned 4,337.9 (+0.4%);
checkpointed 3,956.3 planned 3,991.4 (+0.9%; bf16-pure 3,615.0 planned 3,614.7, -0.01%); real CPU step of debug-llama
(2 of 4 layers, bf16-pure) 149.0 MiB, planned 150.4 (+0.9%). LLaMA-Factory's own step (probes/lf_freeze_step.py in its
venv: its prepare_model_for_training and _setup_freeze_tuning, 2 x 512, checkpointed): the last 1 of 4 trained
118.53 MiB planned 120.34 (+1.5%), the first 1 of 4 145.74 planned 147.52 (+1.2%), LLaMA-Pro 2 of 4 bf16-pure 126.71
planned 126.63 (-0.06%), the recipe's build
byte-equal to each (before it kept the embedding's output requiring a gradient, as transformers'
gradient_checkpointing_enable leaves it: 120.03 and 144.59 bf16 AMP). Tolerance: 3% against the CPU step (debug-llama's
tiny layers make the logits' rounding a larger share), 1% against the sim; never more than 0.5% under.
ms-swift's LLaMA-Pro (--tuner_type llamapro, --trained-layout inserted; probes/swift_llamapro.py and
swift_freeze_step.py in its venv): its own Swift.prepare_model on qwen2.5-0.5b's config, 4 blocks: 28 layers,
59,649,536 parameters trained and 494,032,768 frozen, the plan's to the element; its step of debug-llama with 2 blocks
(2 x 512, bf16-pure, checkpointed) 122.41 MiB, the recipe's build the same, planned 122.34 (-0.06%); the sim at full
depth, qwen2.5-0.5b with 4 blocks, 2 x 512: 3,117.3 MiB, planned 3,117.1 (-0.006%)."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import GIB, Knobs
from planner.estimate.freeze import trained_layer_ids
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.estimate.trained import frozen_params, trainable_params
from planner.model.catalog import load_model
from probes.step import Case
from recipe.model import build_model
from tests.probes.venv_run import in_venv


def _built(name: str, knobs: Knobs):
    with torch.device("meta"):
        return build_model(load_model(name).config, knobs)


@pytest.mark.parametrize("name", ["debug-llama", "llama-3.2-1b", "qwen2.5-0.5b"])
@pytest.mark.parametrize("precision", ["bf16", "bf16-pure", "fp32"])
def test_the_trained_layers_and_their_bytes_are_the_plans(name, precision):
    """The build's trained and frozen counts and its weights' bytes (trained layers in fp32 under AMP, the rest in
    bf16) against planner.estimate.trained."""
    knobs = Knobs(trained_layers=2, precision=precision)
    model, spec = _built(name, knobs), load_model(name)
    s = Setup(spec, knobs, 1, 1, 64)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert (trained, frozen) == (trainable_params(s), frozen_params(s))
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == params_bytes(s)
    assert 0 < trained < frozen


def test_the_builds_inserted_blocks_are_the_plans():
    """--trained-layout inserted (recipe.model._insert_blocks): qwen2.5-0.5b with 4 blocks built at 28 layers,
    the blocks at 6, 13, 20, 27 trained (ms-swift's places), its counts and bytes the plan's."""
    knobs = Knobs(trained_layers=4, trained_layout="inserted", precision="bf16-pure", framework="swift")
    model, s = _built("qwen2.5-0.5b", knobs), Setup(load_model("qwen2.5-0.5b"), knobs, 1, 1, 64)
    trained = {n.split(".")[2] for n, p in model.named_parameters() if p.requires_grad}
    assert model.config.num_hidden_layers == 28 and trained == {"6", "13", "20", "27"}
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == trainable_params(s)
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == params_bytes(s)


def test_inserted_blocks_on_loaded_weights_are_swifts_copies(tmp_path):
    """`planner train` on a local checkpoint (recipe.model._insert_blocks after from_pretrained): each new block is
    the layer before with o_proj and down_proj zeroed (ms-swift 4.6.0 swift/tuners/llamapro.py:202-216), the
    checkpoint's layers where they were, so the expanded model's logits are the checkpoint's own (each new block
    adds zero to the residual stream), and only the new blocks train."""
    import transformers

    torch.manual_seed(0)
    config = load_model("debug-llama").config
    base = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    base.save_pretrained(tmp_path)
    knobs = Knobs(trained_layers=2, trained_layout="inserted", precision="fp32", framework="swift")
    model = build_model(config, knobs, weights=tmp_path)
    old, new = base.model.layers, model.model.layers
    assert len(new) == len(old) + 2 and [layer.self_attn.layer_idx for layer in new] == list(range(len(new)))
    stride = len(old) // 2
    for i, layer in enumerate(new):
        source = old[i - (i + 1) // (stride + 1)]  # the checkpoint's layer this one is, or the copy's layer before
        for name, p in layer.named_parameters():
            zeroed = i % (stride + 1) == stride and name.split(".")[1] in ("o_proj", "down_proj")
            want = torch.zeros_like(p) if zeroed else source.get_parameter(name)
            assert torch.equal(p.detach(), want.detach()), (i, name)
    ids = torch.randint(0, config["vocab_size"], (1, 16))
    base.eval(), model.eval()
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, base(ids).logits, atol=1e-5)
    trained = {n.split(".")[2] for n, p in model.named_parameters() if p.requires_grad}
    assert trained == {str(stride), str(2 * stride + 1)}


@pytest.mark.parametrize("count,layout", [(2, "last"), (-2, "first")])
def test_llamafactorys_own_freeze_tuning_is_the_builds(count, layout):
    """freeze_trainable_layers 2 and -2 (the first 2 layers: model/adapter.py:91-92) against --trained-layout."""
    theirs = in_venv(
        "MEMPLAN_LLAMAFACTORY_PYTHON", "probes/lf_freeze.py", json.dumps(load_model("debug-llama").config), str(count)
    )
    model = _built("debug-llama", Knobs(trained_layers=2, precision="bf16", trained_layout=layout))
    ours = {n: [str(p.dtype).removeprefix("torch."), p.requires_grad] for n, p in model.named_parameters()}
    assert theirs == ours
    assert {d for d, trained in theirs.values() if trained} == {"float32"}


LF_STEPS = [  # (knobs, within): LLaMA-Factory's own step, checkpointed as it checkpoints (reentrant, trained layers only)
    ({"trained_layers": 1, "checkpointing": "full"}, 0.03),  # measured +1.5%
    ({"trained_layers": 2, "trained_layout": "interleaved", "checkpointing": "full", "precision": "bf16-pure"}, 0.01),
    # measured -0.06% (84 KiB; full fine-tuning bf16-pure checkpointed is 74 KiB under too: not freeze's; floor 0.5%)
    # the first 1 of 4 (freeze_trainable_layers -1), bf16 AMP: 145.74 MiB, planned 147.52 (+1.2%)
    ({"trained_layers": 1, "trained_layout": "first", "checkpointing": "full"}, 0.03),
]


@pytest.mark.sweep  # a real step in the framework's venv: 67 s and 53 s of make test (2026-12-05); CI keeps the builds' checks
def test_llamafactorys_own_step_is_the_builds_and_the_plans():
    """A CPU step of debug-llama as LLaMA-Factory itself prepares it (probes/lf_freeze_step.py: its
    prepare_model_for_training and _setup_freeze_tuning): the recipe's build holds the same bytes (saved tensors and
    peak), and the plan is its peak within the tolerance, never more than 0.5% under."""
    spec = load_model("debug-llama")
    kws = json.dumps([k for k, _ in LF_STEPS])
    steps = in_venv("MEMPLAN_LLAMAFACTORY_PYTHON", "probes/lf_freeze_step.py", json.dumps(spec.config), kws, "2", "512")
    for (kw, within), got in zip(LF_STEPS, steps, strict=True):
        assert (got["ours"], got["ours_saved"]) == (got["lf"], got["lf_saved"])
        planned = breakdown(Setup(spec, Knobs(**kw), 2, 1, 512), 80 * GIB).peak_allocated_bytes
        print(f"{kw}: LLaMA-Factory {got['lf'] / 2**20:.2f} MiB, planned {planned / 2**20:.2f}")
        assert planned == pytest.approx(got["lf"], rel=within)
        assert planned >= got["lf"] * 0.995


@pytest.mark.sweep  # a real step in the framework's venv: 67 s and 53 s of make test (2026-12-05); CI keeps the builds' checks
def test_swifts_own_checkpointing_is_the_builds_and_the_plans():
    """ms-swift's checkpointing of a frozen model (probes/swift_freeze_step.py: its _fix_gradient_checkpointing and
    _prepare_gradient_checkpointing, enable_input_require_grads among them): the recipe's build holds the same peak,
    and the plan is within 1% of it, never more than 0.5% under (LLaMA-Pro's inserted blocks too: recipe.model
    _insert_blocks). Measured: debug-llama 2 x 512, the last 2 of 4,
    bf16-pure, checkpointed: 118.64 MiB, planned 118.57 (-0.06%: 74 KiB, as full fine-tuning's bf16-pure checkpointed
    step of debug-llama is); LLaMA-Pro's 2 blocks inserted by ms-swift's tuner (6 layers): 122.41 MiB, planned 122.34
    (-0.06%)."""
    spec = load_model("debug-llama")
    kw = {"trained_layers": 2, "checkpointing": "full", "precision": "bf16-pure", "framework": "swift"}
    pro = {**kw, "trained_layout": "inserted"}  # --tuner_type llamapro: 2 blocks inserted by ms-swift's own tuner
    steps = in_venv(
        "MEMPLAN_SWIFT_PYTHON",
        "probes/swift_freeze_step.py",
        json.dumps(spec.config),
        json.dumps([kw, pro]),
        "2",
        "512",
    )
    for knobs, got in zip((kw, pro), steps, strict=True):
        assert got["ours"] == got["swift"]
        planned = breakdown(Setup(spec, Knobs(**knobs), 2, 1, 512), 80 * GIB).peak_allocated_bytes
        assert planned == pytest.approx(got["swift"], rel=0.01)
        assert planned >= got["swift"] * 0.995


def test_swifts_own_llamapro_trains_the_planned_blocks():
    """ms-swift's --tuner_type llamapro on qwen2.5-0.5b's config (probes/swift_llamapro.py: its Swift.prepare_model
    with LLaMAProConfig on the meta device): 4 blocks inserted after every 6 of its 24 layers, at 6, 13, 20 and 27 of
    the 28, and the parameters it leaves trainable and frozen are the plan's to the element (measured 59,649,536 and
    494,032,768), all in bf16."""
    spec = load_model("qwen2.5-0.5b")
    got = in_venv("MEMPLAN_SWIFT_PYTHON", "probes/swift_llamapro.py", json.dumps(spec.config), "4")
    knobs = Knobs(trained_layers=4, trained_layout="inserted", precision="bf16-pure", framework="swift")
    s = Setup(spec, knobs, 1, 1, 512)
    assert got["layers"] == s.model.text.layers == 28
    assert got["trained_ids"] == list(trained_layer_ids(28, 4, "inserted")) == [6, 13, 20, 27]
    assert (got["trained"], got["frozen"]) == (trainable_params(s), frozen_params(s))
    assert got["trained"] == 4 * spec.params_by_role()["layer"] // 24 and got["dtypes"] == ["bfloat16"]


@pytest.mark.parametrize(
    "precision,layout,within",
    [
        ("bf16", "last", 0.03),
        # the last layers at two more precisions: the sweep tier's since stop 69, for CI's room
        pytest.param("bf16-pure", "last", 0.015, marks=pytest.mark.sweep),
        pytest.param("fp32", "last", 0.015, marks=pytest.mark.sweep),
        ("bf16-pure", "interleaved", 0.015),
    ],
)  # measured +2.2%, +1.0%, +0.8%, +0.9%
def test_a_real_cpu_step_is_the_plans_peak(precision, layout, within):
    from probes.cpu import measure

    spec, knobs = load_model("debug-llama"), Knobs(trained_layers=2, precision=precision, trained_layout=layout)
    measured = measure(Case(spec.config, knobs, 2, 1, 512, 0))["peak_allocated_bytes"]
    planned = breakdown(Setup(spec, knobs, 2, 1, 512), 80 * GIB).peak_allocated_bytes
    print(f"debug-llama {precision}: measured {measured / 2**20:.1f} MiB, planned {planned / 2**20:.1f}")
    assert planned == pytest.approx(measured, rel=within)
    full = breakdown(Setup(spec, Knobs(precision=precision), 2, 1, 512), 80 * GIB).peak_allocated_bytes
    assert planned < full


SWIFT_PRO = {"trained_layout": "inserted", "checkpointing": "full", "precision": "bf16-pure", "framework": "swift"}


@pytest.mark.parametrize(
    "name,micro,knobs,within",
    [
        ("llama-3.2-1b", 1, {"trained_layers": 2}, 0.01),
        pytest.param("llama-3.2-1b", 1, {"trained_layers": 2, "checkpointing": "full"}, 0.01, marks=pytest.mark.sweep),
        ("qwen2.5-0.5b", 2, {"trained_layers": 8}, 0.01),
        # ms-swift: enable_input_require_grads under checkpointing, every frozen layer checkpointed and recomputed
        (
            "qwen2.5-0.5b",
            2,
            {"trained_layers": 2, "checkpointing": "full", "precision": "bf16-pure", "framework": "swift"},
            0.01,
        ),
        # LLaMA-Pro: 4 blocks of 24, the 15 frozen layers between them saved whole, the blocks checkpointed (+0.9%)
        ("qwen2.5-0.5b", 2, {"trained_layers": 4, "trained_layout": "interleaved"}, 0.01),
        pytest.param(  # the sweep tier's since stop 69, for CI's room
            "qwen2.5-0.5b",
            2,
            {"trained_layers": 4, "trained_layout": "interleaved", "checkpointing": "full"},
            0.01,
            marks=pytest.mark.sweep,
        ),
        # ms-swift's LLaMA-Pro: 4 blocks inserted into the 24 layers (28 built), checkpointed, bf16-pure (-0.006%)
        ("qwen2.5-0.5b", 2, {**SWIFT_PRO, "trained_layers": 4}, 0.01),
    ],
)
def test_the_sim_at_full_depth_is_the_plans_peak(name, micro, knobs, within):
    from probes.sim import simulate

    spec, k = load_model(name), Knobs(**knobs)
    sim = simulate(Case(spec.config, k, micro, 1, 512, 0))
    planned = breakdown(Setup(spec, k, micro, 1, 512), 80 * GIB).peak_allocated_bytes
    assert planned == pytest.approx(sim.peak_allocated_bytes, rel=within)
    assert planned >= sim.peak_allocated_bytes * 0.995  # never planned below the step
