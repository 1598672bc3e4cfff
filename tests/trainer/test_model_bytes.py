"""The trainer's model (built as `planner train` builds it, trainer.model.build_model) holds exactly the parameter bytes
the plan counts (planner.estimate.state_terms.params_bytes; one process, no ZeRO), and the probes' model is the same
model: both come from recipe.model. The bundled trainer once loaded a LoRA bf16 plan's frozen base in fp32 where the
plan and the probes count it in bf16 (about 15 GiB more than planned for an 8B base)."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import state_terms
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config

pytest.importorskip("torch")
pytest.importorskip("peft")

CASES = {
    "full bf16 (torch AMP: fp32 weights)": {"precision": "bf16"},
    "full bf16-pure": {"precision": "bf16-pure"},
    "LoRA bf16 (bf16 base, fp32 adapters)": {"precision": "bf16", "lora_rank": 8},
    "LoRA bf16-pure": {"precision": "bf16-pure", "lora_rank": 8},
    "LoRA bf16, trained embedding copies": {"precision": "bf16", "lora_rank": 8, "lora_train_embeddings": True},
    "LoRA bf16, selective-op, chunked loss": {
        "precision": "bf16",
        "lora_rank": 8,
        "checkpointing": "selective-op",
        "loss": "chunked",
    },
}


def trainer_model(knobs: Knobs):
    from trainer.model import build_model
    from trainer.runconfig import RunConfig

    return build_model(
        RunConfig(model="debug-llama", micro_batch=1, grad_accum=1, seq_len=48, knobs=knobs, device="cpu")
    )


def parameter_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.parametrize("knobs", CASES.values(), ids=CASES.keys())
def test_the_trainers_model_holds_the_planned_parameter_bytes(knobs):
    k = Knobs.make(**knobs)
    planned = state_terms.params_bytes(Setup(load_model("debug-llama"), k, 1, 1, 48))
    assert parameter_bytes(trainer_model(k)) == planned


@pytest.mark.parametrize(
    "knobs",
    [
        CASES["full bf16 (torch AMP: fp32 weights)"],
        CASES["LoRA bf16-pure"],
        {"precision": "bf16", "zero_stage": 2, "lora_rank": 8, "checkpointing": "full"},
    ],
)
def test_the_probes_build_the_trainers_model(knobs):
    """Names, shapes, dtypes and trainability of every parameter, and which layers checkpoint."""
    from probes.step import Case, build_model

    def layout(model):
        return (
            [(n, p.shape, p.dtype, p.requires_grad) for n, p in model.named_parameters()],
            [n for n, m in model.named_modules() if getattr(m, "gradient_checkpointing", False)],
        )

    k = Knobs.make(**knobs)
    assert layout(build_model(Case(model_config("debug-llama"), k, 1, 1, 48))) == layout(trainer_model(k))
