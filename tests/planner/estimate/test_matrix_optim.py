"""GaLore, APOLLO and Muon's states (planner.estimate.matrix_optim) on catalog shapes, fast and without torch: the shape
rules each term follows (the projected moments and the projector against the galore-torch / apollo-torch sources they
cite), and where state_terms counts them. tests/probes/test_matrix_optim.py pins the same functions to one real step
of each optimizer (exact, fp32 and bf16)."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import matrix_optim, matrix_step, muon_step, state_terms
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


@pytest.mark.parametrize(
    "projection,projected,projector_fp32,projector_bf16",
    [  # a 1024 x 64 gradient (m >= n) at rank 8: the kept shape, Vh 64 x 64 or U 1024 x 64 sliced, r-wide copies
        ("std", 1024 * 8, 64 * 64, 8 * 64),
        ("reverse-std", 8 * 64, 1024 * 64, 1024 * 8),
        ("right", 1024 * 8, 64 * 64, 8 * 64),
        ("left", 8 * 64, 1024 * 64, 1024 * 8),
        ("full", 8 * 8, 1024 * 64 + 64 * 64, 1024 * 8 + 8 * 64),
    ],
)
def test_galores_proj_type_decides_the_kept_shape_and_the_projector(
    projection, projected, projector_fp32, projector_bf16
):
    """galore_projector.py:12-42: right keeps G P^T (m x r, P = Vh[:r]), left P^T G (r x n, P = U[:, :r]), full both
    (r x r); std the shorter side, reverse-std the longer. tests/probes/test_matrix_optim.py pins each to a real step."""
    shape = (1024, 64)
    assert matrix_optim.projected_elements("galore-adamw", shape, 8, projection) == projected
    assert matrix_optim.projector_elements("galore-adamw", shape, 8, 4, projection) == projector_fp32
    assert matrix_optim.projector_elements("galore-adamw", shape, 8, 2, projection) == projector_bf16


def test_galores_proj_types_on_the_probes_llama_are_the_measured_states():
    """GaLoreAdamW's states after one real CPU step of the 2-layer Llama of tests/probes/test_matrix_optim.py at rank 8
    (measured there, galore-torch 1.0, 2026-12-05; exact), fp32 and bf16, for each proj_type."""
    from planner.model.families import from_config
    from tests.planner.estimate.test_torchao_optim import TINY

    measured = {  # proj_type: (fp32, bf16) bytes
        "std": (807_424, 325_888),
        "reverse-std": (944_640, 313_088),
        "right": (858_624, 320_256),
        "left": (893_440, 318_720),
        "full": (1_082_880, 304_384),
    }
    model = from_config(TINY, "tiny-llama")
    linears = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    for projection, (fp32, bf16) in measured.items():
        knobs = Knobs(
            framework="hf",
            optimizer="galore-adamw",
            optimizer_rank=8,
            optimizer_targets=linears,
            optimizer_projection=projection,
        )
        s = Setup(model, knobs, 1, 1, 16)
        assert (matrix_optim.matrix_optimizer_bytes(s, 4), matrix_optim.matrix_optimizer_bytes(s, 2)) == (fp32, bf16)


LINEARS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
# (optimizer, optimizer_targets, rank, dtype, bytes): the states after one CPU step of axolotl 0.19.0's own
# create_optimizer on the probes' 2-layer Llama (tests/probes/test_axolotl_low_rank.py, measured 2026-12-06; exact)
AXOLOTL_MEASURED = [
    ("galore-adamw", LINEARS, 8, "float32", 807_424),
    ("galore-adamw", "q_proj,v_proj", 16, "bfloat16", 605_440),
    ("galore-adamw", "all-linear", 8, "float32", 594_432),
    ("galore-adamw", "all-linear", 48, "bfloat16", 591_104),
    ("apollo-adamw", "all-linear", 8, "float32", 424_508),
    ("apollo-adamw", "all-linear", 16, "bfloat16", 292_126),
]


@pytest.mark.parametrize("framework", ["axolotl", "llamafactory"])
def test_all_linear_projects_the_untied_head_where_transformers_groups_the_targets(framework):
    """transformers' optim_target_modules all-linear takes every nn.Linear, lm_head too (5.16.1 trainer_optimizer.py:
    133-149), as axolotl 0.19.0 runs it (the measured states above, exact); LLaMA-Factory's all forbids lm_head
    (model/model_utils/misc.py:28-49): its head keeps AdamW's full moments (+ 2 x 512 x 64 elements, - the projected)."""
    from planner.model.families import from_config
    from tests.planner.estimate.test_torchao_optim import TINY

    model = from_config(TINY, "tiny-llama")
    for optimizer, targets, rank, dtype, measured in AXOLOTL_MEASURED:
        knobs = Knobs(framework=framework, optimizer=optimizer, optimizer_rank=rank, optimizer_targets=targets)
        planned = matrix_optim.matrix_optimizer_bytes(Setup(model, knobs, 1, 1, 16), 4 if dtype == "float32" else 2)
        if framework == "axolotl" or targets != "all-linear":
            assert planned == measured
        else:
            assert planned > measured  # the head's full moments outweigh its projected ones and its projector


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


def test_bitsandbytes_moments_are_a_byte_each_and_a_block_absmax_from_4096_elements():
    """bitsandbytes 0.50 optim/optimizer.py:502-529: two fp32 moments under min_8bit_size (4,096), else two uint8 ones
    and two fp32 absmax per started block of 256 (tests/probes/test_matrix_optim.py pins the whole optimizer)."""
    assert matrix_optim.bnb_8bit_moment_bytes(4095) == 8 * 4095
    assert matrix_optim.bnb_8bit_moment_bytes(4096) == 2 * 4096 + 8 * 16
    assert matrix_optim.bnb_8bit_moment_bytes(4097) == 2 * 4097 + 8 * 17


def _step_setup(framework: str, optimizer: str, targets: str = "all-linear") -> Setup:
    knobs = Knobs(framework=framework, optimizer=optimizer, optimizer_targets=targets)
    return Setup(load_model("llama-3.1-8b"), knobs, 1, 1, 2048)


def test_galores_step_is_each_tensor_beside_what_the_one_before_it_left():
    """llama-3.1-8b under bf16 AMP (fp32 gradients, the head 2.1 GB). transformers' order: layer 0's q_proj projects
    (its SVD: a working copy, U, S, Vh, 201 MB) beside the head's denom and update, left bound by GaLoreAdamW's loop.
    LLaMA-Factory's (and ms-swift's): the head steps right after the embedding, beside its update: 3x the head.
    GaLoreAdamW8bit holds nothing over, so its largest SVD (the MLP's 4096 x 14336, 537 MB) is what counts, more than
    its two MLP-sized temporaries (470 MB: bitsandbytes steps the embedding in place). transformers' all-linear targets
    the head too, its last target: the head's SVD (4.3 GB) beside the last down_proj's projected denom and update."""
    m, n = 4096, 14336

    def svd(m, n):
        k = min(m, n)
        return 4 * m * n + 4 * (m * k + k + k * n)

    head = 4 * 128256 * 4096
    named = _step_setup("hf", "galore-adamw", LINEARS)
    assert matrix_step.low_rank_step_temp_bytes(named, 4) == svd(m, m) + 2 * head
    down_proj = 4 * n * 128 + 4 * m * n  # (4096, 14336) projected to 128 x 14336, and its update
    assert matrix_step.low_rank_step_temp_bytes(_step_setup("hf", "galore-adamw"), 4) == svd(128256, 4096) + down_proj
    for framework in ("llamafactory", "swift"):
        assert matrix_step.low_rank_steady_temp_bytes(_step_setup(framework, "galore-adamw"), 4) == 3 * head
        assert matrix_step.low_rank_step_temp_bytes(_step_setup(framework, "galore-adamw"), 4) == 3 * head
    eight = _step_setup("llamafactory", "galore-adamw-8bit")
    assert matrix_step.low_rank_steady_temp_bytes(eight, 4) == 8 * m * n
    assert matrix_step.low_rank_step_temp_bytes(eight, 4) == svd(n, m)
    assert state_terms.optimizer_step_temp_bytes(eight) == svd(n, m)


def test_apollos_step_is_each_tensor_beside_what_the_ones_before_it_left():
    """llama-3.1-8b under bf16 AMP, rank 128 (fp32 gradients, the head 2.1 GB): in transformers' order layer 0's
    q_proj projects (4096 x 128) and takes its denominator beside the head's denom and update; in LLaMA-Factory's the
    head steps after the embedding, 3x the head. A projector update adds the fp32 Gaussian and its scaled copy
    (4 MB), no larger than the two projected tensors it precedes; no copy of an fp32 gradient. transformers'
    all-linear targets the head too: its scaled_grad and the limiter's division, two full-size, beside its three
    projected (128256 x 128) tensors and its channel-wise factor (128256 elements)."""
    head, projected = 4 * 128256 * 4096, 4 * 128 * 4096
    hf, lf = _step_setup("hf", "apollo-adamw", LINEARS), _step_setup("llamafactory", "apollo-adamw")
    assert matrix_step.low_rank_steady_temp_bytes(hf, 4) == 2 * head + 2 * projected
    assert matrix_step.projector_update_temp_bytes(hf, 4) == 2 * head + 2 * projected
    head_targeted = 3 * 4 * 128256 * 128 + 4 * 128256 + 2 * head
    assert matrix_step.low_rank_steady_temp_bytes(_step_setup("hf", "apollo-adamw"), 4) == head_targeted
    assert matrix_step.low_rank_step_temp_bytes(lf, 4) == 3 * head
    assert matrix_step.apollo_projector_temp_bytes((4096, 14336), 128, 2) == 4 * 4096 * 14336 + 8 * 128 * 4096


@pytest.mark.parametrize(
    "precision,wide,measured",
    [("fp32", False, 393_216), ("fp32", True, 838_144), ("bf16-pure", False, 196_608), ("bf16-pure", True, 419_328)],
)
def test_layerwise_apollo_holds_one_gradient_and_its_step_as_measured(precision, wide, measured):
    """transformers' apollo_adamw_layerwise steps each parameter in its gradient's hook (trainer_optimizer.py:164-184):
    one gradient and its step's two full-size temporaries, measured in a real step's hooks on the CPU
    (tests/probes/test_layerwise_low_rank.py, 2026-12-05, the second step; tolerance 15%, as there)."""
    from planner.model.families import from_config
    from tests.planner.estimate.test_torchao_optim import TINY

    config = {**TINY, "vocab_size": 64, "hidden_size": 128, "intermediate_size": 512} if wide else TINY
    knobs = Knobs(
        framework="hf", optimizer="apollo-adamw", optimizer_rank=8, optimizer_in_backward=True, precision=precision
    )
    s = Setup(from_config(config, "tiny-llama"), knobs, 1, 1, 16)
    planned = state_terms.gradients_bytes(s) + matrix_step.low_rank_step_temp_bytes(s, 4 if precision == "fp32" else 2)
    assert planned == pytest.approx(measured, rel=0.15)


def test_muons_newton_schulz_holds_four_updates_and_two_grams_eager_three_and_three_compiled():
    """zeropower_via_newtonschulz5 (LLaMA-Factory 0.9.5 third_party/muon/muon.py:58-73) on llama-3.1-8b's MLP, bf16:
    X, a * X, B @ X and their sum beside A and B (k = 4096, the shorter side, whichever side is longer); compiled,
    X, a * X and the new X beside B, b * A and c * A (tests/probes/test_muon_step.py measures both)."""
    m, n = 14336, 4096
    for shape in ((m, n), (n, m)):
        assert muon_step.newton_schulz_temp_bytes(shape, compiled=False) == 2 * (4 * m * n + 2 * n * n)
        assert muon_step.newton_schulz_temp_bytes(shape, compiled=True) == 2 * (3 * m * n + 3 * n * n)


@pytest.mark.parametrize("framework,compiled", [("llamafactory", False), ("swift", True), ("axolotl", True)])
def test_muons_step_is_each_matrix_beside_the_one_befores_update_or_adamws_beside_the_last(framework, compiled):
    """llama-3.1-8b under bf16 AMP (fp32 gradients): the MLP's up / down step beside gate's / up's bf16 u (muon.py:184
    rebinds it only at the next matrix), with the fp32 Nesterov g (:181); the AdamW loop's two fp32 temporaries of
    the head (:218) beside down_proj's u, left bound after the Muon loop: the larger (4.32 GB)."""
    s = _step_setup(framework, "muon")
    mlp, head = 14336 * 4096, 128256 * 4096
    ns = muon_step.newton_schulz_temp_bytes((14336, 4096), compiled)
    assert muon_step.muon_loop_bytes(s, 4, compiled) == 2 * mlp + 4 * mlp + ns
    assert muon_step.muon_adamw_loop_bytes(s, 4) == 2 * 4 * head + 2 * mlp
    assert matrix_step.matrix_step_temp_bytes(s, 4) == 2 * 4 * head + 2 * mlp == 4_320_133_120


def test_muons_first_matrix_follows_the_last_of_the_layer_before():
    """Layer 0's q_proj steps beside nothing, layer 1's beside layer 0's down_proj u: the walk wraps over the layers."""
    s = _step_setup("llamafactory", "muon")
    shapes = muon_step.muon_hidden_shapes(s)
    assert shapes[0] == ((4096, 4096), 32) and shapes[-1] == ((4096, 14336), 32)
