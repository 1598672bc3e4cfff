"""The sim probe for DPO, KTO and GRPO: each phase of TRL's step traced on fake tensors with the real model, at its real
depth (no extrapolation over layers), counted by the live-bytes tracker.

- training: the policy with TRL's own fused log-prob head (`trl.trainer.utils.add_fused_lm_head`, scoring the
  completion positions, as on a GPU), GRPO's clipped objective with its KL term, or DPO's sigmoid loss with the
  reference forward run inside the micro-step, as DPOTrainer does; backward; torch's AdamW (foreach, as on CUDA);
  gradients zeroed with set_to_none; two optimizer steps, the second one read (steady state);
- kl-forward (KTO): the policy's no-grad pass over the KL batch before each micro-step's forward; KTO's reference
  forward scores the KL batch, then the rows;
- reference-forward / old-logps: a no-grad pass of the reference model (or the policy) over one per-device batch;
- generation: HF generate's two largest moments, traced with the model's forward and a DynamicCache (generate's
  sampling loop stops on data, which fake tensors do not hold): the prefill of the prompts, and the last decode
  step with the cache filled to prompt + completion - 1 tokens, each followed by the sampling ops (the last
  position's logits copied to fp32, softmax, multinomial).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch

from probes.sim import fake_model
from probes.step import Case, autocast_for, build_model, packed_inputs
from probes.tracker import LiveBytes
from recipe import make_optimizer


def _rows(case: Case, rows: int, width: int):
    """The micro-step's token ids (rows, width) and the model's other inputs: padded rows' attention mask, or (DPO's
    padding-free rows, TRL 0.14-0.28's `padding_free`) the positions of one packed row (probes.step.packed_inputs)."""
    ids = torch.zeros(rows, width, dtype=torch.long)
    if case.knobs.batching == "packed":
        return ids, {k: v for k, v in packed_inputs(case, ids, "cpu").items() if k not in ("input_ids", "labels")}
    mask = torch.ones(rows, width, dtype=torch.long)
    mask[0, 0] = 0  # padded rows: the mask is materialised, as in any batch of unequal prompts
    return ids, {"attention_mask": mask}


def _model_ids(ids, k):
    """What the model is called with: the rows, or one packed row of them all."""
    return ids.reshape(1, -1) if k.batching == "packed" else ids


def _logps(model, ids, inputs, prompt: int, k):
    """TRL's fused head as `add_fused_lm_head` runs it on a GPU (compact: only the scored positions), with the
    scored positions cut by slicing: `hidden[mask]` has a data-dependent shape, which fake tensors cannot hold."""
    from trl.kernels import ChunkedLogProbFunction
    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    if k.workload.logprobs == "full":
        return _full_logps(model, ids, inputs, prompt, k)
    with autocast_for(k, "cuda") or nullcontext():
        hidden = model.get_decoder()(input_ids=_model_ids(ids, k), **inputs, use_cache=False).last_hidden_state
        hidden = hidden.view(*ids.shape, -1)
        head = model.get_output_embeddings()
        scored = hidden[:, prompt - 1 : -1].reshape(-1, hidden.size(-1))
        targets = ids[:, prompt:].reshape(-1)
        per_token = ChunkedLogProbFunction.apply(
            scored, head.weight, head.bias, targets, 1.0, _CHUNKED_LOGPROB_CHUNK_SIZE, None, 1.0, ("log_probs",)
        )[0]
        out = per_token.new_zeros(ids.size(0), ids.size(1) - 1)
        out[:, prompt - 1 :] = per_token.view(ids.size(0), -1)
        return out


def _full_logps(model, ids, inputs, prompt: int, k):
    """`logprobs full`: the whole logits, then each row's log_softmax and its labels' entries (the loop of TRL before
    its fused head, and of VLM-R1's trainer, written here)."""
    with autocast_for(k, "cuda") or nullcontext():
        logits = model(input_ids=_model_ids(ids, k), **inputs, use_cache=False).logits[:, :-1]
    targets = _model_ids(ids, k)[:, 1:]
    rows = [
        row.log_softmax(-1).gather(1, target.unsqueeze(1)).squeeze(1)
        for row, target in zip(logits, targets, strict=True)
    ]
    out = torch.stack(rows)  # packed: one row of all tokens, then each pair row's share of it
    return torch.nn.functional.pad(out, (0, 1)).view(ids.size(0), -1)[:, :-1] if k.batching == "packed" else out


def _loss(case: Case, policy, ref, ids, inputs, tracker: LiveBytes) -> torch.Tensor:
    w, k = case.knobs.workload, case.knobs
    if _scores_fp32(k):  # LLaMA-Factory's DPO and KTO (probes/lf_logps.py)
        from probes.lf_logps import sim_loss

        return sim_loss(case, policy, ref, ids, inputs, tracker)
    logp = _logps(policy, ids, inputs, w.prompt_tokens(), k)
    if w.kind == "kto" and _kl_after(k):  # LLaMA-Factory: the KL batch after the rows' forward
        _nograd_pass(case, policy, tracker, "kl-forward", ids, inputs)
        tracker.set_segment("training")
    if w.preference:
        if ref is not None:
            tracker.set_segment("reference-forward")
            with torch.no_grad():
                if w.kind == "kto":  # the KL batch's reference pass first (kto_trainer.py:1435-1436)
                    _logps(ref, ids, inputs, w.prompt_tokens(), k)
                ref_logp = _logps(ref, ids, inputs, w.prompt_tokens(), k)
            tracker.set_segment("training")
        else:
            ref_logp = torch.zeros_like(logp)
        seq = (logp - ref_logp).sum(1)
        if w.kind == "kto":  # desirable rows then undesirable, against the (detached) KL estimate
            desirable, undesirable = seq.chunk(2)
            return torch.cat((1 - torch.sigmoid(0.1 * desirable), 1 - torch.sigmoid(-0.1 * undesirable))).mean()
        chosen, rejected = seq.chunk(2)
        return -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()
    ratio = torch.exp(logp - logp.detach())
    loss = -ratio
    if w.beta > 0:
        d = torch.zeros_like(logp) - logp
        loss = loss + w.beta * (torch.exp(d) - d - 1)
    return loss.sum() / loss.numel()


def _scores_fp32(k) -> bool:
    """The framework's DPO and KTO score the whole logits in fp32 (Framework.fp32_logps)."""
    from planner.frameworks import adapter

    w = k.workload
    return w.kind in ("dpo", "kto") and w.logprobs == "full" and adapter(k.framework, k.release).fp32_logps


def _kl_after(k) -> bool:
    """The framework's KTO scores the KL batch after the policy's forward (Framework.kto_kl_after)."""
    from planner.frameworks import adapter

    return adapter(k.framework, k.release).kto_kl_after


def _nograd_pass(case: Case, model, tracker: LiveBytes, name: str, ids, inputs) -> None:
    tracker.set_segment(name)
    with torch.no_grad():
        _logps(model, ids, inputs, case.knobs.workload.prompt_tokens(), case.knobs)
    tracker.set_segment("between")


def _generation(case: Case, model, tracker: LiveBytes) -> None:
    from transformers import DynamicCache

    w, t = case.knobs.workload, model.config.get_text_config()
    n = case.micro_batch * w.steps_per_gen(case.grad_accum)
    p, full = w.prompt_tokens(), w.seq_len()
    dtype = next(model.parameters()).dtype
    tracker.set_segment("generation")
    with torch.no_grad():
        out = model(
            input_ids=torch.zeros(n, p, dtype=torch.long),
            attention_mask=torch.ones(n, p, dtype=torch.long),
            use_cache=True,
            logits_to_keep=1,
        )
        torch.softmax(out.logits[:, -1].to(torch.float32), -1).multinomial(1)
        del out
        cache = DynamicCache(config=model.config)
        heads = t.num_key_value_heads
        dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
        for layer in range(t.num_hidden_layers):
            cache.update(
                torch.zeros(n, heads, full - 1, dim, dtype=dtype),
                torch.zeros(n, heads, full - 1, dim, dtype=dtype),
                layer,
            )
        out = model(
            input_ids=torch.zeros(n, 1, dtype=torch.long),
            attention_mask=torch.ones(n, full, dtype=torch.long),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        torch.softmax(out.logits[:, -1].to(torch.float32), -1).multinomial(1)
        del out, cache
    tracker.set_segment("between")


@contextmanager
def triton_folds(paths: str):
    """paths "cuda": TRL's log-prob head folds each tile with a Triton kernel, in place (no temporaries); its torch
    fallback (`_forward_tile`, `_backward_tile`, what CPUs run) makes several tile-sized fp32 temporaries. On fake
    tensors no value matters, so the CUDA form is a fold that allocates nothing. Likewise `_addmm_fp32`: on CUDA
    (torch >= 2.8) an addmm into the fp32 accumulator with out_dtype, in place; elsewhere fp32 copies of both
    operands."""
    import trl.kernels.chunked_logprob as kernel

    saved = kernel._forward_tile, kernel._backward_tile, kernel._addmm_fp32
    if paths == "cuda":
        kernel._forward_tile = kernel._backward_tile = kernel._addmm_fp32 = lambda *a, **kw: None
    try:
        yield
    finally:
        kernel._forward_tile, kernel._backward_tile, kernel._addmm_fp32 = saved


def simulate(case: Case, steps: int = 2, real: bool = False, paths: str = "cuda") -> dict[str, int]:
    """Peak bytes of each phase of the last of `steps` optimizer steps, traced on fake tensors with CUDA's code
    paths (or "cpu": TRL's torch folds); `real`: the same steps on real CPU tensors (CPU paths), the measurement
    where TRL has no such code path."""
    if real:
        paths = "cpu"
    from torch._subclasses.fake_tensor import FakeTensorMode

    w, k = case.knobs.workload, case.knobs
    layers = case.config.get("num_hidden_layers") or case.config["text_config"]["num_hidden_layers"]
    mode = nullcontext() if real else FakeTensorMode(allow_non_fake_inputs=True)
    build = (lambda: build_model(case, layers)) if real else (lambda: fake_model(case, layers, mode))
    policy = build()
    ref = build().eval() if w.has_reference(bool(k.lora_rank)) else None
    if ref is not None:
        ref.requires_grad_(False)
    rows, width = w.rows(case.micro_batch), case.seq_len
    tracker = LiveBytes()
    with mode, triton_folds(paths):
        opt = make_optimizer([p for p in policy.parameters() if p.requires_grad], k.optimizer)
        ids, inputs = _rows(case, rows, width)
        tracker.add_existing(list(policy.parameters()) + ([*ref.parameters()] if ref is not None else []), "params")
        with tracker:
            for step in range(steps):
                if step == steps - 1:
                    tracker.reset_peaks()
                _one_step(case, policy, ref, opt, tracker, ids, inputs)
    return {
        str(seg): peak
        for seg, (peak, _) in tracker.segments.items()
        if seg in ("generation", "reference-forward", "old-logps", "kl-forward", "training")
    }


def _one_step(case: Case, policy, ref, opt, tracker: LiveBytes, ids, inputs) -> None:
    w = case.knobs.workload
    if w.kind == "grpo":
        if w.generation == "hf":
            _generation(case, policy, tracker)
        if ref is not None:
            _nograd_pass(case, ref, tracker, "reference-forward", ids, inputs)
        if w.computes_old_logps(case.grad_accum):
            _nograd_pass(case, policy, tracker, "old-logps", ids, inputs)
    for _ in range(case.grad_accum):
        if w.kind == "kto" and not _kl_after(case.knobs):  # the policy's no-grad KL pass, before its own forward
            _nograd_pass(case, policy, tracker, "kl-forward", ids, inputs)
        tracker.set_segment("training")
        _loss(case, policy, ref, ids, inputs, tracker).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    tracker.set_segment("between")
