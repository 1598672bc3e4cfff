"""Why a candidate does not fit, said from the term that decides its peak, with the knobs that shrink that term.

The search (planner.search.search) asks `rejection_reason` of every candidate. The peak is read off the breakdown:
the phase it occurs in (planner.estimate.memory / planner.estimate.rl) and, within that phase, the largest of the model states,
the saved activations, the logits/loss and the other temporaries (the optimizer step's foreach buffers at the
optimizer step). The advice names only knobs that shrink the deciding term: a fused optimizer for the step's
temporaries, sharding or LoRA for model states, checkpointing or a shorter sequence for activations, a chunked
loss for logits; and of those, only settings the plan's rules allow (`allows`: memplan's between knobs and its
framework's at its release; a base ZeRO-3 and FSDP cannot shard is not told to shard). What the planner itself
finds to fit is `planner.search.nearest`'s work; this says why.
"""

from __future__ import annotations

from functools import lru_cache

from planner.config.knobfields import KNOBS
from planner.config.spec import GIB, Hardware, Knobs, Plan
from planner.estimate.vision import PIXEL_CAP, TILES
from planner.frameworks import adapter
from planner.search import role_advice
from planner.search.nearest import LORA_RANK

# RL phases' terms (planner.estimate.rl.phase_terms) -> (what it is, what shrinks it)
RL_TERMS = {
    "kv_cache": (
        "the generation's KV cache",
        ("fewer or shorter completions per generation (--steps-per-generation, --max-completion-length) or vLLM"),
    ),
    "generation_weights": ("the generation's weight copy", "LoRA, or vLLM on its own GPUs (--generation vllm-server)"),
    "generation_transient": ("the generation's logits", "a smaller generation batch (--steps-per-generation)"),
    "generation_tower": (
        "the vision tower over the prompts' images",
        "a smaller generation batch (--steps-per-generation)",
    ),
    "reference_params": ("the reference model", "--beta 0 (no reference model) or LoRA (the base is the reference)"),
    "vllm_reserved": ("vLLM's share of the card", "a lower --vllm-gpu-memory-utilization or --generation vllm-server"),
    "sync_gather": (
        "the weights gathered for the sync to vLLM",
        "ZeRO-2 or FSDP (a LoRA sync under ZeRO-3 gathers the whole model to merge) or ms-swift's --move-model-batches",
    ),
    "sync_merge": ("PEFT's merge of the largest adapted weight at the sync", "--lora-targets without the MLP"),
    "sync_send": ("rank 0's broadcast buffers to the vLLM server", "--generation vllm-colocate"),
    "logprobs": ("the log-prob head", "--logprobs fused"),
    "policy_logps": ("the policy's log-prob head", "--logprobs fused"),
    "forward_transient": ("the log-prob pass's logits", "--logprobs fused or a smaller micro-batch"),
    "chord_sft": (
        "CHORD's SFT rows beside GRPO's",
        "a smaller --chord-sft-batch or --max-prompt-length (ms-swift's --max_length)",
    ),
}


# the no-grad passes of an RL step (planner.estimate.rl), whose own terms can decide its peak
NOGRAD_PHASES = ("reference-forward", "old-logps", "kl-forward", "teacher-forward", "teacher-logps")


def gib(x: int) -> str:
    return f"{x / GIB:.1f} GiB"


def host_reason(plan: Plan, host: int) -> str:
    """The phase whose host RAM per node passes --host-ram-gb, and what lowers it."""
    m = plan.memory
    phases = m.host_phases or {"training": m.host_bytes_per_node}
    phase = max(phases, key=phases.get)
    fixes = ["more host RAM (--host-ram-gb)"]
    if phase == "load":
        what = "loading the model"
        fixes += ["ZeRO-3 (rank 0 alone reads the weights)"] if plan.fsdp == "off" else []
        fixes += ["fewer GPUs per node (every rank casts its own copy)"]
    elif phase == "checkpoint-save":
        what = "a checkpoint save"
        fixes += (
            ["--save-weights sharded (each rank saves its shards)"]
            if plan.zero_stage == 3 or plan.fsdp != "off"
            else []
        )
        fixes += ["ZeRO-3 (rank 0 alone gathers the weights)"] if plan.zero_stage in (1, 2) else []
    else:
        what = "offload"
        fixes += ["more nodes (each node holds its own ranks' share)"]
        fixes += [] if plan.lora_rank else ["LoRA adapters (--lora-rank)"]
        fixes += (
            ["offload less"] if plan.offload == "optimizer+params" or plan.checkpointing.startswith("offload") else []
        )
    return f"{what} needs {gib(m.host_bytes_per_node)} host RAM per node > {gib(host)} (--host-ram-gb): {' or '.join(fixes)}"


def rejection_reason(plan: Plan, hw: Hardware, usable: int) -> str | None:
    """None when the candidate fits; else one line: what it needs, what decides it, what shrinks that."""
    m = plan.memory
    host = int(hw.host_ram_gib * GIB)
    engine = role_advice.engine_reason(plan) if plan.role_run else None
    if m.device_total_bytes <= usable:  # the GPU's verdict first: host RAM is the easier one to add
        return host_reason(plan, host) if m.host_bytes_per_node > host else engine
    if plan.role_run:
        return role_advice.reason(plan, usable)
    if m.peak_phase == "evaluation":
        return evaluation_reason(plan, usable)
    states = m.detail["model_states_bytes"]
    if states > usable:
        return f"model states alone need {gib(states)} per GPU > {gib(usable)} usable: {said(state_fixes(plan))}"
    what = f"micro-batch {plan.micro_batch}"
    if plan.token_batches is not None:
        what = f"a micro-batch of {plan.token_batches.max_tokens_per_micro_batch:,} tokens"
    term, size, fixes = deciding_term(plan)
    states = m.params_bytes + m.grads_bytes + m.optimizer_bytes  # at the peak (gradients may not be live yet)
    without = m.device_total_bytes - size  # the term gone, the rest (overhead included) as it is
    if states * 2 > usable or without > usable:  # the states are most of the card: what shrinks them helps too
        more = [
            f
            for f in state_fixes(plan)
            if f.split(" (")[0] not in " ".join(fixes)
            and not (f.startswith("shard") and any(x.startswith("shard") for x in fixes))
        ]
        fixes = fixes + more
        if without > usable:  # the term's own fix cannot be enough alone: sharding the states first
            fixes = sorted(fixes, key=lambda f: not f.startswith("shard"))
    alone = f" (without it still {gib(without)})" if without > usable else ""
    return (
        f"{what} needs {gib(m.device_total_bytes)} per GPU > {gib(usable)} usable; its peak ({m.peak_phase}) is "
        f"model states {gib(states)} + {term} {gib(size)}{alone}: {said(fixes)}"
    )


def said(fixes: list[str]) -> str:
    """The fixes in one line; where the plan's rules allow none of them, the card."""
    return " or ".join(fixes) or "a GPU with more memory (--gpu)"


def evaluation_reason(plan: Plan, usable: int) -> str:
    """Training fits and the first evaluation does not: say so, with the evaluation's own batch as the fix."""
    m = plan.memory
    training = max(v for k, v in (m.phases or {}).items() if k not in ("evaluation", "load", "checkpoint-save"))
    kept = m.detail.get("eval_logits_kept_bytes", 0)
    fixes = ["a smaller evaluation batch (--eval-batch N)"]
    if kept:  # HF's keys: the logits' steps on the GPU, or none kept
        fixes = [
            "eval_accumulation_steps 1 (--eval-logits-steps 1)",
            "prediction_loss_only or a preprocess_logits_for_metrics that reduces them (--eval-logits-steps 0)",
        ] + fixes
    held = f", {gib(kept)} of it logits kept for compute_metrics" if kept else ""
    return (
        f"runs out of memory at the first evaluation, not in training: {plan.eval_batch} evaluation rows need "
        f"{gib(m.device_total_bytes)} per GPU > {gib(usable)} usable (training peaks at {gib(training)} allocated, "
        f"evaluation at {gib(m.peak_allocated_bytes)}{held}): {' or '.join(fixes)}"
    )


def state_fixes(plan: Plan) -> list[str]:
    """What shrinks parameters, gradients and optimizer states per GPU, among the settings the plan's rules allow."""
    fixes = []
    if plan.zero_stage < 3 and plan.fsdp == "off":
        fixes += either(plan, "shard them", [("--zero 3", {"zero_stage": 3}), fsdp_full(plan)]) or either(
            plan,  # a base FSDP and ZeRO-3 cannot shard (spec_lora.UNSHARDED): the one they can
            "shard a bitsandbytes 4-bit base instead",
            [("--quant nf4 --zero 3 on the unquantized model", {"quant": "nf4", "zero_stage": 3})],
        )
    if (
        plan.offload != "optimizer+params"
        and not plan.optimizer_in_backward
        and any(allows(plan, **c) for c in offload_changes(plan))
    ):
        fixes.append("offload")
    fixes += lora(plan)
    if plan.zero_stage or plan.fsdp != "off":
        fixes.append("more GPUs (shards shrink with the world size)")
    return fixes


def lora(plan: Plan) -> list[str]:
    return ["LoRA adapters (--lora-rank)"] if not plan.lora_rank and allows(plan, lora_rank=LORA_RANK) else []


def allows(plan: Plan, **change) -> bool:
    """Whether the plan's knobs with `change` pass memplan's rules between knobs (planner.config.spec_rules: a
    quantized base FSDP and ZeRO-3 cannot shard, offload without DeepSpeed) and its framework's at its release (those
    of the knobs' scope): advice offers only what a check of it would accept."""
    return allowed(tuple(getattr(plan, f) for f in KNOBS), tuple(sorted(change.items())))


@lru_cache(maxsize=4096)
def allowed(values: tuple, change: tuple) -> bool:
    """allows, by value: a search's candidates share a few knob sets (0.1 ms a rule check, 756 rejected candidates
    in one suggest)."""
    try:
        knobs = Knobs(**dict(zip(KNOBS, values))).with_valid_values(**dict(change))
    except ValueError:
        return False
    return adapter(knobs.framework, knobs.release).cannot(dict(knobs)) is None


def either(plan: Plan, what: str, options: list[tuple[str, dict]]) -> list[str]:
    """["what (flag or flag)"] with the options whose change the rules allow; [] where none is."""
    ok = [flag for flag, change in options if allows(plan, **change)]
    return [f"{what} ({' or '.join(ok)})"] if ok else []


def fsdp_full(plan: Plan) -> tuple[str, dict]:
    """--fsdp full in place of ZeRO; an optimizer offload becomes FSDP's, which moves the parameters too."""
    fsdp = {"fsdp": "full", "zero_stage": 0}
    if plan.offload == "optimizer":
        return "--fsdp full --offload optimizer+params", fsdp | {"offload": "optimizer+params"}
    return "--fsdp full", fsdp


def offload_changes(plan: Plan) -> list[dict]:
    """The next offload from the plan's: the optimizer's (ZeRO-Offload, from stage 1), then the parameters' (ZeRO-3's
    or FSDP's); "offload" is offered where one of them passes the rules."""
    if plan.fsdp != "off":
        return [{"offload": "optimizer+params"}]
    fsdp = {"offload": "optimizer+params", "fsdp": "full", "zero_stage": 0}
    if plan.offload == "optimizer":
        return [{"offload": "optimizer+params", "zero_stage": 3}, fsdp]
    return [{"offload": "optimizer", "zero_stage": max(1, plan.zero_stage)}, fsdp]


def deciding_term(plan: Plan) -> tuple[str, int, list[str]]:
    """(the largest part of the peak beside the model states, which every phase holds: what makes this phase the
    peak; its bytes; the knobs that shrink it)."""
    m, d = plan.memory, plan.memory.detail
    if (
        m.peak_term
        and m.peak_term.removesuffix("_bytes") in RL_TERMS
        and (m.peak_phase in NOGRAD_PHASES or m.peak_phase in ("generation", "chord-sft"))
    ):
        label, fix = RL_TERMS[m.peak_term]
        if "--logprobs" in fix and "swift_logps_bytes" in d:  # ms-swift scores with its own head: no --logprobs
            fix = "a smaller micro-batch or shorter completions (ms-swift's log-probs hold the completion's logits)"
        tower = [tower_fix(plan, d.get("vision_knob", 0))] if m.peak_term == "generation_tower" else []
        return label, d.get(m.peak_term + "_bytes", 0), tower + [fix]
    if m.peak_phase == "weight-sync":  # what the sync adds to a generation's residents (an asleep engine's weights)
        keys = ["sync_gather", "sync_merge", "sync_send"] + (
            ["vllm_reserved"] if plan.workload.roles.sleep_level else []
        )
        key = max(keys, key=lambda k: d.get(k + "_bytes", 0))
        label, fix = RL_TERMS[key]
        return label, d.get(key + "_bytes", 0), [fix]
    if d.get("vision_tower_bytes", 0) * 2 > m.temp_bytes + m.activations_bytes:  # the tower's call decides the peak
        fixes = [tower_fix(plan, d.get("vision_knob", 0))] + (["a smaller micro-batch"] if plan.micro_batch > 1 else [])
        if plan.attention != "flash" and allows(plan, attention="flash"):
            fixes.append("flash attention (the tower's flash path has no mask over the patches)")
        return "the vision tower's attention over the images' patches", d["vision_tower_bytes"], fixes
    if m.peak_phase == "load" and plan.fsdp_load == "whole" and allows(plan, fsdp_load="sharded"):
        fix = "--fsdp-load sharded (LLaMA-Factory v1: init_config: {name: init_on_rank0})"
        return "the whole model loaded on each GPU before sharding", m.temp_bytes, [fix]
    logits = min(d.get("logits_loss_bytes", 0), m.temp_bytes) if m.peak_phase in ("forward", "backward") else 0
    parts = {"saved activations": m.activations_bytes, "logits/loss": logits, "temporaries": m.temp_bytes - logits}
    if m.peak_phase == "optimizer-step":
        parts["the optimizer step's temporaries"] = parts.pop("temporaries")
    term = max(parts, key=parts.get)
    return term, parts[term], term_fixes(plan, term)


DDP_FIX = "a process a GPU (torchrun, or LLaMA-Factory from v0.8, which gather no logits on GPU 0)"


def term_fixes(plan: Plan, term: str) -> list[str]:
    if plan.dataparallel:  # GPU 0 gathers every replica's logits (planner.estimate.dataparallel); DDP does not
        return [DDP_FIX, *_term_fixes(plan, term)]
    return _term_fixes(plan, term)


def _term_fixes(plan: Plan, term: str) -> list[str]:
    if term == "model states":
        return state_fixes(plan)
    if term == "the optimizer step's temporaries":
        fused = plan.optimizer == "adamw" and allows(plan, optimizer="adamw-fused")
        fixes = ["--optimizer adamw-fused (no foreach copies)"] if fused else []
        if plan.zero_stage == 0 and plan.fsdp == "off":
            fixes += either(plan, "shard the step", [("--zero 1", {"zero_stage": 1}), fsdp_full(plan)])
        return fixes + lora(plan)
    if term == "logits/loss":
        losses = [x for x in ("chunked", "fused") if allows(plan, loss=x)]
        fixes = [f"--loss {' or '.join(losses)}"] if plan.loss == "standard" and losses else []
        if plan.workload.rl and plan.workload.logprobs == "full":
            fixes.append("--logprobs fused")
        return fixes + shorter(plan)
    fixes = []
    if plan.checkpointing not in ("full", "offload", "offload-inputs") and allows(plan, checkpointing="full"):
        fixes.append("--checkpointing full" if plan.checkpointing == "off" else "heavier checkpointing (full)")
    return fixes + shorter(plan)


def shorter(plan: Plan) -> list[str]:
    """Activations and logits scale with the tokens of a micro-batch."""
    out = ["a smaller micro-batch"] if plan.micro_batch > 1 else []
    return out + ["a shorter sequence"]


def tower_fix(plan: Plan, knob: int) -> str:
    """The setting that shrinks a tower's call (vision.tower_knob: an image's pixel cap, InternVL's tiles), in the
    words of the plan's framework at its release (Framework.image_knobs: ms-swift's MAX_PIXELS / MAX_NUM,
    LLaMA-Factory's image_max_pixels or image_resolution, a TRL GRPO script's --max_pixels / --max_anyres_num);
    memplan's own --image-tokens elsewhere."""
    cap, tiles = adapter(plan.framework, plan.knobs.release).image_knobs
    if knob == PIXEL_CAP and cap:
        return f"a lower {cap} (the image's pixel cap)"
    if knob == TILES and tiles:
        return f"a lower {tiles} (InternVL's tiles an image)"
    return "fewer image tokens (--image-tokens: smaller or fewer images)"
