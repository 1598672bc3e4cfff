"""Per-rank memory of a training step: the peak, assembled from the terms, one small function each, in bytes: the
model states (state_terms.py: weights, gradients, buckets, optimizer states), what backward keeps
(activation_terms.py), each moment's temporaries (temp_terms.py) and the allocator's overheads (overheads.py).

The peak is the largest of three moments of a steady-state step (after the first optimizer step):
- "backward": the larger of two moments. The start of backward: all saved activations, logits/loss,
  masks, autocast weight copies. The last layer's backward, after the logits are freed: its saved
  (under full checkpointing, recomputed) activations and the MLP's gradient transient, every other
  layer's, the head's gradients. Gradients of all layers count only when accumulating (HF zeroes
  them with set_to_none after each step). The sim probe showed the two moments never overlap
  (benchmarks/accuracy.py: counting the recomputed layer on top of the logits over-estimated
  full-checkpointing peaks by 9-23%);
- "end-of-backward": all gradients, one layer's activations (recomputed under checkpointing), one
  gradient-sized transient of the largest matrix;
- "optimizer-step": all gradients plus the optimizer's temporaries.
"""

from __future__ import annotations

from planner.config.spec import MemoryBreakdown
from planner.estimate import boft, dataparallel, devicemap, fsdp, lifecycle, lora, nograd, oft, parallel, vision, zero
from planner.estimate.activation_terms import (
    activations_bytes,
    host_activation_bytes_per_node,
    text_shape,
    tower_is_trained,
    tower_patches,
)
from planner.estimate.overheads import overhead_source
from planner.estimate.overheads import terms as overhead_terms
from planner.estimate.setup import Setup
from planner.estimate.state_terms import (
    backward_grads_bytes,
    comm_bucket_bytes,
    eval_grads_bytes,
    gathered_params_bytes,
    gradients_bytes,
    host_offload_bytes_per_node,
    optimizer_bytes,
    optimizer_step_temp_bytes,
    paged_optimizer_bytes,
    params_bytes,
)
from planner.estimate.temp_terms import (
    backward_start_temp_bytes,
    end_of_backward_temp_bytes,
    head_grad_bytes,
    last_layer_activations_bytes,
    last_layer_temp_bytes,
    logits_loss_bytes,
    swift_logps,
    whole_logits,
)


def masked_tower_phase(s: Setup, accumulated: int, grads_full: int, opt: int) -> tuple[int, int, int, int] | None:
    """The tower's moment where its blocks run masked_tower: a trained tower's backward, after the decoder's (its
    gradients all but made, the tower's checkpointed inputs kept); a frozen tower's forward, before the decoder's
    (the gradients accumulated so far, nothing saved). None where the tower does not run it."""
    if not nograd.masked_tower(s):
        return None
    v, trained, p = s.model.vision, tower_is_trained(s), text_shape(s)[3]
    off = s.knobs.checkpointing == "off" or s.knobs.vit_checkpointing == "off" or not v.checkpointed
    saved = vision.vision_activations_bytes(v, s.image_rows, s.tower_image_tokens, p, "off" if off else "full", True)
    temp = gathered_params_bytes(s) + vision.masked_tower_bytes(v, tower_patches(s), p, trained)
    return (grads_full, opt, saved, temp) if trained else (accumulated, opt, 0, temp)


def tower_detail(s: Setup, tower: tuple[int, int, int, int]) -> dict[str, int]:
    """The breakdown's detail where the tower's masked moment is the peak: its scores' bytes (what a smaller image
    or fewer of them shrink, planner.search.advice) and the knob that sizes its call (vision.tower_knob)."""
    v, p = s.model.vision, text_shape(s)[3]
    scores = vision.masked_tower_bytes(v, tower_patches(s), p, tower_is_trained(s))
    return {"vision_tower_bytes": scores, "vision_knob": vision.tower_knob(v)}


def breakdown(s: Setup, capacity_bytes: int, activation_side: tuple[int, ...] | None = None) -> MemoryBreakdown:
    """The per-rank breakdown at the peak moment; its terms add up to peak_allocated_bytes.
    activation_side: (activations, temporaries) at the backward peak as a probe measured them
    (the sim traces DeepSpeed plans without DeepSpeed), replacing the analytic ones; a third item, the gradients the
    probe held there, where known (fsdp.traced_backward_temp_bytes). Under tensor, sequence or
    context parallelism every term runs on one rank's view (planner.estimate.parallel.view); under a device_map on
    the GPU whose share of the model needs most (planner.estimate.devicemap)."""
    s = parallel.view(s)
    if s.knobs.device_map > 1:
        return max(
            (_breakdown(d, capacity_bytes, None) for d in devicemap.setups(s, capacity_bytes)),
            key=lambda b: b.device_total_bytes,
        )
    return _breakdown(s, capacity_bytes, activation_side)


def _breakdown(s: Setup, capacity_bytes: int, activation_side: tuple[int, ...] | None) -> MemoryBreakdown:
    params, opt, buckets = params_bytes(s), optimizer_bytes(s), comm_bucket_bytes(s)
    grads_full, acts = gradients_bytes(s), activations_bytes(s)
    backward_temp = backward_start_temp_bytes(s)
    if activation_side is not None:
        acts, temp, *traced_grads = activation_side
        grad_temp = fsdp.traced_backward_temp_bytes(s, traced_grads[0] if traced_grads else None)
        backward_temp = temp + gathered_params_bytes(s) + grad_temp
    accumulated = backward_grads_bytes(s, grads_full)
    phases = {  # phase -> (gradients, optimizer states, activations, temporaries) beside the parameters and buckets
        "backward": (accumulated, opt, acts, backward_temp),
        "end-of-backward": (grads_full, opt, 0, end_of_backward_temp_bytes(s)),
        "optimizer-step": (grads_full, opt, 0, optimizer_step_temp_bytes(s)),
    }
    if activation_side is None:
        last_layer = (accumulated or head_grad_bytes(s), opt, last_layer_activations_bytes(s), last_layer_temp_bytes(s))
        if sum(last_layer) > sum(phases["backward"]):
            phases["backward"] = last_layer
    tower = _other_phases(s, phases, (accumulated, grads_full, opt, acts))
    phase = max(phases, key=lambda p: sum(phases[p]))
    grads, opt_at_peak, acts_at_peak, temp = phases[phase]
    peak = params + grads + buckets + opt_at_peak + acts_at_peak + temp
    overheads = overhead_terms(s, peak)
    overhead = sum(t.bytes for t in overheads)
    total = peak + overhead
    detail = {
        "gradient_buffers_bytes": buckets,
        "logits_loss_bytes": logits_loss_bytes(s),
        **({"whole_logits_bytes": logits_loss_bytes(s)} if whole_logits(s) else {}),  # render's name for the head
        **({"swift_logps_bytes": logits_loss_bytes(s)} if swift_logps(s) else {}),
        **(tower_detail(s, tower) if tower is not None and phases[phase] is tower else {}),
        "saved_activations_bytes": acts,
        "zero3_live_params_bytes": zero.zero3_live_params_bytes(s),
        "fsdp_unsharded_params_bytes": fsdp.unsharded_params_bytes(s),
        "optimizer_step_temp_bytes": optimizer_step_temp_bytes(s),
        "eval_logits_kept_bytes": nograd.eval_logits_kept_bytes(s),
        "model_states_bytes": params + grads_full + buckets + opt,  # model_states_bytes(s), its terms at hand
    }
    host = lifecycle.host_phases(s, host_offload_bytes_per_node(s) + host_activation_bytes_per_node(s))
    return MemoryBreakdown(
        params_bytes=params,
        grads_bytes=grads + buckets,
        optimizer_bytes=opt_at_peak,
        activations_bytes=acts_at_peak,
        temp_bytes=temp,
        peak_allocated_bytes=peak,
        overhead_bytes=overhead,
        overhead_source=overhead_source(s),
        overheads=overheads,
        device_total_bytes=total,
        capacity_bytes=capacity_bytes,
        headroom_bytes=capacity_bytes - total,
        peak_phase=phase,
        host_bytes_per_node=max(host.values()),
        host_phases=host,
        paged_bytes=paged_optimizer_bytes(s),
        detail=detail,
        phases={p: params + buckets + sum(terms) for p, terms in phases.items()},
    )


def text_tokens(s: Setup) -> int:
    """The tokens of one micro-batch's text rows as the activation terms count them."""
    _, rows, width, _ = text_shape(s)
    return rows * width


def _other_phases(s: Setup, phases: dict, held: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """The moments beside the three of every step, added to `phases` (phase -> (gradients, optimizer states,
    activations, temporaries)) where the knobs run them: DoRA's weight norm, the tower's masked moment, evaluation,
    nn.DataParallel's GPU 0, loading and checkpoint saving. `held`: (the gradients backward holds, all gradients,
    optimizer states, saved activations). Returns the tower's moment (masked_tower_phase), or None."""
    accumulated, grads_full, opt, acts = held
    if lora.dora(s.knobs) or oft.oft(s.knobs) or boft.boft(s.knobs):  # DoRA's norm, (B)OFT's rotation: in the last
        # layer's forward, or in a layer recomputed in backward
        norm = lora.dora_norm_temp_bytes(s.model, s.knobs) + gathered_params_bytes(s)  # ZeRO-3's or FSDP's
        norm += oft.forward_temp_bytes(s.model, s.knobs, text_tokens(s)) + boft.forward_temp_bytes(
            s.model, s.knobs, text_tokens(s)
        )
        if boft.boft(s.knobs) and s.knobs.checkpointing != "off":  # the recomputed layer's d_in^2 rotations are live
            acts = last_layer_activations_bytes(s)
        if s.knobs.checkpointing == "off":
            phases["forward"] = (accumulated, opt, acts, norm)
        elif norm + grads_full + acts > sum(phases["backward"]) - opt:
            phases["backward"] = (grads_full, opt, acts, norm)
    tower = masked_tower_phase(s, accumulated, grads_full, opt)  # a trained tower's runs in the backward
    name = "backward" if tower_is_trained(s) else "forward"
    if tower is not None and sum(tower) > sum(phases.get(name, (0,))):
        phases[name] = tower
    held = eval_grads_bytes(s, grads_full)  # between steps
    if s.knobs.eval_batch:
        phases["evaluation"] = (held, opt, 0, gathered_params_bytes(s) + nograd.eval_forward_bytes(s))
    if s.knobs.dataparallel:  # GPU 0's gathers and gradient sum (planner.estimate.dataparallel)
        others, end = backward_start_temp_bytes(s) - logits_loss_bytes(s), phases["end-of-backward"]
        states, shape = (accumulated, opt, acts), text_shape(s)[1:]
        dp = dataparallel.phases(s, shape, states, end, others, gradients_bytes(s), phases.get("evaluation"))
        phases |= {n: t for n, t in dp.items() if sum(t) >= sum(phases.get(n, (0,)))}  # a DoRA or tower forward
    phases["load"] = (held, 0, 0, lifecycle.load_gpu_transient_bytes(s))
    phases["checkpoint-save"] = (held, opt, 0, lifecycle.save_gpu_transient_bytes(s))
    return tower
