"""torch's nn.DataParallel (issue 49 item 2): one process over the node's GPUs, as HF's Trainer runs a script started
without a launcher on several visible GPUs (LLaMA-Factory before v0.8.0: `llamafactory-cli train` ran the training in
its own process, v0.7.1 src/llmtuner/cli.py:64-65; v0.8.0 starts torchrun instead, src/llamafactory/cli.py:74-87).
It owns what GPU 0 holds beyond a DDP rank's memory; the other GPUs hold a replica and their own activations, less.

Read in transformers 4.40.2 (LLaMA-Factory v0.7.1 pins transformers>=4.37.2; 4.40 was the release of its day):
- training_args.py:2083 `_setup_devices`: not distributed, n_gpu = torch.cuda.device_count(); :1970 the Trainer's
  batch is per_device_train_batch_size x n_gpu, so each GPU's replica gets the micro-batch (DDP's arithmetic);
- trainer.py:1628-1629 `_wrap_model`: n_gpu > 1 wraps the model in nn.DataParallel; :3161-3186 compute_loss takes
  outputs["loss"] and drops the outputs, so the gathered logits are freed before backward (trainer.py:3140 loss.mean());
- models/llama/modeling_llama.py:1230-1231: the forward returns fp32 logits (logits.float()), through 4.45
  (4.45.2 :1214-1219); from 4.46.0 it returns them in the model's dtype (Framework.returned_logits).
And in torch's nn/parallel (torch 2.13.0 as installed; the same calls since torch 1.x): data_parallel.py:186-197
scatters the inputs, replicates the module, runs the replicas and gathers their outputs onto GPU 0; replicate.py:136
broadcasts the parameters with _functions.Broadcast (the source device's outputs are its own tensors: comm.py
broadcast_coalesced, `devices` (src, dst1, ...)); scatter_gather.py:127-142 gathers a ModelOutput key by key;
_functions.py:109 Gather.forward allocates the concatenation on GPU 0 (comm.gather); Broadcast's backward
(_functions.py:39-40, ReduceAddCoalesced: comm.reduce_add_coalesced :65) sums every replica's gradients onto GPU 0
once the whole backward has run.

GPU 0, beyond a DDP rank (no DDP buckets): at the gather, replica 0's returned logits and the loss's saved fp32
log-softmax beside the gathered logits of every replica; at the end of backward, replica 0's gradients held by the
Broadcast node beside their sum."""

from __future__ import annotations

from planner.estimate import activations as act
from planner.estimate.setup import Setup
from planner.frameworks import adapter


def gathered_logits_bytes(replicas: int, rows: int, tokens: int, vocab: int, logits_bytes: int) -> int:
    """Gather.forward's concatenation on GPU 0 of every replica's logits (rows x tokens x vocab each)."""
    return replicas * rows * tokens * vocab * logits_bytes


def logits_dtype_bytes(s: Setup, profile: str) -> int:
    """Bytes of a logit the model's forward returns: fp32 through transformers 4.45, else the compute dtype."""
    fw = adapter(s.knobs.framework, s.knobs.release)
    return 4 if fw.returned_logits == "fp32" else act.saved_dtype_bytes(profile)[1]


def gather_moment_bytes(s: Setup, rows: int, tokens: int, vocab: int, profile: str) -> int:
    """GPU 0's loss and logits when the replicas' outputs are gathered (the end of forward): replica 0's returned
    logits and cross_entropy's saved fp32 log-softmax (the shifted copy is freed with the forward's frame), and the
    gathered logits of every replica (`s.world_size` GPUs: one node)."""
    b = logits_dtype_bytes(s, profile)
    return (b + 4) * rows * tokens * vocab + gathered_logits_bytes(s.world_size, rows, tokens, vocab, b)


def phases(
    s: Setup, shape: tuple[int, int, str], states: tuple, end: tuple, others_temp: int, grads: int, evaluation=None
) -> dict:
    """GPU 0's forward phase at the gather (`states`: the gradients accumulated so far, the optimizer states and the
    saved activations; `others_temp`: the backward start's temporaries beside the loss's) and its end of backward
    (`end`, memory._breakdown's: gradients, optimizer states, activations, temporaries) with replica 0's gradients
    held beside their sum (`grads`: every trainable gradient; the first micro-step's sum becomes .grad, a later one's
    is added to it); `evaluation`, the evaluation phase where the run evaluates, with its gathered logits.
    `shape`: rows, tokens a row and the activation profile (activation_terms.text_shape)."""
    rows, tokens, profile = shape
    extra = grads * (2 if s.grad_accum > 1 else 1)
    vocab = s.model.text.vocab
    gather = gather_moment_bytes(s, rows, tokens, vocab, profile)
    out = {"forward": (*states, others_temp + gather), "end-of-backward": (*end[:3], end[3] + extra)}
    if evaluation is not None:  # prediction_step's forward gathers its logits too (beside nograd's transient)
        b = logits_dtype_bytes(s, profile)
        more = gathered_logits_bytes(s.world_size, s.knobs.eval_batch, s.seq_len, vocab, b)
        out["evaluation"] = (*evaluation[:3], evaluation[3] + more)
    return out
