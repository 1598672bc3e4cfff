"""Muon's step temporaries, one matrix at a time, in bytes (planner.estimate.matrix_step.matrix_step_temp_bytes calls
muon_step_temp_bytes; the momentum buffers and AdamW's moments are planner.estimate.matrix_optim's).

Every framework memplan plans Muon for steps Moonlight's toy_train Muon (MoonshotAI/Moonlight examples/toy_train.py):
LLaMA-Factory 0.9.3+ its copy (src/llamafactory/third_party/muon/muon.py), ms-swift a clone of it
(swift/optimizers/muon.py:18), axolotl axolotl-contribs-mit's (0.0.3-0.0.5 muon.py, 0.0.6 muon/muon.py). One param
group (LLaMA-Factory 0.9.5 train/trainer_utils.py:513-520, contribs 0.0.6 muon/muon.py:227-234): the Muon loop over
the hidden matrices, then the AdamW loop over the rest (LLaMA-Factory 0.9.5 third_party/muon/muon.py:157-193,
195-225). A hidden matrix: the momentum buffer in place, the Nesterov g = g.add(buf) in the gradient's dtype (:181),
u = zeropower_via_newtonschulz5(g) (:184), bf16. u stays bound until the next matrix's replaces it, so each matrix's
step sits beside the one before's u, and the AdamW loop beside the last one's (a Python local is freed when rebound).
LLaMA-Factory calls zeropower_via_newtonschulz5 eagerly (:48, no decorator, v0.9.3-v0.9.5); Moonlight and
axolotl-contribs-mit under @torch.compile (toy_train.py, contribs 0.0.3-0.0.6 muon.py:13), whose generated code fuses
the scalings into addmm and reuses its buffers (Framework.muon_newton_schulz says which). tests/probes/test_muon_step.py pins both
against the CPU allocator."""

from __future__ import annotations

from planner.estimate.matrix_optim import MUON_ADAMW_ROLES, muon_keeps_vectors, trained_tensors
from planner.estimate.setup import Setup
from planner.frameworks import adapter

BF16 = 2


def newton_schulz_temp_bytes(shape: tuple[int, int], compiled: bool) -> int:
    """Bytes zeropower_via_newtonschulz5 (LLaMA-Factory 0.9.5 third_party/muon/muon.py:48-73) holds at its peak
    beyond its input, for an m x n update (k = min(m, n); X is k x max(m, n), the transpose of a tall one, :60-62):
    each of its 5 iterations makes A = X @ X.T and B = b * A + c * A @ A (k x k, :67-68) and X = a * X + B @ X (:69).
    Eager, the last line holds X, a * X, B @ X and their sum beside A and B: 4 bf16 m x n and 2 k x k (A's line holds
    less: X and five k x k, as the bf16 copy and its normalised X do: two m x n). Compiled (torch 2.13 inductor),
    B = addmm(b * A, c * A, A) and X = addmm(a * X, B, X): X, a * X and the new X beside B, and b * A and c * A held
    for the next iteration's reuse: 3 m x n and 3 k x k, the graph compiled with symbolic sizes. The graphs a run's
    first shapes get (static, or automatic dynamic shapes' first recompilations) free b * A and c * A: measured 2 k x k
    less in the last line, A's line then deciding (X, a * X and four k x k) where k x k is over a third of m x n; the
    term plans the larger."""
    m, n = shape
    elements, gram = m * n, min(m, n) ** 2
    if compiled:
        return BF16 * (3 * elements + 3 * gram)
    return BF16 * (4 * elements + 2 * gram)


def muon_matrix_peak_bytes(shape: tuple[int, int], before: int, state_bytes: int, compiled: bool) -> int:
    """One hidden matrix's step beside the u of the matrix before it (`before` elements, bf16): the Nesterov g in the
    gradient's dtype (muon.py:181) and the Newton-Schulz iteration's temporaries (newton_schulz_temp_bytes)."""
    m, n = shape
    return BF16 * before + state_bytes * m * n + newton_schulz_temp_bytes(shape, compiled)


def muon_matrices(s: Setup) -> list[tuple[tuple[int, int], int, str]]:
    """The matrices Muon's loop steps, in the model's order, each with how many times it repeats over the layers and
    its weight's module name: the 2-D trained tensors but the embeddings and the head; under LoRA, each adapted
    weight's A (r x in) and B (out x r) factors (PEFT's order, A first)."""
    if s.lora:
        r = s.knobs.lora_rank
        adapted = [t for t in s.model.tensors if t.adapted(s.knobs.lora_targets)]
        return [(shape, t.count, t.name) for t in adapted for shape in ((r, t.shape[-1]), (t.shape[0], r))]
    hidden = [t for t in trained_tensors(s) if len(t.shape) == 2 and t.role not in MUON_ADAMW_ROLES]
    return [((t.shape[0], t.shape[1]), t.count, t.name) for t in hidden]


def muon_hidden_shapes(s: Setup) -> list[tuple[tuple[int, int], int]]:
    """muon_matrices' shapes and repeats."""
    return [(shape, count) for shape, count, _ in muon_matrices(s)]


def muon_loop_bytes(s: Setup, state_bytes: int, compiled: bool) -> int:
    """The Muon loop's peak: each matrix beside the one before's u (a repeated layer's first matrix follows the last
    matrix of the layer before)."""
    shapes, peak = muon_hidden_shapes(s), 0
    for i, (shape, count) in enumerate(shapes):
        before = shapes[i - 1] if i or count > 1 else None
        elements = before[0][0] * before[0][1] if before else 0
        peak = max(peak, muon_matrix_peak_bytes(shape, elements, state_bytes, compiled))
    return peak


def muon_adamw_loop_bytes(s: Setup, state_bytes: int) -> int:
    """The AdamW loop's peak (muon.py:195-225): buf2.sqrt() and eps + it, then that and buf1 / it (:218), two of the
    largest tensor in the gradient's dtype, beside the last hidden matrix's u (bf16), still bound. Under LoRA, none
    (DoRA's magnitudes and trained embedding copies are not re-examined)."""
    if s.lora:
        return 0
    keeps = muon_keeps_vectors(s)
    rest = [
        t.numel // t.count
        for t in trained_tensors(s)
        if (len(t.shape) == 2 and t.role in MUON_ADAMW_ROLES) or len(t.shape) > 2 or (len(t.shape) < 2 and keeps)
    ]
    if not rest:
        return 0
    shapes = muon_hidden_shapes(s)
    last = shapes[-1][0][0] * shapes[-1][0][1] if shapes else 0
    return 2 * state_bytes * max(rest) + BF16 * last


def muon_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """Muon's step: its loop over the hidden matrices or the AdamW loop after it, the larger."""
    compiled = adapter(s.knobs.framework, s.knobs.release).muon_newton_schulz == "compiled"
    return max(muon_loop_bytes(s, state_bytes, compiled), muon_adamw_loop_bytes(s, state_bytes))
