"""planner.estimate.recipe_terms.swift_logps_bytes against torch: ms-swift 4.6.0's GRPO log-probs (swift/
rlhf_trainers/grpo_trainer.py), the code copied below with its lines, on a real bf16 lm_head, its live bytes traced by
probes.tracker from the final hidden states to their gradient (or through a no-grad pass).

- `_get_logps_via_local_forward` (:1564-1600): the model keeps logits_to_keep + 1 positions, the completion's are
  sliced and divided in place, then TRL's selective_log_softmax; v3.7.0 .. v4.0.0 divide into a copy instead;
- `_get_logps_via_sp` (:1470-1494), under --sequence_parallel_size: the logits of every token of the rank's slice,
  held by the model's output while a divided copy is scored (only the per-token log-probs are gathered, :1491).
Under DDP accelerate's native AMP casts the model's outputs to fp32 (recipe_terms.swift_logits_upcast): TRL's
selective_log_softmax then takes its logsumexp branch.

Measured when pinned (torch 2.13 CPU, vocabulary 16,384, hidden 64): within 0.3% of the planned bytes (tolerance:
2 x rows x vocabulary bytes, a row of logits, plus the per-token outputs), exact for the slice."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F

from planner.estimate.recipe_terms import swift_logps_bytes
from probes.tracker import LiveBytes

VOCAB, HIDDEN = 16384, 64


def selective_log_softmax(logits, index):
    """trl 0.29.1 trl/trainer/utils.py selective_log_softmax (ms-swift 4.6.0 imports it, grpo_trainer.py:47)."""
    index = index.unsqueeze(-1)
    if logits.dtype in (torch.float32, torch.float64):
        selected = torch.gather(logits, dim=-1, index=index)
        lse = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        return (selected - lse.unsqueeze(-1)).squeeze(-1)
    rows = [F.log_softmax(r, dim=-1).gather(dim=-1, index=i) for r, i in zip(logits, index, strict=True)]
    return torch.stack(rows).squeeze(-1)


class Output:
    def __init__(self, logits):
        self.logits = logits


def model(head, hidden, keep, upcast):
    """The decoder's head (transformers keeps the last `keep` positions), its output cast to fp32 where accelerate's
    native AMP wraps the forward (convert_outputs_to_fp32)."""
    logits = head(hidden if keep is None else hidden[:, -keep:, :])
    return Output(logits.float() if upcast else logits)


def local_forward(head, hidden, input_ids, logits_to_keep, upcast, temperature=1.0):
    """grpo_trainer.py:1582-1600 (not padding-free)."""
    logits = model(head, hidden, logits_to_keep + 1, upcast).logits
    logits = logits[:, -(logits_to_keep + 1) : -1, :]
    logits.div_(temperature)
    return selective_log_softmax(logits, input_ids[:, -logits_to_keep:])


def copied(head, hidden, input_ids, logits_to_keep, upcast, temperature=1.0):
    """v3.12.0 grpo_trainer.py:1573-1599 (v3.7.0 :1470-1477, v4.0.0 :1613-1639): divided into a copy."""
    logits = model(head, hidden, logits_to_keep + 1, upcast).logits
    logits = logits[:, -(logits_to_keep + 1) : -1, :] / temperature
    return selective_log_softmax(logits, input_ids[:, -logits_to_keep:])


def via_sp(head, hidden, labels, upcast, temperature=1.0):
    """grpo_trainer.py:1478-1489 on the rank's slice (`hidden`, `labels`: its tokens)."""
    output = model(head, hidden, None, upcast)
    logits = output.logits
    logits = logits / temperature
    return selective_log_softmax(logits, labels)


def peak(rows, width, keep, upcast, grad, path) -> int:
    torch.manual_seed(0)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=torch.bfloat16)
    hidden = torch.randn(rows, width, HIDDEN, dtype=torch.bfloat16, requires_grad=grad)
    ids = torch.randint(0, VOCAB, (rows, width))
    with LiveBytes() as t, torch.set_grad_enabled(grad):
        if path == "slice":
            logps = via_sp(head, hidden, ids, upcast)
        else:
            logps = (local_forward if path == "kept" else copied)(head, hidden, ids, keep, upcast)
        if grad:
            logps.float().sum().backward()
    return t.peak


@pytest.mark.parametrize("path", ["kept", "copied", "slice"])
@pytest.mark.parametrize("upcast", [False, True], ids=["bf16", "fp32"])
@pytest.mark.parametrize("grad", [True, False], ids=["trained", "no-grad"])
@pytest.mark.parametrize("rows,width,keep", [(3, 96, 40), (5, 100, 70)])
def test_swift_logps_bytes_is_the_traced_peak(rows, width, keep, upcast, grad, path):
    tokens = width if path == "slice" else keep
    planned = swift_logps_bytes(rows, tokens, VOCAB, 2, upcast, grad, path)
    measured = peak(rows, width, keep, upcast, grad, path)
    assert abs(measured - planned) <= 2 * rows * VOCAB + 16 * rows * width, (measured, planned)


def test_the_slice_scores_every_token_where_the_kept_logits_score_the_completion():
    """Why sequence parallel costs more head per token: 96 tokens of a slice against 40 kept of 96 (bf16, trained)."""
    kept = swift_logps_bytes(3, 40, VOCAB, 2, False, True, "kept")
    assert swift_logps_bytes(3, 96, VOCAB, 2, False, True, "slice") > 1.7 * kept
