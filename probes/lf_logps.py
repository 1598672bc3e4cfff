"""LLaMA-Factory's DPO and KTO log-prob heads on real CPU tensors, traced by probes.tracker: a bf16 lm_head's logits
cast to fp32, then get_batch_logps over the whole [rows, seq, vocab] logits (0.9.5 src/llamafactory/train/
trainer_utils.py:592-612), in the trainers' order (train/dpo/trainer.py:219-250, 277-312; train/kto/trainer.py:179-199,
202-219, 221-236). Run with LLaMA-Factory's own venv it imports its get_batch_logps; elsewhere a line-by-line copy.
`python probes/lf_logps.py ROWS WIDTH VOCAB` prints the peaks (bytes) of each moment as JSON; `sim_loss` runs the same
order on a whole model inside probes.rl_sim's steps."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext

import torch

from probes.tracker import LiveBytes

IGNORE_INDEX = -100  # llamafactory 0.9.5 extras/constants.py IGNORE_INDEX


def copied_get_batch_logps(logits, labels, label_pad_token_id: int = IGNORE_INDEX):
    """0.9.5 train/trainer_utils.py:592-621 without ld_alpha (None in both trainers' calls)."""
    if logits.shape[:-1] != labels.shape:  # :605-606
        raise ValueError("Logits (batchsize x seqlen) and labels must have the same shape.")
    labels = labels[:, 1:].clone()  # :608
    logits = logits[:, :-1, :]  # :609
    loss_mask = labels != label_pad_token_id  # :610
    labels[labels == label_pad_token_id] = 0  # :611
    per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)  # :612
    valid_length = loss_mask.sum(-1)  # :614
    return (per_token_logps * loss_mask).sum(-1), valid_length  # :634, :636 (ld_alpha None)


try:  # LLaMA-Factory's own, where its venv runs this
    from llamafactory.train.trainer_utils import get_batch_logps

    SOURCE = "llamafactory"
except ImportError:
    get_batch_logps, SOURCE = copied_get_batch_logps, "copy"


def _forward(head, hidden, labels):
    """The trainers' forward: .logits.to(torch.float32) (dpo/trainer.py:230, kto/trainer.py:179), then the log-probs."""
    logits = head(hidden).to(torch.float32)
    logps, valid = get_batch_logps(logits=logits, labels=labels)
    return logits, logps, logps / valid


def _kto_concatenated(head, hidden, labels, tags):
    """kto/trainer.py:187-199: the rows, the KL batch under no_grad, the index copies of the chosen and rejected."""
    logits, logps, _ = _forward(head, hidden, labels)
    with torch.no_grad():
        _, kl_logps, _ = _forward(head, hidden.detach().flip(0), labels)
    return logps, logits[tags], logits[~tags], kl_logps


def peaks(kind: str, rows: int, width: int, vocab: int, hidden_size: int = 64) -> dict[str, int]:
    """The peak live bytes (from the final hidden states on) of the policy's forward, the reference pass that follows
    it with the policy's tensors live, and backward."""
    torch.manual_seed(0)
    head = torch.nn.Linear(hidden_size, vocab, bias=False, dtype=torch.bfloat16)
    hidden = torch.randn(rows, width, hidden_size, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (rows, width))
    tags = torch.arange(rows) % 2 == 0
    out = {}
    with LiveBytes() as t:
        if kind == "dpo":  # dpo/trainer.py:230-250: the split views keep the fp32 logits to the metrics (:311-312)
            logits, logps, _ = _forward(head, hidden, labels)
            kept = (logits.split(rows // 2), logps)
            del logits  # the dict's split views hold them to get_batch_loss_metrics' end
            out["policy_forward"] = t.peak
            with torch.no_grad():  # compute_reference_log_probs (:255-275), the policy's output live
                _forward(head, hidden.detach(), labels)
        else:  # kto/trainer.py:221-236: the policy's chosen / rejected copies live through the reference's pass
            kept = _kto_concatenated(head, hidden, labels, tags)
            logps = kept[0]
            out["policy_forward"] = t.peak
            with torch.no_grad():
                _kto_concatenated(head, hidden.detach(), labels, tags)
        out["reference"] = t.peak
        del kept
        t.peak = t.live
        logps.sum().backward()
        out["backward"] = t.peak
    return out


def _model_logps(model, ids, inputs, k):
    """dpo/trainer.py:230-233, kto/trainer.py:179-180: the model's logits cast to fp32 (the same tensor at fp32), then
    get_batch_logps over every row (the rows are their own labels here)."""
    from probes.step import autocast_for

    with autocast_for(k, "cuda") or nullcontext():
        logits = model(input_ids=ids, **inputs, use_cache=False).logits.to(torch.float32)
    return logits, get_batch_logps(logits=logits, labels=ids)[0]


def sim_loss(case, policy, ref, ids, inputs, tracker: LiveBytes) -> torch.Tensor:
    """LLaMA-Factory's get_batch_loss_metrics on a whole model (dpo/trainer.py:277-312; kto/trainer.py:221-236 and
    its concatenated_forward, :187-199, as `_kto_concatenated`): the policy's fp32 logits (DPO's split views, KTO's
    index copies) live through the reference's pass, freed before backward; the sigmoid / KTO losses of the sim."""
    from planner.frameworks import adapter

    w, k = case.knobs.workload, case.knobs
    keeps = w.kind == "dpo" or adapter(k.framework, k.release).kto_keeps_logits
    tags = torch.arange(ids.size(0)) < ids.size(0) // 2
    logits, logp = _model_logps(policy, ids, inputs, k)
    if not keeps:  # v0.8.0-v0.9.0's KTO forward returns the log-probs only (v0.8.0 kto/trainer.py:118-121)
        logits = None
    if w.kind == "kto":  # the KL batch without grad, the rows' logits live (kto/trainer.py:187-189)
        tracker.set_segment("kl-forward")
        with torch.no_grad():
            _model_logps(policy, ids, inputs, k)
        tracker.set_segment("training")
        logits = (logits[tags], logits[~tags]) if keeps else None  # :194-196
    ref_logp = torch.zeros_like(logp)
    if ref is not None:  # compute_reference_log_probs: the same concatenated_forward without grad
        tracker.set_segment("reference-forward")
        with torch.no_grad():
            ref_logits, ref_logp = _model_logps(ref, ids, inputs, k)
            if not keeps:
                ref_logits = None
            if w.kind == "kto":
                _model_logps(ref, ids, inputs, k)  # its KL batch, the rows' logits held for the index copies
                copies = (ref_logits[tags], ref_logits[~tags]) if keeps else None
                del copies
            del ref_logits
        tracker.set_segment("training")
    del logits  # get_batch_loss_metrics returns: its logits go
    chosen, rejected = (logp - ref_logp).chunk(2)
    if w.kind == "kto":
        return torch.cat((1 - torch.sigmoid(0.1 * chosen), 1 - torch.sigmoid(-0.1 * rejected))).mean()
    return -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()


if __name__ == "__main__":
    rows, width, vocab = (int(a) for a in sys.argv[1:4])
    print(json.dumps({"source": SOURCE, **{k: peaks(k, rows, width, vocab) for k in ("dpo", "kto")}}))
