"""The rules between knobs alone (planner.config.spec.Knobs' validator runs combination_rules): which values of a
plan's knobs combine, each broken rule a BadInput naming its field (as its CLI flag). What the hardware or the model
must allow is planner.config.layout's; a framework's and its release's own rules are planner.frameworks' (adapter)."""

from __future__ import annotations

from planner.config import zerobuckets
from planner.config.knobfields import LOW_RANK_OPTIMIZERS, MATRIX_OPTIMIZERS, ROLE_FRAMEWORKS, KnobFields
from planner.config.spec_freeze import freeze_rules
from planner.config.spec_lora import lora_rules
from planner.config.tasks import check_task_knobs
from planner.config.workload import check_rl_knobs
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, adapter
from planner.frameworks.runs import CRITIC_FREE

PROBE_BACKENDS: tuple[str, ...] = ("sim", "cpu", "cuda")
EXPERT_PARALLEL_NEEDS_FSDP = (
    "--expert-parallel splits the experts with transformers' own FSDP2 + expert parallelism "
    "(DistributedConfig ep_size, torchtitan's layout): it needs --fsdp full, grad-op or "
    "hybrid (DeepSpeed's expert parallelism needs its own MoE layers, not transformers')"
)


def saves_full_weights(k: KnobFields) -> bool:
    """Whether a checkpoint save gathers the full weights of a ZeRO-3 or FSDP run; "auto" is what memplan exports,
    ZeRO-3 gathers and FSDP saves shards (Knobs resolves it, a model_copy may not)."""
    return k.save_weights == "full" or (k.save_weights == "auto" and k.fsdp == "off")


def combination_rules(k: KnobFields) -> None:
    """Every rule between `k`'s knobs alone, in the order a broken one is reported (the first raises); resolves the
    release's name and save_weights "auto" and canonicalizes zero_buckets in place (k is being validated)."""
    release_rules(k)
    lora_rules(k)
    freeze_rules(k)
    run_rules(k)
    check_task_knobs(k)
    check_rl_knobs(
        k.workload, {f: k.__dict__[f] for f in ("checkpointing", "loss", "batching", "optimizer_in_backward")}
    )
    if k.optimizer_in_backward:
        optimizer_in_backward_rules(k)
    if k.optimizer in MATRIX_OPTIMIZERS:
        matrix_optimizer_rules(k)
    parallel_rules(k)
    if k.fsdp != "off":
        fsdp_rules(k)
    else:
        deepspeed_rules(k)
    if k.fsdp_load == "whole" and k.fsdp == "off":
        raise BadInput(
            "--fsdp-load whole is how FSDP's ranks load the model: it needs --fsdp full or grad-op", "fsdp_load"
        )


def release_rules(k: KnobFields) -> None:
    """The release line's name ("" for the newest; BadInput naming what is accepted) and what the framework at that
    release cannot run (planner.frameworks.adapter)."""
    if k.release:
        object.__setattr__(k, "release", FRAMEWORKS[k.framework].line(k.release))
    refused = adapter(k.framework, k.release).cannot(k.__dict__)  # the field values, read only (dict(k) copies)
    if refused:
        raise BadInput(refused[1], refused[0])


def run_rules(k: KnobFields) -> None:
    """save_weights "auto" resolved to what memplan exports; evaluation, expert parallelism, RL roles, weight-sync
    groups and ZeRO buckets against the knobs they need."""
    if k.save_weights == "auto" and (k.zero_stage == 3 or k.fsdp != "off"):  # what memplan exports
        object.__setattr__(k, "save_weights", "full" if saves_full_weights(k) else "sharded")
    if k.eval_logits_steps and not k.eval_batch:
        raise BadInput(
            f"--eval-logits-steps {k.eval_logits_steps} needs a run that evaluates: give --eval-batch N",
            "eval_logits_steps",
        )
    if k.expert_parallel > 1 and k.fsdp == "off":
        raise BadInput(EXPERT_PARALLEL_NEEDS_FSDP, "expert_parallel")
    if k.workload.role_run and k.framework not in ROLE_FRAMEWORKS:
        raise BadInput(
            f"--workload {k.workload.kind} is planned by its roles (actor, critic, reference, reward model and "
            f"rollout) as a framework that runs it does: give --framework {' or '.join(ROLE_FRAMEWORKS)}",
            "workload",
        )
    opd = k.workload.kind == "grpo" and k.workload.teacher_model is not None
    if opd and not adapter(k.framework, k.release).grpo_teacher:
        raise BadInput(
            f"--workload grpo with --teacher-model: {k.framework}'s GRPO takes no teacher (a teacher's log-probs in the "
            "advantage is ms-swift 4's OPD-RL, from v4.4.0): give --framework "
            + " or ".join(frameworks_with("grpo_teacher")),
            "teacher_model",
        )
    if k.workload.chord_sft_batch:
        chord_rules(k)
    if k.workload.kind == "grpo" and k.workload.num_generations < 2 and not one_sample_groups(k) and not opd:
        raise BadInput(
            f"--num-generations {k.workload.num_generations}: GRPO compares 2 or more completions of a prompt",
            "num_generations",
        )
    if k.workload.kind == "gkd" and k.workload.generation != "hf" and not adapter(k.framework, k.release).gkd_vllm:
        raise BadInput(
            f"--workload gkd with --generation {k.workload.generation}: {k.framework}'s GKD generates its on-policy "
            f"completions with HF's generate on the training GPU (give --generation hf), or give --framework "
            + " or ".join(frameworks_with("gkd_vllm")),
            "generation",
        )
    if k.workload.roles.move_model_batches is not None and not FRAMEWORKS[k.framework].sync_groups:
        raise BadInput(
            "--move-model-batches is ms-swift's --move_model_batches (its weight sync's groups): give --framework "
            + " or ".join(frameworks_with("sync_groups")),
            "move_model_batches",
        )
    r = k.workload.roles
    own = [
        f for f in ("logprob_micro_batch", "ref_logprob_micro_batch", "ref_logprob_max_tokens_per_gpu") if getattr(r, f)
    ]
    if own and k.framework not in (sizes := engines_with("own_pass_sizes")):
        raise BadInput(
            f"--{own[0].replace('_', '-')} sizes a log-prob pass apart from the update, as {' and '.join(sizes)} runs "
            f"it; {k.framework} scores at the update's micro-batch (or --logprob-max-tokens-per-gpu): give --framework "
            + " or ".join(sizes),
            own[0],
        )
    if r.fused_kernels and k.framework not in (fused := engines_with("fused_chunk_tokens")):
        raise BadInput(
            "--fused-kernels true is verl's model.use_fused_kernels (its chunked log-prob head): give --framework "
            + " or ".join(fused),
            "fused_kernels",
        )
    if k.zero_buckets:  # planner.config.zerobuckets: its one canonical text (the plan's cache key)
        try:
            object.__setattr__(k, "zero_buckets", zerobuckets.canonical(zerobuckets.parse(k.zero_buckets)))
        except ValueError as e:
            raise BadInput(str(e), "zero_buckets") from None


def frameworks_with(field: str) -> list[str]:
    """The frameworks whose adapter sets the Memory flag `field` (sync_groups, gkd_vllm, grpo_teacher)."""
    return [n for n, f in FRAMEWORKS.items() if getattr(f, field)]


def engines_with(field: str) -> list[str]:
    """The frameworks whose RoleEngine sets `field` (a flag or a non-zero size)."""
    return [n for n, f in FRAMEWORKS.items() if f.role_engine is not None and getattr(f.role_engine, field)]


def one_sample_groups(k: KnobFields) -> bool:
    """Whether the framework's GRPO, planned by roles, runs one sample a prompt (RoleEngine.one_sample_groups)."""
    engine = FRAMEWORKS[k.framework].role_engine
    return k.role_run and engine is not None and engine.one_sample_groups


def deepspeed_rules(k: KnobFields) -> None:
    """Offload and pure bf16 without FSDP: what DeepSpeed's stages allow."""
    if k.offload != "none" and k.zero_stage == 0:
        raise BadInput(
            "--offload optimizer needs DeepSpeed: use --zero 1, 2 or 3 (or --fsdp full with --offload optimizer+params)"
            if k.offload == "optimizer"
            else "--offload optimizer+params needs DeepSpeed or FSDP: use --zero 3 or --fsdp full",
            "offload",
        )
    if k.offload == "optimizer+params" and k.zero_stage != 3:
        raise BadInput("--offload optimizer+params needs --zero 3 (parameter offload is a ZeRO-3 feature)", "offload")
    if k.precision == "bf16-pure" and k.zero_stage != 0:
        raise BadInput(
            "--precision bf16-pure runs without DeepSpeed (--zero 0); DeepSpeed keeps fp32 master weights",
            "precision",
        )


def chord_rules(k: KnobFields) -> None:
    """CHORD's SFT rows (workload.chord_sft_batch): a framework whose GRPO takes them, on whole rows."""
    if not adapter(k.framework, k.release).grpo_chord:
        raise BadInput(
            f"--chord-sft-batch: {k.framework}'s GRPO takes no CHORD SFT rows (ms-swift's, from v3.9.0): give "
            "--framework " + " or ".join(frameworks_with("grpo_chord")),
            "chord_sft_batch",
        )
    if k.sequence_parallel > 1:  # rlhf_trainers/utils.py:1651-1658, trainers/utils.py:202-217
        raise BadInput(
            "--chord-sft-batch with --sequence-parallel: ms-swift's CHORD loss calls the model without "
            "sequence_parallel.prepare_inputs and scores the rows' labels whole (rlhf_trainers/utils.py:1651-1658, "
            "trainers/utils.py:202-217): not planned under the split; give --sequence-parallel 1",
            "chord_sft_batch",
        )


def parallel_rules(k: KnobFields) -> None:
    """Sequence, context and tensor parallelism between knobs alone (planner.config.layout: with the model and GPUs)."""
    if k.cp_attention != "ring" and k.context_parallel == 1:
        raise BadInput(f"--cp-attention {k.cp_attention} needs --context-parallel 2 or more", "cp_attention")
    splits = k.sequence_parallel * k.context_parallel
    if splits > 1 and k.attention == "eager":
        raise BadInput(
            "--attention eager with --sequence-parallel or --context-parallel: the split attention runs sdpa or "
            "flash kernels (DeepSpeed's Ulysses refuses eager); use --attention sdpa or flash",
            "attention",
        )
    if k.tensor_parallel > 1 and k.quant != "none":
        raise BadInput(
            f"--tensor-parallel {k.tensor_parallel} with --quant {k.quant}: a quantized base's packed weights "
            "are not split by torch's tensor-parallel plan; use --tensor-parallel 1",
            "tensor_parallel",
        )
    # Ulysses alone: planned for DPO, KTO and the critic-free RL runs, one trainer's or split into roles (the
    # frameworks that run none say so: Runs.dpo_runs, Runs.kto_runs, Runs.grpo_sp); PPO's critic splits on its own
    alone = k.workload.kind in ("dpo", "kto", *CRITIC_FREE)
    if k.parallel > 1 and k.workload.rl and not (alone and k.parallel == k.sequence_parallel):
        raise BadInput(
            f"--workload {k.workload.kind} with tensor, sequence or context parallelism: RL roles split this way "
            "are not planned yet; plan it without them",
            "workload",
        )
    if k.device_map > 1:
        device_map_rules(k)
    if k.dataparallel:
        dataparallel_rules(k)
    if k.parallel > 1 and k.expert_parallel > 1:
        raise BadInput(
            "--expert-parallel with tensor, sequence or context parallelism is not planned: give one of them",
            "expert_parallel",
        )


def one_process_others(k: KnobFields, device_map: bool) -> str:
    """What a one-process placement (device_map, nn.DataParallel) does not combine with: the splits and sharding
    set, with device_map's own where `device_map`, else an RL workload; "" for none."""
    others = [
        f"--{f.replace('_', '-')} {v}"
        for f, v, off in (
            ("zero", k.zero_stage, 0),
            ("fsdp", k.fsdp, "off"),
            ("offload", k.offload, "none"),
            ("tensor_parallel", k.tensor_parallel, 1),
            ("sequence_parallel", k.sequence_parallel, 1),
            ("context_parallel", k.context_parallel, 1),
            ("expert_parallel", k.expert_parallel, 1),
            *((("device_map", k.device_map, 1),) if device_map else ()),
        )
        if v != off
    ]
    return ", ".join(others) or (f"--workload {k.workload.kind}" if k.workload.rl else "")


def device_map_rules(k: KnobFields) -> None:
    """One process over several GPUs: DeepSpeed and FSDP place the model themselves (transformers refuses a
    device_map under ZeRO-3, and DeepSpeed moves the whole module to its rank's device), and the other splits
    are not combined with it."""
    what = one_process_others(k, device_map=False)
    if what:
        raise BadInput(
            f"--device-map {k.device_map} with {what}: one process over several GPUs is planned under DDP, "
            "without ZeRO, FSDP, offload, other splits or an RL workload",
            "device_map",
        )


def dataparallel_rules(k: KnobFields) -> None:
    """torch's nn.DataParallel: HF's Trainer wraps the model in it only without DeepSpeed, FSDP or a launcher
    (transformers 4.40.2 trainer.py:1628-1629, n_gpu > 1), so it takes none of the other splits."""
    what = one_process_others(k, device_map=True)
    if what:
        raise BadInput(
            f"--dataparallel with {what}: torch's nn.DataParallel is one process replicating the whole model, "
            "planned without ZeRO, FSDP, offload, other splits or an RL workload",
            "dataparallel",
        )


def optimizer_in_backward_rules(k: KnobFields) -> None:
    if k.zero_stage or k.fsdp != "off":
        raise BadInput(
            "--optimizer-in-backward steps each parameter in its own backward hook: it runs without "
            "DeepSpeed or FSDP (--zero 0 --fsdp off), on one GPU",
            "optimizer_in_backward",
        )
    if k.precision == "fp16":
        raise BadInput(
            "--optimizer-in-backward with --precision fp16: a loss scaler cannot skip a step whose "
            "parameters are already updated; use bf16 or fp32",
            "optimizer_in_backward",
        )


def matrix_optimizer_rules(k: KnobFields) -> None:
    """GaLore, APOLLO and Muon step whole matrices in torch: no DeepSpeed (LLaMA-Factory 0.9.5 hparams/parser.py:400-401
    refuses GaLore and APOLLO with it) or FSDP shards (axolotl's Muon under FSDP2 apart: Framework.muon_fsdp); GaLore and APOLLO project a full-rank gradient, so full
    fine-tuning only (finetuning_args.py:595-596: "Cannot use LoRA with GaLore, APOLLO or BAdam together")."""
    fsdp2_muon = k.optimizer == "muon" and k.fsdp in ("full", "grad-op") and adapter(k.framework, k.release).muon_fsdp
    if k.zero_stage or (k.fsdp != "off" and not fsdp2_muon):
        raise BadInput(
            f"--optimizer {k.optimizer} steps whole matrices in torch: it runs without DeepSpeed or FSDP "
            "(--zero 0 --fsdp off)",
            "optimizer",
        )
    if k.lora_rank and k.optimizer in LOW_RANK_OPTIMIZERS:
        raise BadInput(
            f"--optimizer {k.optimizer} projects full-rank gradients: it trains without LoRA (--lora-rank 0)",
            "optimizer",
        )
    if k.optimizer == "apollo-adamw" and k.optimizer_projection != "std":
        # apollo-torch 1.0.3: the channel-wise scaling factor (apollo.py:168-178) does not broadcast against a gradient
        # projected on its longer side (RuntimeError on CPU for right, left and reverse_std), and full raises
        # NotImplementedError (random_projector.py:134-135)
        raise BadInput(
            f"--optimizer-projection {k.optimizer_projection} with --optimizer apollo-adamw: APOLLO's channel-wise "
            "scaling fails on a gradient projected on its longer side (apollo.py:168-178): memplan plans APOLLO's std",
            "optimizer_projection",
        )


def fsdp_rules(k: KnobFields) -> None:
    if k.zero_stage:
        raise BadInput(f"--fsdp {k.fsdp} with --zero {k.zero_stage}: a plan uses ZeRO or FSDP, not both", "fsdp")
    if k.offload == "optimizer":
        raise BadInput(
            "--offload optimizer with --fsdp: FSDP2's CPUOffloadPolicy moves parameters, gradients and "
            "optimizer states together; use --offload optimizer+params",
            "offload",
        )
    if k.precision == "fp16":
        raise BadInput(
            "--precision fp16 with --fsdp: FSDP plans run bf16 (fp32 shards, bf16 compute), bf16-pure or fp32",
            "precision",
        )


def probe_rules(k: KnobFields, backend: str) -> None:
    """What a probe of `backend` cannot trace (Knobs.for_probe): an unknown backend, expert parallelism (no
    all-to-all in one rank's trace) and the splits that share a sample (one process on one device)."""
    if backend not in PROBE_BACKENDS:
        raise BadInput(f"--backend {backend!r}: accepted values are {', '.join(PROBE_BACKENDS)}", "backend")
    if k.expert_parallel > 1:
        raise BadInput(
            "--expert-parallel: a probe traces one rank's step without the all-to-all; expert-parallel "
            "plans are analytic",
            "expert_parallel",
        )
    if k.parallel > 1:
        raise BadInput(
            "--tensor-parallel, --sequence-parallel, --context-parallel, --device-map: a probe traces one process "
            "on one device without their collectives; such plans are analytic",
            "device_map" if k.device_map > 1 else "tensor_parallel" if k.tensor_parallel > 1 else "sequence_parallel",
        )


def projection_model_error(k: KnobFields, spec) -> BadInput | None:
    """GaLore's reverse_std projects a wide gradient (m < n) on the right, to m x r, and projects it back on the left
    wherever m <= r (galore_projector.py:53-56 decides from the projected shape): a matmul of mismatched shapes, a
    RuntimeError at the first step (measured on CPU, galore-torch 1.0), for a rank at or above a wide target's rows."""
    if k.optimizer not in LOW_RANK_OPTIMIZERS or k.optimizer_projection != "reverse-std" or spec is None:
        return None
    wide = [t for t in spec.tensors if len(t.shape) == 2 and t.adapted(k.optimizer_targets) and t.shape[0] < t.shape[1]]
    rows = min((t.shape[0] for t in wide), default=None)
    if rows is None or k.optimizer_rank < rows:
        return None
    return BadInput(
        f"--optimizer-projection reverse-std at --optimizer-rank {k.optimizer_rank}: GaLore projects a {rows}-row "
        f"target back on the wrong side (galore_projector.py:53-56) and fails; use a rank under {rows} or std",
        "optimizer_projection",
    )
