"""GaLore, APOLLO and Muon's states (planner.estimate.matrix_optim) on catalog shapes, fast and without torch: the shape
rules each term follows (the projected moments and the projector against the galore-torch / apollo-torch sources they
cite), and where state_terms counts them. tests/probes/test_matrix_optim.py pins the same functions to one real step
of each optimizer (exact, fp32 and bf16)."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import matrix_optim, state_terms
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params
from planner.model.catalog import load_model


def _setup(**knobs) -> Setup:
    return Setup(load_model("llama-3.1-8b"), Knobs(framework="llamafactory", **knobs), 1, 1, 2048)


def test_galores_svd_rank_is_clipped_to_the_shorter_side_and_apollos_random_one_is_not():
    """galore_projector.py:69-98 slices U[:, :r] / Vh[:r] of a full_matrices=False SVD; random_projector.py:152-172
    draws randn((r, n)) whatever n."""
    assert matrix_optim.projected_elements("galore-adamw", (1024, 64), 128) == 64 * 1024
    assert matrix_optim.projected_elements("apollo-adamw", (1024, 64), 128) == 128 * 1024
    assert matrix_optim.projector_elements("galore-adamw", (4096, 14336), 128, 2) == 128 * 4096
    # an fp32 gradient's projector is a slice view of U or Vh: the whole 4096 x 4096 factor stays alive
    assert matrix_optim.projector_elements("galore-adamw", (4096, 14336), 128, 4) == 4096 * 4096
    assert matrix_optim.projector_elements("apollo-adamw", (4096, 14336), 128, 4) == 128 * 4096
    assert matrix_optim.projected_elements("galore-adamw", (4096, 14336), 128) == 128 * 14336


def test_low_rank_states_are_adams_on_the_untargeted_and_projected_on_the_targets():
    """Targets none of the linears: AdamW's two moments of every parameter; all linears: far fewer bytes."""
    s = _setup(optimizer="galore-adamw", optimizer_targets="lm_head_nothing")
    assert matrix_optim.low_rank_state_bytes(s, 4) == 8 * trainable_params(s)
    assert matrix_optim.low_rank_projector_bytes(s, 4) == 0
    full = _setup(optimizer="galore-adamw")  # bf16 weights: the projectors are copies of rank r
    assert matrix_optim.matrix_optimizer_bytes(full, 2) < 4 * trainable_params(full) / 4


def test_muon_keeps_one_buffer_for_the_hidden_matrices():
    """Embedding and head under AdamW (two moments), everything 2-D between them one momentum buffer."""
    s = _setup(optimizer="muon")
    text = s.model.text
    ends = 2 * text.vocab * text.hidden  # llama-3.1-8b's untied embedding and head
    vectors = sum(t.numel for t in s.model.tensors if len(t.shape) == 1)
    hidden = trainable_params(s) - ends - vectors
    assert matrix_optim.muon_state_bytes(s, 4) == 4 * hidden + 8 * (ends + vectors)


@pytest.mark.parametrize("optimizer", ["galore-adamw", "galore-adamw-8bit", "apollo-adamw", "muon"])
def test_state_terms_counts_them_as_the_optimizers_states(optimizer):
    s = _setup(optimizer=optimizer)
    assert state_terms.optimizer_bytes(s) == matrix_optim.matrix_optimizer_bytes(s, 4)  # bf16 AMP: fp32 states
