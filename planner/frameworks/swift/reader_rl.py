"""ms-swift 4.6.0's `swift rlhf`: which trainer `--rlhf_type` picks (DPO, KTO, GRPO and GKD planned; ORPO, SimPO and CPO as
DPO without a reference model; rm as a one-score seq-cls head over each pair's rows), the GRPO inputs with swift's
defaults (beta 0.04, vLLM at 0.9 of the GPU when colocated), GKD's teacher and inputs, and the generation settings
memplan cannot plan yet (GRPO with a teacher refused). Also the default lookup both swift modules share.
"""

from __future__ import annotations

from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.swift import reader_3x as swift3x
from planner.frameworks.swift.keys import KEYS
from planner.intake.collect import GIVEN_FIELDS, SWIFT, Collector, as_bool, as_float, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup

S = "swift/arguments/"
RLHF_AS = {
    "dpo": "dpo",
    "kto": "kto",
    "grpo": "grpo",
    "gkd": "gkd",
    "ppo": "ppo",
    "orpo": "dpo",
    "simpo": "dpo",
    "cpo": "dpo",
}


def get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    return fallback, default(SWIFT, cite, f"{key} {fallback}")


def look(f: dict[str, Flag], name: str) -> tuple[object, str]:
    """(value, source) of field `name`'s flag (planner.frameworks.swift.keys), else swift's default with its cite."""
    k = KEYS[name]
    return get(f, k.key, k.default, k.cite)


def read_kind(c: Collector, f: dict[str, Flag], sub: str) -> str:
    if sub != "rlhf":
        return "sft"
    rlhf, src = look(f, "workload.kind")
    if rlhf == "rm":
        read_rm(c, src)
        return "rm"
    kind = RLHF_AS.get(str(rlhf))
    if kind is None:
        c.note(f"{src} ({rlhf} is not planned yet; planned as SFT)")
        return "sft"
    c.set("workload.kind", kind, src, KEYS.flag("workload.kind"))
    if kind == "kto":  # the KL batch's and the rows' whole logits, not TRL 1.16's fused head
        c.set(
            "workload.logprobs",
            "full",
            f"{src} (rlhf_trainers/kto_trainer.py:53,59-61,128)",
            KEYS.flag("workload.kind"),
        )
    if rlhf != kind:
        c.set(
            "workload.precompute_ref_log_probs", True, f"{src} ({rlhf}: no reference model)", KEYS.flag("workload.kind")
        )
    return kind


def read_rm(c: Collector, src: str) -> None:
    """--rlhf_type rm: ms-swift sets task_type seq_cls and num_labels 1 over any given (v4.5.2
    swift/arguments/rlhf_args.py:493-495), and its RewardTrainer runs each pair's chosen and rejected rows in one batch,
    split in halves (swift/rlhf_trainers/reward_trainer.py:45-47): a one-output score head, one rejected row a row."""
    flag = KEYS.flag("workload.kind")
    c.set("task", "seq-cls", f"{src} (task_type seq_cls: swift/arguments/rlhf_args.py:493-495)", flag)
    c.set("num_labels", 1, f"{src} (num_labels 1: swift/arguments/rlhf_args.py:493-495)", flag)
    c.set("negatives", 1, f"{src} (chosen and rejected rows: swift/rlhf_trainers/reward_trainer.py:45-47)", flag)


# CHORD: an SFT micro-batch of expert rows whose loss joins the GRPO loss before backward (v4.5.2
# swift/rlhf_trainers/grpo_trainer.py:1228-1229, its batch at utils.py:1576-1582): workload.chord_sft_batch
# (planner.estimate.chord); its mu schedule and phi weighting change no memory


def read_grpo(c: Collector, f: dict[str, Flag], near, placed3: str | None = None) -> None:
    """GRPO's inputs: generations, completion length, iterations, beta, vLLM; `placed3`: 3.1.1-3.4.x's placement of
    its engine (reader_3x.placement), where the run is read in those words. A teacher is 4.x's OPD-RL (read_teacher);
    2.x and 3.x take none (a note)."""
    teacher = next((f[k] for k in ("teacher_model", "teacher_model_server") if k in f), None)
    if teacher is not None and str(c.facts.get("release", ("",))[0] or "").startswith(("2", "3")):
        c.note(f"{teacher.source} (ms-swift 2.x and 3.x's GRPO takes no teacher: OPD-RL came in v4.4.0)")
    elif teacher is not None:
        read_teacher(c, f, near, "planned without it")
    chord = f.get("chord_sft_per_device_train_batch_size")  # v4.5.2 swift/rlhf_trainers/args_mixin.py:388
    if chord is not None and (as_int(one(chord.value)) or 0) > 0:
        c.number("workload.chord_sft_batch", chord.value, chord.source, KEYS.flag("workload.chord_sft_batch"))
    one_ok = 1 if c.get("workload.teacher_model") else 2  # one generation a prompt: OPD-RL's (:408-410)
    for field, lo in (("workload.num_generations", one_ok), ("workload.max_completion_length", 1)):
        v, s = look(f, field)
        c.number(field, v, s, KEYS.flag(field), minimum=lo)
    _steps_per_generation(c, f)
    it = KEYS.key("workload.num_iterations")
    if it in f:
        c.number("workload.num_iterations", f[it].value, f[it].source, KEYS.flag("workload.num_iterations"))
    beta, bsrc = look(f, "workload.beta")
    if as_float(beta) is not None:
        c.set("workload.beta", as_float(beta), bsrc, KEYS.flag("workload.beta"))
    _vllm(c, f, placed3)


def read_gkd(c: Collector, f: dict[str, Flag], near) -> None:
    """GKD's teacher (--teacher_model, found offline as the model is; none: the student distils from itself,
    rlhf_args.py:403-407), lmbda (:263), beta (0.5 for gkd, :516-518) and the on-policy completions' length (:242);
    what the plan does not model is a note."""
    read_teacher(c, f, near, "planned as the student distilling itself")
    for field in ("workload.lmbda", "workload.jsd_beta"):
        v, s = look(f, field)
        if as_float(v) is not None:
            c.set(field, as_float(v), s, KEYS.flag(field))
    v, s = look(f, "workload.max_completion_length")
    c.number("workload.max_completion_length", v, s, KEYS.flag("workload.max_completion_length"), minimum=1)
    _vllm(c, f)  # the student's completions from vLLM, as GRPO's (Framework.gkd_vllm: from v3.10.0)
    for key in ("gkd_logits_topk", "sft_alpha"):
        if key in f:
            c.note(f"{f[key].source} (--{key} is not planned yet: planned with full logits)")


# --teacher_deepspeed's bundled names (swift/arguments/rlhf_args.py: the teacher prepared with its own DeepSpeed,
# rlhf_trainers/rollout_mixin.py:229-250): where its weights sit (workload.teacher_sharding); the optimizer offloads
# of zero2_offload have nothing to move for a frozen teacher
TEACHER_DS = {"zero0": "whole", "zero1": "whole", "zero2": "whole", "zero2_offload": "whole", "zero3": "zero3",
              "zero3_offload": "zero3-offload"}  # fmt: skip


def teacher_file(c: Collector, ds: Flag, near) -> None:
    """--teacher_deepspeed naming a DeepSpeed JSON file: its zero_optimization.stage and offload_param place the frozen
    teacher as the bundled names do (TEACHER_DS: ZeRO-3 shards it, offload_param puts the shards on the host; stages 0
    to 2 keep it whole, their optimizer offload having nothing to move)."""
    cfg, name, path = deepspeed.load(one(ds.value), near, "swift")
    if cfg is None:
        c.note(f"{ds.source} (the teacher's DeepSpeed file was not found: its weights planned as the student's are)")
        return
    if path is not None:
        c.add_file(path)
    zero = cfg.get("zero_optimization") if isinstance(cfg.get("zero_optimization"), dict) else {}
    stage = as_int(zero.get("stage", 0)) or 0
    param = zero.get("offload_param") if isinstance(zero.get("offload_param"), dict) else {}
    host = str(param.get("device", "none")).lower() in ("cpu", "nvme")
    placed = ("zero3-offload" if host else "zero3") if stage == 3 else "whole"
    why = f"{name}: zero_optimization.stage: {stage}" + (f", offload_param.device: {param['device']}" if host else "")
    c.set("workload.teacher_sharding", placed, f"{why} (via {ds.source})", "--teacher_deepspeed")


def read_teacher(c: Collector, f: dict[str, Flag], near, missing: str) -> None:
    """GKD's and OPD-RL's teacher: --teacher_model (found offline as the model is; `missing`: what the plan does
    without one it cannot find), the student itself with its adapter disabled where the teacher is the model under
    LoRA (rlhf_args.py:409-412), --teacher_deepspeed's placement; a teacher server or offloaded teacher a note."""
    ds, placed_teacher = f.get("teacher_deepspeed"), False
    if "teacher_model" in f:
        name, src = str(one(f["teacher_model"].value)), f["teacher_model"].source
        same = "model" in f and name == str(one(f["model"].value))
        tuner = str(one(f["tuner_type"].value)) if "tuner_type" in f else "lora"  # tuner_args.py:133
        found = lookup(name, near)
        if same and tuner != "full" and "teacher_adapters" not in f:
            c.note(
                f"{src} (the student with its adapter disabled is the teacher, rlhf_args.py:409-412: no second model)"
            )
        elif found is None:
            c.note(f"{src} ({name} not found offline: pass its config.json; {missing})")
        else:
            c.set("workload.teacher_model", found.ref, f"{src} ({found.how})", "--teacher_model")
            placed, placed_teacher = TEACHER_DS.get(str(one(ds.value))) if ds is not None else None, True
            if placed:
                c.set("workload.teacher_sharding", placed, ds.source, "--teacher_deepspeed")
            elif ds is not None:
                teacher_file(c, ds, near)
    if ds is not None and not placed_teacher:  # no second model planned: nothing for it to place
        c.note(f"{ds.source} (no teacher model planned here, so no teacher to place)")
    for key in ("teacher_model_server", "offload_teacher_model"):
        if key in f:
            c.note(f"{f[key].source} (--{key} is not planned yet: planned with the teacher resident on the GPUs)")


def _steps_per_generation(c: Collector, f: dict[str, Flag]) -> None:
    """--steps_per_generation (micro-steps one generation batch feeds), or --generation_batch_size over the global
    micro-batch (v4.5.2 swift/rlhf_trainers/args_mixin.py:200-219); unset: the gradient accumulation (:205-207)."""
    key, flag = KEYS.key("workload.steps_per_generation"), KEYS.flag("workload.steps_per_generation")
    if key in f:
        c.number("workload.steps_per_generation", f[key].value, f[key].source, flag)
        return
    gbs = f.get("generation_batch_size")
    size = as_int(one(gbs.value)) if gbs is not None else None
    if gbs is None or size is None:
        return
    per = int(c.get("gpus_per_node", 1)) * int(c.get("nodes", 1)) // int(c.get("device_map", 1) or 1)
    micro = int(c.get("micro_batch", 1)) * max(per, 1)
    if size < micro or size % micro:
        c.note(f"{gbs.source} (not a whole number of global micro-batches of {micro}: steps_per_generation not read)")
        return
    why = f"{gbs.source} ({size} // {micro} a micro-step: swift/rlhf_trainers/args_mixin.py:208-212)"
    c.set("workload.steps_per_generation", size // micro, why, "--generation_batch_size")


def _vllm(c: Collector, f: dict[str, Flag], placed3: str | None = None) -> None:
    if placed3 is not None:
        mode = placed3
        swift3x.set_placement(c, f, mode)
    elif not ("use_vllm" in f and as_bool(f["use_vllm"].value)):
        return
    else:
        mode = _mode(c, f)
    if mode == "colocate":
        util, src = look(f, "workload.vllm_gpu_memory_utilization")
        c.set("workload.vllm_gpu_memory_utilization", as_float(util) or 0.9, src, "--vllm_gpu_memory_utilization")
    if "vllm_tensor_parallel_size" in f and (as_int(one(f["vllm_tensor_parallel_size"].value)) or 1) > 1:
        tp = f["vllm_tensor_parallel_size"]  # the engine's weights split over its group (the sync wakes them)
        c.set("workload.roles.rollout_tp", as_int(one(tp.value)), tp.source, "--vllm_tensor_parallel_size")
    if "move_model_batches" in f and (as_int(one(f["move_model_batches"].value)) or 0) >= 1:
        batches = as_int(one(f["move_model_batches"].value))
        c.set(
            "workload.roles.move_model_batches",
            batches,
            f"{f['move_model_batches'].source} (the weight sync gathers the layers in {batches} groups)",
            "--move_model_batches",
        )
    if mode != "colocate":
        return
    if "sleep_level" in f and as_int(one(f["sleep_level"].value)) in (0, 1, 2):
        level = as_int(one(f["sleep_level"].value))
        c.set(
            "workload.roles.sleep_level",
            level,
            f"{f['sleep_level'].source} (vLLM asleep outside generation)",
            "--sleep_level",
        )
    offload = [
        part
        for key, parts in (("offload_model", ("actor-params", "ref")), ("offload_optimizer", ("actor-optimizer",)))
        if key in f and as_bool(one(f[key].value))
        for part in parts
    ]
    if offload:  # to the host while vLLM generates (swift/rlhf_trainers/grpo_trainer.py:1843-1861 offload_context)
        srcs = "; ".join(f[k].source for k in ("offload_model", "offload_optimizer") if k in f)
        c.set("workload.roles.offload", tuple(offload), srcs, "--offload_model")


# --use_vllm without --vllm_mode: colocate by default from v3.5.0 (v3.5.0 swift/trainers/arguments.py:180; v3.7.0 :240,
# v3.9.0 :271) until v3.12.0 requires one (v3.12.0 swift/llm/argument/rlhf_args.py:362-363; 4.x the same); the 3.4
# line reads it as 3.4.x places it (reader_3x.applies)
NO_MODE = {
    "3.7": "colocate, 3.7-3.8's default (v3.7.0 swift/trainers/arguments.py:240)",
    "3.9": "colocate, 3.9-3.11's default (v3.9.0 swift/trainers/arguments.py:271); from 3.12 ms-swift requires one "
    "(v3.12.0 swift/llm/argument/rlhf_args.py:362-363)",
}


def _mode(c: Collector, f: dict[str, Flag]) -> str:
    """--vllm_mode: 4.x requires it; the 3.x lines that take it colocate without it (NO_MODE)."""
    mode = str(one(f["vllm_mode"].value)) if "vllm_mode" in f else ""
    if mode not in ("colocate", "server"):
        line = str(c.facts.get("release", ("",))[0] or "")
        said = NO_MODE.get(line, "ms-swift requires one; planned as colocate")
        c.note(f"{f['use_vllm'].source} (use_vllm without vllm_mode: {said})")
        mode = "colocate"
    c.set(
        "workload.generation",
        f"vllm-{mode}",
        f["vllm_mode"].source if "vllm_mode" in f else f["use_vllm"].source,
        "--vllm_mode",
    )
    return mode


def grpo_split_steps(c: Collector, kind: str) -> None:
    """GRPO under --sequence_parallel_size S: the trainer multiplies the gradient accumulation by S (v4.6.0
    swift/rlhf_trainers/grpo_trainer.py:152-153; v3.8.0 trainers/sequence_parallel/ulysses.py:355), because the S
    ranks of a group share their rows, and feeds each generation batch to steps_per_generation x S micro-steps
    (rollout_mixin.py:308-330): memplan's accumulation and steps per generation count the micro-steps that run, so
    the global batch (micro x accumulation x world / S) is the files' micro x accumulation x world. S is the one the
    run is planned with: a --sequence-parallel given beside the files (GIVEN_FIELDS) over theirs."""
    sp = GIVEN_FIELDS.get().get("sequence_parallel", c.get("sequence_parallel"))
    if kind != "grpo" or not isinstance(sp, int) or sp < 2:
        return
    for field, cite in (
        ("grad_accum", "rlhf_trainers/grpo_trainer.py:152-153"),
        ("workload.steps_per_generation", "rlhf_trainers/rollout_mixin.py:328-330"),
    ):
        s = c.setting(field)
        if s is None or not isinstance(s.value, int):
            continue
        why = f"{s.source} (x sequence_parallel_size {sp}: GRPO's ranks of a group share their rows, {cite})"
        c.set(field, s.value * sp, why, s.key)
