"""ms-swift 4's MuonClip (`--optimizer muonclip`, swift/optimizers/muonclip.py, v4.0.0 .. 4.6.0, read at v4.5.2): its
step's temporaries, in bytes (its states: planner.estimate.matrix_optim.muonclip_state_bytes), which
planner.estimate.matrix_step calls; tests/probes/test_muonclip.py pins both against ms-swift's own optimizer in its venv.

- The groups (MuonClipOptimizerCallback.create_optimizer, muonclip.py:334-476): every trained tensor of two or more
  dimensions whose name has neither the embedding's nor the head's goes to Muon, those whose name has q_proj or k_proj
  first (the QK-clip group), then the other Muon matrices; the rest (vectors, embeddings, head) to a plain momentum
  group. One param-group list, stepped in that order (step, :264-331).
- States: `momentum_buffer = zeros_like(p)` for every parameter with a gradient (:293-294), in the parameter's
  dtype, whatever its group; no second moment anywhere (the rest group steps `update = buf`, :310).
- A Muon matrix's step: `orth = newton_schulz(buf)` (:304, eager, no torch.compile: X = G.bfloat16() / norm, five
  iterations of A = X @ X.T, B = b * A + c * A @ A, X = a * X + B @ X, :220-242, the body of Moonlight's
  zeropower_via_newtonschulz5: planner.estimate.muon_step.newton_schulz_temp_bytes), then `update = orth * rms_scale`
  (:308) in the buffer's dtype. Both stay bound until the next matrix rebinds them, so each matrix's Newton-Schulz
  runs beside the matrix before's orth and update; the QK group's clip, where the step's max logit passes
  qk_clip_tau (100 by default, :376; its upper bound from the q and k norms under SDPA and flash-attn, :87-121),
  makes `update * gamma_sqrt` beside both (:326). Nesterov (off by default, :374) is not planned.
- Its max-logit tracker patches softmax, SDPA and flash-attn for the whole process (:16-180, 53-84 softmax): under SDPA and
  flash-attn a transient fp32 copy of q and of k in each attention call (a few MB); under eager attention an fp32
  copy of each layer's attention scores, which is not planned (planner.frameworks.swift's rule refuses eager).
"""

from __future__ import annotations

from planner.estimate.muon_step import muon_matrices, newton_schulz_temp_bytes
from planner.estimate.setup import Setup

QK_NAMES = ("q_proj", "k_proj", ".wq", ".wk", "/wq", "/wk")  # muonclip.py:394-398 _is_qk_name


def _is_qk(name: str) -> bool:
    return any(n in name.lower() for n in QK_NAMES)


def muonclip_groups(s: Setup) -> list[list[tuple[tuple[int, int], int, bool]]]:
    """The Muon matrices (muon_step.muon_matrices: the same ones Muon steps) in step order, per group (QK first, then
    the others): (shape, repeats, is_qk); a LoRA factor is named after its weight (q_proj.lora_A is a QK matrix)."""
    mats = [(shape, count, _is_qk(name)) for shape, count, name in muon_matrices(s)]
    return [[m for m in mats if m[2]], [m for m in mats if not m[2]]]


def muonclip_matrix_peak_bytes(shape: tuple[int, int], before: int, state_bytes: int, qk: bool) -> int:
    """One Muon matrix's step beside the matrix before's orth and update (`before` elements each, in the buffer's
    dtype): its Newton-Schulz temporaries, then its own orth and update beside the before's update, and for a QK
    matrix the clipped update beside both."""
    m, n = shape
    e = m * n
    ns = 2 * state_bytes * before + newton_schulz_temp_bytes(shape, compiled=False)
    held = state_bytes * before + 2 * state_bytes * e
    return max(ns, held, 3 * state_bytes * e if qk else 0)


def muonclip_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """The step's peak over every Muon matrix: a group's first matrix follows the group before's last (or, for the
    second and later layers, its own group's last)."""
    peak, last = 0, 0
    for group in muonclip_groups(s):
        sizes = [shape[0] * shape[1] for shape, _, _ in group]
        for i, (shape, count, qk) in enumerate(group):
            befores = [sizes[i - 1]] if i else [last] + ([sizes[-1]] if count > 1 else [])
            peak = max(peak, *(muonclip_matrix_peak_bytes(shape, b, state_bytes, qk) for b in befores))
        last = sizes[-1] if sizes else last
    return peak
