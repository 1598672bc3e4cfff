"""Per-phase peaks of real TRL GRPO, DPO and KTO steps (cpu probe), tracked with LiveBytes.

The trainer's methods are wrapped to name the phase running: generation (`_generate_single_turn`), the no-grad
log-prob passes (`_get_per_token_logps_and_entropies` without grad: the reference model's, or the policy's old
log-probs), DPO's and KTO's reference forward (the reference model's forward), KTO's kl-forward (the policy's
no-grad pass over the KL batch), and training (everything else in a step:
forward, backward, optimizer). Peaks are those of the last step (after the first optimizer step, as the planner's
steady state). TRL's GPU path scores only the completion positions (`compact`, on Triton devices); the probe takes
that path on CPU too, so its head is the one planned.
"""

from __future__ import annotations

import contextlib
import tempfile

import torch
from transformers import TrainerCallback

from probes.tracker import LiveBytes
from recipe import trl_run

PHASES = ("generation", "reference-forward", "old-logps", "kl-forward", "training")


class _Phases(TrainerCallback):
    def __init__(self, tracker: LiveBytes, steps: int) -> None:
        self.tracker, self.steps = tracker, steps

    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == self.steps - 1:  # the last step: steady state
            self.tracker.reset_peaks()


def _in_phase(tracker: LiveBytes, fn, name):
    def wrapped(*a, **kw):
        before = tracker.segment
        tracker.set_segment(name(*a) if callable(name) else name)
        try:
            return fn(*a, **kw)
        finally:
            tracker.set_segment(before)

    return wrapped


@contextlib.contextmanager
def compact_head():
    """TRL's GPU path: only scored positions go through the log-prob head (trl/trainer/utils.py `compact`)."""
    import trl.trainer.utils as u

    saved = u._use_triton
    u._use_triton = lambda device: True
    try:
        yield
    finally:
        u._use_triton = saved


def _instrument(t, tracker: LiveBytes) -> None:
    ref = getattr(t, "ref_model", None)
    logps = t._get_per_token_logps_and_entropies if hasattr(t, "_get_per_token_logps_and_entropies") else None
    if logps is not None:

        def which(model, *_):
            if torch.is_grad_enabled():
                return "training"
            return "reference-forward" if model is ref else "old-logps"

        t._get_per_token_logps_and_entropies = _in_phase(tracker, logps, which)
        t._generate_single_turn = _in_phase(tracker, t._generate_single_turn, "generation")
    elif ref is not None:
        ref.forward = _in_phase(tracker, ref.forward, "reference-forward")
    if hasattr(t, "_compute_kl_logps"):  # KTO: the policy's no-grad pass over the KL batch (kto_trainer.py:1337-1368)
        kl = t._compute_kl_logps
        t._compute_kl_logps = _in_phase(
            tracker, kl, lambda model, *_: "kl-forward" if model is not ref else "reference-forward"
        )
    t.training_step = _in_phase(tracker, t.training_step, "training")


def model_for(config: dict, knobs) -> torch.nn.Module:
    """The real model from its config, in the plan's weight dtype, with the KV cache generate uses."""
    import transformers

    from recipe import HALF, hf_config

    cfg = hf_config(config)
    cfg.use_cache = True
    dtype = HALF.get(knobs.precision) if knobs.precision in ("bf16-pure", "fp16") else torch.float32
    return transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def measure(
    kind: str,
    model,
    trl_fields: dict,
    micro_batch: int,
    grad_accum: int,
    prompt_tokens: int,
    completion_tokens: int,
    steps: int = 2,
    precision: str = "fp32",
    checkpointing: bool = False,
) -> dict:
    """Peak live bytes of each phase of the last of `steps` TRL steps (one process, CPU or one GPU)."""
    rows = micro_batch * grad_accum * steps
    with tempfile.TemporaryDirectory() as out:
        model.save_pretrained(f"{out}/init")  # TRL builds GRPO's reference model from a path
        model = f"{out}/init"
        args = trl_run.config(
            kind,
            out,
            trl_fields,
            micro_batch,
            grad_accum,
            precision,
            checkpointing,
            steps,
            worst_case=True,
            log_level="error",
            logging_strategy="no",
        )
        data = {"grpo": trl_run.prompts, "kto": trl_run.unpaired}.get(kind, trl_run.pairs)
        data = data(rows, prompt_tokens) if kind == "grpo" else data(rows, prompt_tokens, completion_tokens)
        with compact_head():
            t = trl_run.trainer(kind, model, args, data, dtype=torch.float32 if precision == "fp32" else torch.bfloat16)
            tracker = LiveBytes()
            t.add_callback(_Phases(tracker, steps))
            _instrument(t, tracker)
            with tracker:
                tracker.add_existing(list(t.model.parameters()), "params")
                if getattr(t, "ref_model", None) is not None:
                    tracker.add_existing(list(t.ref_model.parameters()), "params")
                t.train()
    return {str(seg): peak for seg, (peak, _) in tracker.segments.items() if seg in PHASES}
