"""Task heads (the `task` knob): the model a task trains, the rows an example runs, and the head's and loss's memory
in place of the vocabulary logits.

- seq-cls and reranker: transformers' GenericForSequenceClassification (transformers 5.25 modeling_layers.py:138:
  `score = nn.Linear(hidden, num_labels, bias=False)` in place of lm_head; :167 the score over every token, :189 the
  last non-pad token's row pooled; loss/loss_utils.py:97-121 MSE for one label, cross-entropy over the pooled rows
  otherwise). ms-swift 4.6 loads it for --task_type seq_cls and reranker (a reranker: num_labels 1, its pointwise
  BCE or listwise group cross-entropy over the pooled scores, swift/loss/reranker.py:12-107); TRL 1.16's
  RewardTrainer with num_labels 1 (trl/trainer/reward_trainer.py:396), chosen and rejected rows in one batch and
  -logsigmoid(chosen - rejected) (:778-790).
- embedding: ms-swift 4.6 replaces lm_head's forward by the identity (swift/model/patcher.py:107-134), pools the last
  valid token's hidden state and L2-normalizes it; each example is an anchor, a positive and its negatives, each a
  row (swift/loss/embedding.py:181-215: the [B, D] queries against the [B x (negatives + 1), D] documents, gathered
  over the data-parallel ranks, cross-entropy over that similarity matrix).
- generative-reranker: the causal LM and its vocabulary head (ms-swift scores the yes/no token's logits).
- seq-cls's reward model where the framework trains trl's value-head model (Framework.value_head_rm: LLaMA-Factory's
  stage rm, 0.9.5 model/loader.py:185-187): the causal LM keeps its vocabulary head, whose logits every forward makes
  and casts to fp32 before they are discarded (trl 0.24.0 models/modeling_value_head.py:169-181), beside trl's
  ValueHead (dropout 0.1, the fp32 Linear to one value: :50-59); the pairwise loss over the last valid token's values
  (LLaMA-Factory 0.9.5 train/rm/trainer.py:98-109). The ValueHead's hidden + 1 fp32 parameters are not counted; an
  untied vocabulary head gets no gradient (its logits are discarded): on one GPU without ZeRO or FSDP it is idle
  (trained.frozen_modules), where DeepSpeed's flat partitions and FSDP hold its gradient and states.
"""

from __future__ import annotations

from dataclasses import replace

from planner.config.tasks import NO_VOCABULARY
from planner.model.modelspec import ModelSpec, Tensors

FP32 = 4


def value_head_rm(k) -> bool:
    """The framework trains this seq-cls reward model as trl's value-head model (Framework.value_head_rm); `k`: Knobs
    or a Plan."""
    from planner.frameworks import FRAMEWORKS, adapter

    return k.task == "seq-cls" and k.framework in FRAMEWORKS and adapter(k.framework, k.release).value_head_rm


def task_model(m: ModelSpec, task: str, num_labels: int, value_head: bool = False) -> ModelSpec:
    """The model a task trains: seq-cls and reranker a score head of num_labels x hidden in place of the vocabulary
    head (the input embedding stays, untied), its logits num_labels a token; embedding no logits at all (lm_head's
    weight is kept: its forward is the identity); `value_head` (value_head_rm) the causal LM whole. Idempotent (Setup
    applies it)."""
    if task not in NO_VOCABULARY or value_head or m.name.endswith(f" ({task})"):
        return m
    if task == "embedding":
        return replace(m, name=f"{m.name} ({task})", text=replace(m.text, vocab=0))
    body = tuple(t for t in m.tensors if t.role != "head")
    score = Tensors("head", (num_labels, m.text.hidden), name="score")
    text = replace(m.text, vocab=num_labels, tied=False)
    return replace(m, name=f"{m.name} ({task})", text=text, tensors=(*body, score))


def rows_per_example(task: str, negatives: int) -> int:
    """Rows the model runs for one example of the micro-batch: embedding its anchor, positive and negatives; a
    reranker its positive and negative documents; a reward model (seq-cls with negatives 1) chosen and rejected."""
    if task == "causal-lm":
        return 1
    return (2 if task == "embedding" else 1) + negatives


def score_logits_bytes(tokens: int, num_labels: int, compute_bytes: int) -> int:
    """The score over every token (GenericForSequenceClassification scores the whole sequence before pooling), in
    the compute dtype; in backward the pooling's gradient is as large (index backward scatters into zeros of the
    logits' shape), after the forward's logits are gone: one of them at a time."""
    return tokens * num_labels * compute_bytes


def pooled_loss_bytes(rows: int, num_labels: int) -> int:
    """The pooled rows' logits, the fp32 loss inputs and their gradients: rows x num_labels, a few copies."""
    return 4 * FP32 * rows * num_labels


def similarity_matrix_bytes(queries: int, documents: int) -> int:
    """InfoNCE's similarity matrix [queries, documents] (every rank's documents gathered), with cross-entropy's
    log-softmax and the gradient of each: three fp32 copies."""
    return 3 * FP32 * queries * documents


def pooled_embeddings_bytes(rows: int, hidden: int, compute_bytes: int) -> int:
    """The last token's hidden state per row and its L2-normalized copy (F.normalize saves its input and norm)."""
    return 2 * rows * hidden * compute_bytes + FP32 * rows


def value_head_bytes(tokens: int, vocab: int, hidden: int, compute_bytes: int, amp: bool) -> int:
    """At the value-head model's forward end: the vocabulary logits in the compute dtype and their fp32 copy (one copy
    where they are fp32 already), the ValueHead's dropout mask (CUDA's fused dropout, one byte an element) and its
    Linear's saved input (the fp32 cast, or its bf16 copy under autocast) over every token, and the values. Measured
    on LLaMA-Factory 0.9.5's compute_loss and trl 0.24.0's ValueHead (probes/lf_valuehead.py): exact but for the CPU's
    dropout, which keeps a 2-byte noise tensor where CUDA keeps the mask (tests/probes/test_lf_valuehead.py)."""
    logits = tokens * vocab * (compute_bytes + FP32 if compute_bytes != FP32 else FP32)
    saved = 2 if amp else FP32  # the Linear's input: autocast's bf16 copy, or the fp32 cast
    return logits + tokens * hidden * (1 + saved) + tokens * (2 if amp else FP32)


def task_head_bytes(task: str, rows: int, tokens: int, hidden: int, num_labels: int, negatives: int, c: int, dp: int):
    """The head's and loss's memory at the start of backward for a task without the vocabulary head (what
    activations.logits_loss_bytes is for the causal LM); `rows`: the micro-batch's rows (examples x rows_per_example),
    `dp`: the data-parallel ranks whose documents InfoNCE gathers."""
    if task == "embedding":
        per = rows_per_example(task, negatives)
        queries = rows // per
        return pooled_embeddings_bytes(rows, hidden, c) + similarity_matrix_bytes(queries, queries * (per - 1) * dp)
    return score_logits_bytes(tokens, num_labels, c) + pooled_loss_bytes(rows, num_labels)
