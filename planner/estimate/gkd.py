"""GKD's own memory (`--workload gkd`): the teacher's weights resident beside the student, its logits per token
(no grad), and the generalized JSD over the vocabulary, as the framework's loss code holds them
(Framework.gkd_loss; planner.estimate.rl puts them in its phases).

TRL 1.16 (trl/experimental/gkd/gkd_trainer.py), `gkd_loss` "whole":
- the teacher: AutoModelForCausalLM.from_pretrained(teacher, **teacher_model_init_kwargs) (:173-175; no dtype given is
  transformers 5's "auto", the checkpoint's dtype, modeling_utils.py:4236-4237), then prepare_deepspeed (:191-192:
  sharded under ZeRO-3, whole on every rank at other stages, trl/models/utils.py:282-288, put in eval mode :288) or
  accelerator.prepare_model(evaluation_mode=True) (:194);
- compute_loss (:324-361): the student's forward, then the teacher's under torch.no_grad in eval mode, both logits of
  every token ([:, :-1] views), and generalized_jsd_loss (:237-322) over all of them: the logits divided by the
  temperature (the default 1.0: compute_loss passes none), log_softmax of both, for 0 < beta < 1 the stacked mixture
  and its logsumexp, two kl_div and their weighted sum; the mask is applied to the per-entry JSD at the end;
- TRL v1.0.0 .. v1.6.x (`gkd_loss` "completion"): the same, the JSD over the completion's positions only (the logits
  sliced from the padded prompt's width, v1.0.0 gkd_trainer.py:374-377);
- with probability lmbda (:416) the student generates max_new_tokens after each micro-batch's prompts
  (generate_on_policy_outputs :364-404), use_cache off under gradient checkpointing (:221).
ms-swift 4.6.0 (swift/rlhf_trainers/gkd_trainer.py, gkd_loss.py), `gkd_loss` "chunked":
- the teacher loaded as the student is (--torch_dtype; pipelines/train/rlhf.py:88-111, requires_grad_(False).eval()),
  prepared with DeepSpeed (its own --teacher_deepspeed or the student's), FSDP or accelerate
  (rlhf_trainers/rollout_mixin.py:229-250); no --teacher_model: the student itself without grad (:173-179);
- compute_loss (gkd_trainer.py:117-198): both logits trimmed to the completion (logits_to_keep, trainers/mixin.py:
  1271-1293), the active tokens copied out (gkd_loss.py:175-216), divided by the temperature, and jsd_loss
  (:94-148) in chunks of 512 tokens whose graphs all stay alive until backward;
- generation over the generation batch (steps_per_generation micro-batches, args_mixin.py:205-207) like GRPO's.
Both run the logits through accelerate's convert_outputs_to_fp32 under native AMP (not under DeepSpeed:
recipe_terms.swift_logits_upcast), so the loss runs in fp32 there and in the model's dtype under DeepSpeed.
The per-entry counts below were measured on the frameworks' own loss functions (tests/planner/estimate/
test_gkd_loss.py)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from planner.estimate import recipe_terms
from planner.estimate.nograd import compute_dtype_bytes, nograd_forward_bytes
from planner.estimate.setup import Setup
from planner.frameworks import adapter
from planner.model.modelspec import ModelSpec

SWIFT_JSD_CHUNK = 512  # gkd_loss.py:100,233: jsd_loss's chunk_size


@lru_cache(maxsize=16)
def load_teacher(ref: str) -> ModelSpec:
    from planner.model import catalog

    return catalog.load_model(ref)


def teacher_of(s: Setup) -> ModelSpec | None:
    """The teacher's model; None: the student itself is the teacher (no second copy)."""
    ref = s.knobs.workload.teacher_model
    return load_teacher(ref) if ref else None


def loss_style(s: Setup) -> str:
    """How the plan's framework computes the JSD: "whole" (TRL), "completion" (TRL v1.0.0 .. v1.6.x) or "chunked"
    (ms-swift)."""
    return adapter(s.knobs.framework, s.knobs.release).gkd_loss or "whole"


def teacher_params_bytes(s: Setup) -> int:
    """The teacher's weights on this rank: the compute dtype, sharded under ZeRO-3 or FSDP as the student is, or as
    its own DeepSpeed config places them (workload.teacher_sharding: ms-swift's --teacher_deepspeed, prepared by
    rlhf_trainers/rollout_mixin.py:229-250): whole, ZeRO-3 shards, or none on the GPU under ZeRO-3's parameter
    offload (what it gathers for each forward: teacher_gathered_bytes)."""
    m = teacher_of(s)
    if m is None:
        return 0
    whole = m.params * compute_dtype_bytes(s)
    return {"whole": whole, "zero3": whole // s.world_size, "zero3-offload": 0}[teacher_placement(s)]


def teacher_placement(s: Setup) -> str:
    """Where the teacher's weights sit: its own setting, or as the student's are (ZeRO-3 and FSDP shard it)."""
    placed = s.knobs.workload.teacher_sharding
    if placed == "as-student":
        return "zero3" if s.knobs.zero_stage == 3 or s.knobs.fsdp != "off" else "whole"
    return placed


def teacher_gathered_bytes(s: Setup) -> int:
    """A ZeRO-3 teacher's (sharded or offloaded) parameters gathered while it runs: ZeRO-3's gathered set and a
    prefetch batch's staging buffer (zero.zero3_gathered_param_elements, zero3_staging_elements, pinned for the
    student) over the teacher's modules at DeepSpeed's defaults; no gradient. 0 for a whole teacher, and under FSDP
    (planned as ZeRO-3's shards)."""
    from planner.estimate import zero  # zero's terms ask for the trained parameters: imported where used

    m = teacher_of(s)
    if m is None or teacher_placement(s) == "whole" or s.knobs.fsdp != "off":
        return 0
    ts = replace(s, model=m, knobs=s.knobs.model_copy(update={"zero_stage": 3, "zero_buckets": ""}))
    return compute_dtype_bytes(s) * (zero.zero3_gathered_param_elements(ts) + zero.zero3_staging_elements(ts))


def logits_entry_bytes(s: Setup) -> int:
    """Bytes of one logit as the loss gets it: fp32 behind accelerate's cast, else the model's dtype."""
    return 4 if recipe_terms.swift_logits_upcast(s.knobs) else compute_dtype_bytes(s)


def logit_tokens(s: Setup) -> int:
    """Tokens per row whose logits each model hands the loss: every token (TRL), or the completion and the position
    before it (ms-swift's logits_to_keep)."""
    w = s.knobs.workload
    return s.seq_len if loss_style(s) != "chunked" else min(s.seq_len, w.scored_tokens() + 1)


def model_logits_bytes(s: Setup, rows: int) -> int:
    """One model's logits for the loss (the student's or the teacher's)."""
    return logits_entry_bytes(s) * rows * logit_tokens(s) * s.model.text.vocab


def whole_jsd_temp_bytes(tokens: int, scored: int, vocab: int, entry: int, beta: float) -> int:
    """TRL's generalized_jsd_loss at its peak beside the two logits, over `tokens` shifted positions of which `scored`
    are labelled: 15 logits-sized tensors for 0 < beta < 1 (the two temperature-divided copies, the two log_softmax
    outputs, the stacked mixture (2), its logsumexp, the kl_div terms and their weighted sum), 7 for forward or
    reverse KL, and under reverse KL the masked JSD's copy of the labelled positions besides."""
    if 0 < beta < 1:
        return 15 * entry * tokens * vocab
    return 7 * entry * tokens * vocab + (entry * scored * vocab if beta == 1 else 0)


def chunked_jsd_temp_bytes(scored: int, vocab: int, entry: int, beta: float) -> int:
    """ms-swift's gkd_loss at its peak beside the two logits, over `scored` active positions: 4 rows per position
    made before the chunks (the two copied-out rows and their temperature-divided copies), what each chunk before the
    running one keeps for backward (7 rows a position for 0 < beta < 1, 2 for forward KL, 3 for reverse) and the
    running chunk's own (9, 5, 5): at the last chunk, or at the full one before it where the last is short."""
    keep, own = {0.0: (2, 5), 1.0: (3, 5)}.get(float(beta), (7, 9))
    last = (scored - 1) % SWIFT_JSD_CHUNK + 1 if scored else 0
    at = [keep * (scored - last) + own * last]
    if scored > last:
        at.append(keep * (scored - last - SWIFT_JSD_CHUNK) + own * SWIFT_JSD_CHUNK)
    return entry * vocab * (4 * scored + max(at))


def jsd_temp_bytes(s: Setup, rows: int) -> int:
    w, v, e = s.knobs.workload, s.model.text.vocab, logits_entry_bytes(s)
    scored = rows * min(w.scored_tokens(), s.seq_len - 1)
    if loss_style(s) == "whole":
        return whole_jsd_temp_bytes(rows * (s.seq_len - 1), scored, v, e, w.jsd_beta)
    if loss_style(s) == "completion":  # TRL's JSD over the completion's positions alone, each of them labelled
        return whole_jsd_temp_bytes(scored, scored, v, e, w.jsd_beta)
    return chunked_jsd_temp_bytes(scored, v, e, w.jsd_beta)


def loss_bytes(s: Setup, rows: int) -> int:
    """The loss's moment: the student's and the teacher's logits and the JSD's temporaries (the planner's
    logits-and-loss term of a GKD step, planner.estimate.temp_terms.logits_loss_bytes)."""
    return 2 * model_logits_bytes(s, rows) + jsd_temp_bytes(s, rows)


def teacher_forward_bytes(s: Setup, rows: int) -> int:
    """The teacher's no-grad forward beside the student's logits: the larger of a teacher layer's moment and its head's
    (its final hidden states, its logits in the model's dtype and their cast copy), and a ZeRO-3 teacher's gathered
    parameters."""
    m = teacher_of(s) or s.model
    ts = replace(s, model=m)
    c = compute_dtype_bytes(s)
    head = (
        c * rows * s.seq_len * m.text.hidden + c * rows * logit_tokens(s) * m.text.vocab + model_logits_bytes(ts, rows)
    )
    return max(nograd_forward_bytes(ts, rows, s.seq_len), head) + teacher_gathered_bytes(s)


def generation_sequences(s: Setup) -> int:
    """Completions one rank samples at once: TRL a micro-batch's prompts each micro-step; ms-swift its generation
    batch."""
    w = s.knobs.workload
    return s.micro_batch if loss_style(s) != "chunked" else s.micro_batch * w.steps_per_gen(s.grad_accum)


def generation_caches(s: Setup) -> bool:
    """Whether generate keeps a KV cache: TRL turns it off under gradient checkpointing (gkd_trainer.py:221)."""
    return loss_style(s) == "chunked" or s.knobs.checkpointing == "off"


def teacher_forward_seconds(s: Setup, tokens: int, rate: float) -> float:
    """The teacher's forward over `tokens`: 2 x its parameters FLOPs per token at `rate` FLOP/s."""
    m = teacher_of(s) or s.model
    return 2 * m.params * tokens / rate
