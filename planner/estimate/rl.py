"""Per-rank memory and time of TRL's GRPO, DPO and KTO steps, phase by phase; the peak is the largest phase.

The phases, as TRL 1.16 runs them (trl/trainer/grpo_trainer.py, dpo_trainer.py):
- generation (GRPO): `unwrap_model_for_generation` then HF `generate` over the rank's generation batch
  (per-device batch x steps_per_generation completions, sampled at once), with ZeRO-3's parameters gathered
  whole (`ds3_gather_for_generation`, on by default); a KV cache of prompt + completion tokens per sequence; the
  last position's logits (`logits_to_keep=1`), their fp32 copy and the sampling probabilities;
- weight-sync (GRPO with vLLM, colocated or a server): the trainer's weights gathered and handed to the engine before
  each generation, as the release does it (planner.estimate.weight_sync), the engine's share as the sync finds it;
- reference-forward: the reference model's no-grad forward in chunks of the per-device batch
  (`_get_per_token_logps_and_entropies(batch_size=per_device_train_batch_size)`); DPO, and ms-swift 3.5-3.6's
  GRPO, run it inside the micro-step, after the policy's forward, so the policy's saved activations are live beside
  it (planner.estimate.ref_in_step);
- kl-forward (KTO): the policy's no-grad pass over the KL batch (each prompt with its neighbour's completion), before
  its own forward in each micro-step (trl/trainer/kto_trainer.py:1379, 1364-1365; LLaMA-Factory after it,
  Framework.kto_kl_after); KTO's reference forward scores the KL batch then the rows, one after the other, as DPO's
  does its pairs;
- old-logps (GRPO): the policy's own no-grad forward, when generation is not aligned with the optimizer step;
- training: the supervised step's moments (planner.estimate.memory) over prompt + completion rows, with TRL's log-prob
  head (planner.estimate.recipe_terms.logprob_head_bytes) in place of the loss;
- GKD (planner.estimate.gkd): the teacher's weights resident, its no-grad forward after the student's (teacher-forward),
  the JSD over both logits at the loss, and with lmbda > 0 the student's own generation.
A reference model (its own copy, in the policy's compute dtype, ZeRO-3/FSDP-sharded like the policy) and a
colocated vLLM's share of the card stay resident through every phase.
"""

from __future__ import annotations

from dataclasses import replace

from planner.config.spec import Hardware, MemoryBreakdown
from planner.estimate import (
    activation_terms,
    chord,
    fp32_logps,
    gkd,
    recipe_terms,
    ref_in_step,
    role_heads,
    roles,
    rollout,
    speed,
    state_terms,
    temp_terms,
    weight_sync,
)
from planner.estimate import memory as mem
from planner.estimate.generation import SAMPLING_FP32_COPIES, generation_terms, kv_cache_bytes, sequences_per_generation
from planner.estimate.nograd import compute_dtype_bytes, nograd_forward_bytes
from planner.estimate.overheads import terms as overhead_terms
from planner.estimate.parallel import view as rank_view
from planner.estimate.setup import Setup
from planner.estimate.vision import tower_knob
from planner.frameworks import FRAMEWORKS, adapter


def logprob_forward_bytes(s: Setup, rows: int) -> int:
    """A no-grad pass of TRL's log-prob head: the scored hidden states' copy and one tile (no gradients)."""
    t, w, c = s.model.text, s.knobs.workload, compute_dtype_bytes(s)
    n = rows * w.scored_tokens()
    return c * n * t.hidden + c * min(n, recipe_terms.TRL_TOKEN_CHUNK) * recipe_terms.TRL_VOCAB_CHUNK + 16 * n


def computes_old_logps(s: Setup) -> bool:
    """The old policy's no-grad log-prob pass: TRL's rule (Workload.computes_old_logps), or every generation batch
    where the framework's GRPO always runs it (Framework.grpo_old_logps: ms-swift from v3.11.0)."""
    w, k = s.knobs.workload, s.knobs
    if w.computes_old_logps(s.grad_accum):
        return True
    return w.kind == "grpo" and k.framework in FRAMEWORKS and adapter(k.framework, k.release).grpo_old_logps == "always"


def reference_params_bytes(s: Setup) -> int:
    """The reference model's weights on this rank (none without one): the policy's compute dtype, sharded as the
    policy is under ZeRO-3 / FSDP (TRL prepares it with the same DeepSpeed or FSDP plugin)."""
    if not s.knobs.workload.has_reference(s.lora):
        return 0
    whole = s.model.params * compute_dtype_bytes(s)
    return whole // s.world_size if s.knobs.zero_stage == 3 or s.knobs.fsdp != "off" else whole


def vllm_reserved_bytes(s: Setup, capacity_bytes: int) -> int:
    """vLLM colocated on the training GPU reserves its fraction of the card (weights and KV cache inside it) for
    the whole run (TRL's sleep mode is off by default)."""
    w = s.knobs.workload
    return int(w.vllm_gpu_memory_utilization * capacity_bytes) if w.generation == "vllm-colocate" else 0


def vllm_between_bytes(s: Setup, capacity_bytes: int) -> int:
    """The colocated vLLM outside generation: all of its share, or asleep (ms-swift's --sleep_level 1 or 2,
    swift/rlhf_trainers/rollout_mixin.py:1242-1243: the engine sleeps after each generation) its CUDA graphs alone
    (planner.estimate.rollout)."""
    reserved = vllm_reserved_bytes(s, capacity_bytes)
    if reserved and (s.knobs.workload.roles.sleep_level or 0) > 0:
        return rollout.graph_pool_bytes(s.knobs.workload.roles)
    return reserved


def vllm_generation_terms(s: Setup, capacity_bytes: int, resident: dict) -> dict[str, int]:
    """Generation by the colocated vLLM: its whole share, beside the policy and optimizer left on the GPU (ms-swift's
    --offload_model and --offload_optimizer move them to the host while vLLM generates: workload.roles.offload)."""
    off = s.knobs.workload.roles.offload
    return {
        **resident,
        "policy_params_bytes": 0 if "actor-params" in off else resident["policy_params_bytes"],
        "reference_params_bytes": 0 if "ref" in off else resident["reference_params_bytes"],
        "optimizer_bytes": 0 if "actor-optimizer" in off else resident["optimizer_bytes"],
        "vllm_reserved_bytes": vllm_reserved_bytes(s, capacity_bytes),
    }


def logps_pass_terms(s: Setup, rows_kept: bool = False) -> dict[str, int]:
    """A no-grad log-prob pass over one chunk of per-device-batch rows (reference model or old policy): the larger
    of a decoder layer's moment and the head's (the final hidden states, their scored copy and a tile). DPO's
    padding-free chunk is one row of all its tokens (recipe_terms.row_shape): one mask, one row's log_softmax.
    `rows_kept`: KTO's reference pass holding its rows' logits over its KL batch's (fp32_logps.keeps_rows_logits)."""
    rows, width, t = s.knobs.workload.rows(s.micro_batch), s.seq_len, s.model.text
    shape = recipe_terms.row_shape(s.knobs, s.micro_batch, s.seq_len)
    if role_heads.upcasts(s.knobs.framework):  # OpenRLHF's Actor: fp32 logits of every token (models/actor.py:267)
        head = role_heads.logprob_pass_head_bytes(rows * width, t.vocab, compute_dtype_bytes(s), False, upcast=True)
    elif fp32_logps.scores_fp32(s):  # LLaMA-Factory's DPO and KTO: the whole logits cast to fp32
        head = fp32_logps.nograd_pass_bytes(rows * width, t.vocab, compute_dtype_bytes(s), rows_kept)
    elif temp_terms.whole_logits(s):  # ms-swift 3.2-3.6 on a multimodal model: the same moment without gradients
        scored, profile = min(width, s.knobs.workload.scored_tokens()), activation_terms.text_shape(s)[3]
        head = recipe_terms.whole_logits_logps_bytes(t, rows, width, scored, profile)
    elif temp_terms.swift_logps(s):  # ms-swift's own log-probs (Framework.grpo_logprobs)
        head = temp_terms.swift_logps_head_bytes(s, rows, width, compute_dtype_bytes(s), False)
    elif s.knobs.workload.logprobs == "full":  # the logits of the chunk, and one row's log_softmax at a time
        head = compute_dtype_bytes(s) * (rows * width + shape[1]) * t.vocab
    else:
        head = logprob_forward_bytes(s, rows)
    at_head = compute_dtype_bytes(s) * rows * width * t.hidden + head
    return {"forward_transient_bytes": max(nograd_forward_bytes(s, *shape), at_head)}


def phase_terms(s: Setup, capacity_bytes: int, training: MemoryBreakdown) -> dict[str, dict[str, int]]:
    """Every phase's bytes by term. The resident terms (policy weights and optimizer states, the reference model,
    vLLM's share) are in each phase; gradients only where accumulation keeps them across a generation."""
    w = s.knobs.workload
    resident = {
        "policy_params_bytes": state_terms.params_bytes(s),
        "optimizer_bytes": state_terms.optimizer_bytes(s),
        "gradient_buffers_bytes": state_terms.comm_bucket_bytes(s),
        "reference_params_bytes": reference_params_bytes(s),
        "vllm_reserved_bytes": vllm_between_bytes(s, capacity_bytes),
        **({"teacher_params_bytes": gkd.teacher_params_bytes(s)} if w.kind == "gkd" or w.teacher_model else {}),
    }
    mid_step = w.kind == "grpo" and s.grad_accum % w.steps_per_gen(s.grad_accum) != 0
    between = {**resident, "grads_bytes": state_terms.gradients_bytes(s) if mid_step else 0}
    logprobs = temp_terms.logits_loss_bytes(s) if training.temp_bytes == temp_terms.backward_start_temp_bytes(s) else 0
    out = {
        "training": {
            **resident,
            "grads_bytes": training.grads_bytes - resident["gradient_buffers_bytes"],
            "saved_activations_bytes": training.activations_bytes,
            "logprobs_bytes": logprobs,
            "training_temp_bytes": training.temp_bytes - logprobs,
        }
    }
    if w.kind == "grpo":
        if w.generation == "hf":
            out["generation"] = {**between, **generation_terms(s)}
        elif w.generation == "vllm-colocate":
            out["generation"] = vllm_generation_terms(s, capacity_bytes, between)
        if w.generation != "hf":
            out["weight-sync"] = weight_sync.sync_terms(s, between, vllm_reserved_bytes(s, capacity_bytes))
        if w.has_reference(s.lora) or (w.beta > 0 and s.lora):
            ref_pass = logps_pass_terms(s)  # ms-swift 3.5-3.6 score it after the policy's forward (ref_in_step)
            in_step = ref_in_step.grpo_reference_in_step(s)
            out["reference-forward"] = (
                ref_in_step.in_step_terms(s, resident, ref_pass) if in_step else {**between, **ref_pass}
            )
        if computes_old_logps(s):
            out["old-logps"] = {**between, **logps_pass_terms(s)}
        if w.chord_sft_batch:  # CHORD's SFT rows inside the micro-step, after GRPO's forward (planner.estimate.chord)
            out["chord-sft"] = chord.chord_terms(s, resident, mem.breakdown(chord.sft_setup(s), capacity_bytes))
        if w.teacher_model:  # OPD-RL: the teacher's no-grad log-prob pass beside them (Framework.grpo_teacher)
            teacher = logps_pass_terms(replace(s, model=gkd.teacher_of(s)))
            teacher["forward_transient_bytes"] += gkd.teacher_gathered_bytes(s)  # a ZeRO-3 teacher's gathered layers
            out["teacher-logps"] = {**between, **teacher}
    elif w.kind == "gkd":
        out.update(gkd_phases(s, resident, between, capacity_bytes))
    if w.kind == "kto":
        out["kl-forward"] = kto_kl_terms(s, resident)
    if w.preference and not w.precompute_ref_log_probs:  # inside the micro-step, after the policy's forward
        kept = fp32_logps.keeps_rows_logits(s)
        out["reference-forward"] = ref_in_step.in_step_terms(s, resident, logps_pass_terms(s, kept))
    return out


def kto_kl_terms(s: Setup, resident: dict) -> dict[str, int]:
    """KTO's kl-forward: the policy's no-grad pass over the KL batch. TRL and ms-swift run it before the policy's
    forward (trl/trainer/kto_trainer.py:1379; swift rlhf_trainers/kto_trainer.py:53): the resident terms and the
    gradients accumulated so far; LLaMA-Factory after it (Framework.kto_kl_after), as a reference forward in the step."""
    if adapter(s.knobs.framework, s.knobs.release).kto_kl_after:
        return ref_in_step.in_step_terms(s, resident, logps_pass_terms(s))
    grads = state_terms.gradients_bytes(s) if s.grad_accum > 1 else 0
    return {**resident, "grads_bytes": grads, **logps_pass_terms(s)}


def gkd_phases(s: Setup, resident: dict, between: dict, capacity_bytes: int) -> dict[str, dict[str, int]]:
    """GKD's teacher forward, inside the micro-step after the student's (its saved activations and logits live), and
    with lmbda > 0 the student's generation between micro-steps (TRL: without a KV cache under gradient
    checkpointing, each new token a no-grad forward over the whole row); from a vLLM engine (ms-swift's
    RolloutTrainerMixin, Framework.gkd_vllm) GRPO's generation and weight-sync phases: the colocated engine's share
    (asleep outside generation at --sleep_level), a server's on GPUs of its own."""
    rows = s.micro_batch
    out = {
        "teacher-forward": {
            **resident,
            "grads_bytes": state_terms.gradients_bytes(s) if s.grad_accum > 1 else 0,
            "saved_activations_bytes": activation_terms.activations_bytes(s),
            "student_logits_bytes": gkd.model_logits_bytes(s, rows),
            "forward_transient_bytes": gkd.teacher_forward_bytes(s, rows),
        }
    }
    w = s.knobs.workload
    if w.lmbda > 0 and w.generation != "hf":
        if w.generation == "vllm-colocate":
            out["generation"] = vllm_generation_terms(s, capacity_bytes, between)
        out["weight-sync"] = weight_sync.sync_terms(s, between, vllm_reserved_bytes(s, capacity_bytes))
    elif w.lmbda > 0:
        n = gkd.generation_sequences(s)
        gen = generation_terms(s, n)
        if gen and not gkd.generation_caches(s):  # the last token's forward over the whole row, and the sampling
            sampling = n * s.model.text.vocab * (compute_dtype_bytes(s) + 4 * SAMPLING_FP32_COPIES)
            gen = {
                **gen,
                "kv_cache_bytes": 0,
                "generation_transient_bytes": nograd_forward_bytes(s, n, s.seq_len) + sampling,
            }
        out["generation"] = {**between, **gen}
    return out


ACTIVATION_TERMS = ("saved_activations_bytes", "kv_cache_bytes")
PARAM_TERMS = ("policy_params_bytes", "reference_params_bytes", "teacher_params_bytes")


def breakdown(s: Setup, capacity_bytes: int) -> MemoryBreakdown:
    """The supervised breakdown (planner.estimate.memory) for sft; for DPO and GRPO the largest phase's, with every phase's
    peak in `phases` and the largest term of the peak phase in `peak_term`."""
    if s.knobs.role_run:
        return roles.breakdown(s, capacity_bytes)
    training = mem.breakdown(s, capacity_bytes)
    if not s.knobs.workload.rl:
        return training
    phases = phase_terms(rank_view(s), capacity_bytes, training)  # DPO under Ulysses: the rank's slice
    totals = {name: sum(terms.values()) for name, terms in phases.items()}
    phase = max(totals, key=totals.get)
    terms = phases[phase]
    peak = totals[phase]
    overheads = overhead_terms(s, peak - terms["vllm_reserved_bytes"])
    overhead = sum(t.bytes for t in overheads)
    params = sum(terms.get(k, 0) for k in PARAM_TERMS)
    grads = terms.get("grads_bytes", 0) + terms["gradient_buffers_bytes"]
    acts = sum(terms.get(k, 0) for k in ACTIVATION_TERMS)
    temp = peak - params - grads - terms["optimizer_bytes"] - acts
    every = {k: v for phase_terms_ in phases.values() for k, v in phase_terms_.items()}  # each phase's own terms
    detail = {
        **training.detail,
        **every,
        **terms,
        "model_states_bytes": training.detail["model_states_bytes"]
        + terms["reference_params_bytes"]
        + terms.get("teacher_params_bytes", 0),
        **({"vision_knob": tower_knob(s.model.vision)} if s.model.vision is not None else {}),
    }
    return MemoryBreakdown(
        params_bytes=params,
        grads_bytes=grads,
        optimizer_bytes=terms["optimizer_bytes"],
        activations_bytes=acts,
        temp_bytes=temp,
        peak_allocated_bytes=peak,
        overhead_bytes=overhead,
        overhead_source=training.overhead_source,
        overheads=overheads,
        device_total_bytes=peak + overhead,
        capacity_bytes=capacity_bytes,
        headroom_bytes=capacity_bytes - peak - overhead,
        peak_phase=training.peak_phase if phase == "training" else phase,
        host_bytes_per_node=training.host_bytes_per_node,
        host_phases=training.host_phases,
        detail=detail,
        phases={("training: " + training.peak_phase if n == "training" else n): v for n, v in totals.items()},
        peak_term=max(terms, key=terms.get).removesuffix("_bytes"),
    )


def generation_seconds(s: Setup, hw: Hardware) -> float:
    """One rank's generation per optimizer step. Decoding is memory-bandwidth bound: every step reads the weights
    and the cache filled so far (half the final cache on average) once for the whole batch; the prefill is compute
    at the training efficiency. A rank generates once every steps_per_generation x num_iterations micro-steps.
    vLLM (colocated) decodes the same bytes; a vLLM server's GPUs generate off the training ranks."""
    w = s.knobs.workload
    if w.kind == "gkd":
        return gkd_generation_seconds(s, hw)
    if not w.generates or (w.generation == "vllm-server" and not s.knobs.role_run):
        return 0.0  # a role run's trainer waits for its rollout, wherever it runs (synchronous PPO)
    n = sequences_per_generation(s)
    weights = s.model.params * compute_dtype_bytes(s)
    kv_mean = (kv_cache_bytes(s, n, w.prompt_tokens()) + kv_cache_bytes(s, n, w.seq_len())) / 2
    decode = w.max_completion_length * (weights + kv_mean) / (hw.gpu.memory_bandwidth_gbs * 1e9)
    tokens = n * w.prompt_tokens()
    prefill = (
        2 * s.model.params * tokens / (speed.gpu_tflops(hw, s.knobs.precision) * 1e12 * speed.efficiency(tokens, s.gpu))
    )
    per_step = s.grad_accum / (w.steps_per_gen(s.grad_accum) * w.num_iterations)
    return per_step * (decode + prefill)


def gkd_generation_seconds(s: Setup, hw: Hardware) -> float:
    """The student's on-policy generation per optimizer step: lmbda of the generations (TRL: one a micro-step;
    ms-swift: one a generation batch). Decoding with a cache is bandwidth bound (the weights and half the final cache
    read per token); without one (TRL under checkpointing) every token is a
    forward over the row so far, compute at the training rate."""
    w = s.knobs.workload
    if w.lmbda == 0 or w.generation != "hf":
        return 0.0
    n, new, prompt = gkd.generation_sequences(s), w.max_completion_length, w.prompt_tokens()
    rate = speed.gpu_tflops(hw, s.knobs.precision) * 1e12 * speed.efficiency(n * s.seq_len, s.gpu)
    if gkd.generation_caches(s):
        weights = s.model.params * compute_dtype_bytes(s)
        kv_mean = (kv_cache_bytes(s, n, prompt) + kv_cache_bytes(s, n, s.seq_len)) / 2
        one = new * (weights + kv_mean) / (hw.gpu.memory_bandwidth_gbs * 1e9) + 2 * s.model.params * n * prompt / rate
    else:
        one = 2 * s.model.params * n * (new * prompt + new * new / 2) / rate
    return w.lmbda * one * s.grad_accum * s.micro_batch / n


def logps_seconds(s: Setup, hw: Hardware) -> float:
    """The reference model's (and GRPO's old policy's, KTO's KL batch's) forward: 2 x params FLOPs per token."""
    w = s.knobs.workload
    passes = int(w.has_reference(s.lora) or (w.beta > 0 and s.lora)) + int(computes_old_logps(s))
    if w.kind == "kto":  # the policy's KL pass; the reference (or the adapter-less policy) scores KL and rows
        passes = 1 + (0 if w.precompute_ref_log_probs else 2)
    tokens = w.rows(s.micro_batch) * rank_view(s).seq_len  # DPO under Ulysses: the rank's slice
    rate = speed.gpu_tflops(hw, s.knobs.precision) * 1e12 * speed.efficiency(tokens, s.gpu)
    teacher = gkd.teacher_forward_seconds(s, tokens, rate) if w.kind == "gkd" else 0.0  # GKD: the teacher's pass
    return s.grad_accum * (passes * 2 * s.model.params * tokens / rate + teacher)


def step_time(s: Setup, hw: Hardware) -> speed.StepTime:
    """The supervised step over the workload's rows, plus generation and the no-grad log-prob passes."""
    if not s.knobs.workload.rl:
        return speed.step_time(s, hw)
    t = speed.step_time(replace(s, micro_batch=s.knobs.workload.rows(s.micro_batch)), hw)
    if s.knobs.workload.chord_sft_batch:  # CHORD's SFT rows trained in every micro-step (planner.estimate.chord)
        t = replace(t, compute_s=t.compute_s + speed.step_time(chord.sft_setup(s), hw).compute_s)
    extra = roles.other_roles_seconds(s, hw) if s.knobs.role_run else 0.0
    return replace(t, generation_s=generation_seconds(s, hw) + logps_seconds(s, hw) + extra)


def tokens_per_second(s: Setup, t: speed.StepTime) -> float:
    """Cluster-wide tokens trained per second (DPO: both rows of a pair)."""
    dp = s.knobs.data_parallel_of(s.world_size)
    return s.knobs.workload.rows(s.micro_batch) * s.grad_accum * dp * s.seq_len / t.total_s
