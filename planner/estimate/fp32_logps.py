"""Log-probs from the whole logits cast to fp32 (Framework.fp32_logps, Framework.kto_keeps_logits): LLaMA-Factory's
DPO and KTO cast the model's logits to fp32 and take one log_softmax over every row (0.9.5 src/llamafactory/train/
dpo/trainer.py:230, kto/trainer.py:179, trainer_utils.py:608-612; v0.6.0 src/llmtuner/train/dpo/trainer.py:93, v0.8.0
dpo :156, kto :118 alike). What is live, in units of one fp32 copy of the [rows, seq, vocab] logits:
- the policy's forward keeps two: the fp32 logits (DPO: the split views in its output, :239, read by the metrics at
  :311-312 after the reference pass; KTO from v0.9.1: the chosen and rejected index copies, kto/trainer.py:194-196,
  read at :258, :264; v0.8.0-v0.9.0 free them, v0.8.0 :118-121, one copy less) and log_softmax's output, saved
  for backward (the half-precision logits are freed once cast);
- a no-grad pass (the reference's, KTO's KL batch) holds two at its log_softmax; KTO's reference pass holds
  its rows' fp32 logits (for the index copies) over its KL batch's pass, three (from v0.9.1);
- the head's backward (the logits freed with get_batch_loss_metrics): the saved output, gather's scattered gradient
  and the sliced logits' gradient, three.
Measured with probes.tracker on LLaMA-Factory 0.9.5's own get_batch_logps (probes/lf_logps.py, its venv; and on the
cited copy), and LLaMA-Factory's DPO and KTO steps in the sim on real CPU tensors: tests/probes/test_lf_logps.py,
tests/probes/test_kto.py (within 0.5%)."""

from __future__ import annotations

from planner.estimate.setup import Setup
from planner.frameworks import FRAMEWORKS, adapter

FP32_BYTES = 4


def scores_fp32(s: Setup) -> bool:
    """The framework's release scores this DPO or KTO run's whole logits in fp32 (Framework.fp32_logps)."""
    k = s.knobs
    if k.workload.kind not in ("dpo", "kto") or k.workload.logprobs != "full" or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).fp32_logps


def keeps_rows_logits(s: Setup) -> bool:
    """KTO's reference pass keeps its rows' fp32 logits over its KL batch's pass (Framework.kto_keeps_logits)."""
    return s.knobs.workload.kind == "kto" and adapter(s.knobs.framework, s.knobs.release).kto_keeps_logits


def fp32_logits_bytes(tokens: int, vocab: int) -> int:
    """One fp32 copy of the logits of `tokens` tokens."""
    return FP32_BYTES * tokens * vocab


def policy_keeps_logits(s: Setup) -> bool:
    """The policy's fp32 logits stay live after its forward: DPO's split views; KTO's index copies where it keeps
    them (v0.8.0-v0.9.0's KTO frees them: Framework.kto_keeps_logits)."""
    return s.knobs.workload.kind == "dpo" or keeps_rows_logits(s)


def policy_kept_bytes(tokens: int, vocab: int, logits_kept: bool) -> int:
    """log_softmax's saved output, live over the passes after the policy's forward, and the policy's fp32 logits."""
    return (2 if logits_kept else 1) * fp32_logits_bytes(tokens, vocab)


def nograd_pass_bytes(tokens: int, vocab: int, compute_bytes: int, rows_kept: bool) -> int:
    """A no-grad pass at its head: the fp32 logits and their log_softmax (the half-precision logits beside the fp32
    copy while it is made, less); with `rows_kept`, the rows' fp32 logits beside the KL batch's."""
    logits = fp32_logits_bytes(tokens, vocab)
    return max(2 * logits, logits + compute_bytes * tokens * vocab) + (logits if rows_kept else 0)


def backward_head_bytes(tokens: int, vocab: int) -> int:
    """The head's backward: log_softmax's saved output, the gathered log-probs' scattered gradient and the logits'."""
    return 3 * fp32_logits_bytes(tokens, vocab)
