"""planner.estimate.recipe_terms.whole_logits_logps_bytes against torch: ms-swift 3.4.1's GRPO log-probs of a
multimodal model (swift/trainers/rlhf_trainer/grpo_trainer.py:1192-1197: the model's logits over every token, the
completion's slice divided by the temperature, TRL's selective_log_softmax) on a real bf16 lm_head, its live bytes
traced by probes.tracker from the final hidden states to their gradient.

Measured when pinned (torch 2.13 CPU, vocabulary 16,384, hidden 64): with gradients exactly 2 x rows x (width +
scored) x vocab bytes plus the per-token outputs (under 2 KiB); without, exactly that."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F

from planner.estimate.recipe_terms import whole_logits_logps_bytes
from planner.model.modelspec import TextSpec
from probes.tracker import LiveBytes

VOCAB, HIDDEN = 16384, 64


def selective_log_softmax(logits, index):
    """trl 0.17.0 trl/trainer/utils.py:1693-1701, the half-precision branch: one row's log_softmax at a time."""
    per_token_logps = []
    for row_logits, row_labels in zip(logits, index):
        row_logps = F.log_softmax(row_logits, dim=-1)
        per_token_logps.append(row_logps.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(per_token_logps)


def swift_341_logps(head, hidden, input_ids, logits_to_keep: int, temperature: float = 1.0):
    """ms-swift v3.4.1 grpo_trainer.py:1192-1197 after the model's decoder (the head is the model's lm_head; labels
    are popped before, :1035, so transformers 4.51.3 modeling_qwen2_5_vl.py:1839-1844 keeps the logits in bf16)."""
    logits = head(hidden)
    logits = logits[:, -(logits_to_keep + 1) : -1, :]
    logits = logits / temperature
    input_ids = input_ids[:, -logits_to_keep:]
    return selective_log_softmax(logits, input_ids)


def peak(rows: int, width: int, scored: int, grad: bool) -> int:
    torch.manual_seed(0)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=torch.bfloat16)
    hidden = torch.randn(rows, width, HIDDEN, dtype=torch.bfloat16, requires_grad=grad)
    ids = torch.randint(0, VOCAB, (rows, width))
    with LiveBytes() as t, torch.set_grad_enabled(grad):
        logps = swift_341_logps(head, hidden, ids, scored)
        if grad:
            logps.float().sum().backward()
    return t.peak


@pytest.mark.parametrize("rows,width,scored", [(3, 96, 40), (3, 192, 40), (5, 100, 70)])
def test_the_whole_logits_and_one_scaled_slice_are_the_peak(rows, width, scored):
    t = TextSpec(HIDDEN, 1, 1, 1, HIDDEN, HIDDEN, VOCAB, tied=False, max_positions=4096)
    planned = whole_logits_logps_bytes(t, rows, width, scored, "half")
    assert planned == 2 * rows * (width + scored) * VOCAB
    assert peak(rows, width, scored, grad=False) == planned  # the old-policy and reference passes
    trained = peak(rows, width, scored, grad=True)
    assert planned <= trained <= planned + 16 * rows * width  # + the per-token log-probs and their gradients


def kept_after_return(rows: int, width: int, scored: int) -> int:
    """The bytes ms-swift 3.5-3.6's policy pass leaves live when `_get_per_token_logps` returns with gradients on,
    which its `_compute_loss` then holds through the reference's pass (planner.estimate.ref_in_step)."""
    torch.manual_seed(0)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=torch.bfloat16)
    hidden = torch.randn(rows, width, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    ids = torch.randint(0, VOCAB, (rows, width))
    with LiveBytes() as t:
        logps = swift_341_logps(head, hidden, ids, scored)
        kept = t.live
    del logps
    return kept


@pytest.mark.parametrize("rows,width,scored", [(3, 96, 40), (5, 100, 70)])
def test_the_policy_keeps_each_rows_log_softmax_over_the_completion(rows, width, scored):
    """Measured: exactly 2 x rows x scored x vocab bytes (each row's log_softmax output, saved for its backward)
    plus the per-token log-probs; the whole logits and the scaled slice are freed. Tolerance: the small per-token
    tensors (the planned 8 bytes a scored token)."""
    from planner.config.spec import Knobs
    from planner.config.workload import Workload
    from planner.estimate.ref_in_step import policy_head_saved_bytes
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model

    kept = kept_after_return(rows, width, scored)
    assert 2 * rows * scored * VOCAB <= kept <= 2 * rows * scored * VOCAB + 8 * rows * scored
    model = load_model("qwen2.5-vl-3b")
    w = Workload(kind="grpo", beta=0.04, num_generations=rows, max_prompt_length=width - scored,
                 max_completion_length=scored)  # fmt: skip
    s = Setup(model, Knobs(workload=w, framework="swift", release="3.4"), rows, 1, width)
    planned = policy_head_saved_bytes(s)
    assert planned == 2 * rows * scored * model.text.vocab + 8 * rows * scored
