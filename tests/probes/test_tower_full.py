"""--lora-tower-full (ms-swift 4's --tuner_type lora_llm: LoRA on the language model's linears, the vision tower and
projector trained in full in the dtype they were loaded in): the planner's trainable and frozen counts and the weights'
bytes against the one builder's real model (recipe/model.py), and the analytic peak against the sim of a step.

Measured when pinned (4 decoder layers, the tower whole, micro-batch 1 of 1,024 tokens with 256 image tokens, LoRA
rank 8; analytic / sim - 1): qwen2.5-vl-3b bf16 AMP -0.27% (no checkpointing), -0.004% (full, peak at the optimizer
step), bf16-pure full -0.004%; gemma-3-4b +0.68%, -0.57%, -0.35%; qwen3-vl-8b -0.63%, -0.005%, -0.005%; internvl2.5-8b
-0.35%, -0.035%, -0.035%."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.estimate.trained import frozen_params, trainable_params
from planner.model import catalog
from planner.model.families import from_config
from recipe.model import build_model

SIM_TOLERANCE = 0.01
FAMILIES = ["qwen2.5-vl-3b", "gemma-3-4b", "internvl2.5-8b", "llava-1.5-7b", "qwen3-vl-8b", "smolvlm-instruct"]
OMNI = "qwen2.5-omni-3b"  # an audio tower beside the ViT, trained with it (its VisionSpec.tower_modules)


def _two_layers(name: str) -> dict:
    cfg = catalog.model_config(name)
    if "text_config" in cfg:
        return {**cfg, "text_config": {**cfg["text_config"], "num_hidden_layers": 2}}
    return {**cfg, "num_hidden_layers": 2}


@pytest.mark.parametrize("precision", ["bf16", pytest.param("bf16-pure", marks=pytest.mark.sweep)])
@pytest.mark.parametrize("name", [*FAMILIES, pytest.param(OMNI, marks=pytest.mark.sweep)])
def test_the_tower_trains_in_full_beside_the_adapters_as_counted(name, precision):
    """Every tower and projector parameter takes a gradient beside the adapters, the rest is frozen, and the model
    holds the bytes params_bytes counts: the tower in half precision, the adapters in fp32."""
    cfg = _two_layers(name)
    knobs = Knobs(precision=precision, lora_rank=8, lora_tower_full=True)
    s = Setup(from_config(cfg, name), knobs, 1, 1, 64, image_tokens=16)
    with torch.device("meta"):
        model = build_model(cfg, knobs)
    trained = [p for p in model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trained) == trainable_params(s) > s.model.lora_params(8)
    assert sum(p.numel() for p in model.parameters() if not p.requires_grad) == frozen_params(s)
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == params_bytes(s)
    assert {p.dtype for p in trained} == {torch.bfloat16, torch.float32}  # the tower's own dtype, the adapters'


ROWS = [  # (model, precision, checkpointing); the rest of the measured rows (docstring) in the sweep tier, for CI's
    # room (the qwen2.5-vl-3b row with its optimizer-step peak took 16 s of a worker)
    pytest.param("gemma-3-4b", "bf16", "off", id="gemma-3-4b-amp-off"),
    *(
        pytest.param(m, p, c, id=f"{m}-{p}-{c}", marks=pytest.mark.sweep)
        for m, p, c in [
            ("qwen2.5-vl-3b", "bf16", "full"),
            ("qwen2.5-vl-3b", "bf16", "off"),
            ("gemma-3-4b", "bf16", "full"),
            ("qwen3-vl-8b", "bf16", "off"),
            ("internvl2.5-8b", "bf16", "off"),
            ("internvl2.5-8b", "bf16-pure", "full"),
        ]
    ),
]


@pytest.mark.parametrize("name,precision,checkpointing", ROWS)
def test_the_analytic_peak_matches_the_sim(name, precision, checkpointing):
    """The tower's grads and states in its own dtype (AdamW's foreach temporaries too), its activations trained, a
    LayerNorm tower under autocast saving its fp32 norm inputs (activation_terms.tower_profile)."""
    from probes.sim import simulate
    from probes.step import Case
    from tests.probes.test_family_accuracy import _four_layers

    cfg = _four_layers(catalog.model_config(name))
    k = Knobs(precision=precision, checkpointing=checkpointing, lora_rank=8, lora_tower_full=True)
    sim = simulate(Case(cfg, k, 1, 1, 1024, image_tokens=256))
    a = breakdown(Setup(from_config(cfg, name), k, 1, 1, 1024, image_tokens=sim.image_tokens), 80 * 2**30)
    assert a.peak_allocated_bytes == pytest.approx(sim.peak_allocated_bytes, rel=SIM_TOLERANCE)
    assert a.peak_phase == sim.phase


def test_lora_tower_full_needs_a_tower_and_plain_lora():
    from planner import advise
    from planner.errors import BadInput

    base = {"model": "qwen2.5-vl-3b", "gpu": "h100", "micro_batch": 1, "seq_len": 1024, "image_tokens": 256}
    base |= {"lora_rank": 8, "lora_tower_full": True}
    assert advise.check(advise.parse(advise.CheckRequest, base)).plan.knobs.lora_tower_full
    with pytest.raises(BadInput, match="--lora-tower-full: model 'llama-3.2-1b' has no vision tower"):
        advise.check(advise.parse(advise.CheckRequest, {**base, "model": "llama-3.2-1b", "image_tokens": 0}))
    with pytest.raises(BadInput, match="--lora-tower-full with --lora-vision"):
        advise.check(advise.parse(advise.CheckRequest, {**base, "lora_vision": True}))
    with pytest.raises(BadInput, match="needs LoRA adapters"):
        advise.check(advise.parse(advise.CheckRequest, {**base, "lora_rank": 0}))


def test_an_omnis_resident_talker_stays_frozen():
    """The towers trained are the ViT and the audio tower with their projectors (trained.TOWER_FULL_ROLES), the same
    with Qwen2.5-Omni's talker and vocoder resident beside the thinker (never trained: RESIDENT_ROLES)."""
    from planner.estimate.trained import tower_full_params

    knobs = Knobs(precision="bf16", lora_rank=8, lora_tower_full=True)
    thinker, whole = (
        Setup(catalog.load_model(n), knobs, 1, 1, 64, image_tokens=16) for n in (OMNI, f"{OMNI}-with-talker")
    )
    assert tower_full_params(thinker) == thinker.model.frozen_params("vision+projector")  # ViT, audio, projectors
    assert tower_full_params(whole) == tower_full_params(thinker) < whole.model.frozen_params("vision+projector")
    assert trainable_params(whole) == trainable_params(thinker)
