"""The bundled trainer runs the one-state optimizers it plans (issue 49 item 5; planner/frameworks/memplan): Lion,
RMSprop and Adagrad as transformers' optim names build them (recipe.make_optimizer). Each steps the model its own
way (its losses leave AdamW's after the second step) and gives the same losses when the global batch is split into
micro-steps (the trainer zeroes, accumulates and steps it as it does AdamW). 6 fp32 steps of a tiny model on CPU, in
this process. The paged ones page their states through CUDA unified memory: refused on CPU in one line."""

import pytest

pytest.importorskip("transformers")
pytest.importorskip("bitsandbytes")
from tests.trainer.helpers import run_losses

STEPS = 6
REL_TOL = 1e-5  # as tests/trainer/test_equivalence.py


def losses(tmp_path, optimizer: str, micro: int = 4, accum: int = 1) -> list[float]:
    return run_losses(tmp_path / f"{optimizer}-{micro}x{accum}.jsonl", STEPS, micro, accum, optimizer=optimizer)


@pytest.fixture(scope="module")
def adamw(tmp_path_factory) -> list[float]:
    return losses(tmp_path_factory.mktemp("adamw"), "adamw")


# bitsandbytes' 8-bit Lion and torch's Adagrad on every commit (about 4 s a run on 2 cores); the rest in the sweep tier
OPTIMIZERS = [
    "lion-8bit",
    "adagrad",
    *(pytest.param(o, marks=pytest.mark.sweep) for o in ("lion", "rmsprop", "rmsprop-bnb", "rmsprop-bnb-8bit")),
]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_a_one_state_optimizer_steps_its_own_way_and_splits_the_batch_alike(tmp_path, adamw, optimizer):
    whole = losses(tmp_path, optimizer)
    split = losses(tmp_path, optimizer, micro=2, accum=2)
    assert len(whole) == STEPS
    assert whole[0] == pytest.approx(adamw[0], rel=1e-12)  # the same model and batch before any step
    # then its own updates: from the second on, as AdamW's, Lion's and Adagrad's first steps are all lr x sign(g)
    assert all(abs(a / b - 1) > 1e-4 for a, b in zip(whole[2:], adamw[2:]))
    assert split == pytest.approx(whole, rel=REL_TOL)


def test_a_paged_optimizer_needs_a_gpu(tmp_path):
    with pytest.raises(ValueError, match="pages its states through CUDA unified memory: it needs a GPU"):
        losses(tmp_path, "paged-lion")
