"""OpenRLHF 0.11.2's `python3 -m openrlhf.cli.train_ppo_ray` flags (dotted, as since 0.10.2), and the flat names of
0.10.1 and before, which 0.11.2's parser refuses (read here, said in the reading): the estimator and so the roles,
each role's GPUs or --train.colocate_all, the batch split, vLLM's engines, sleep and share, the token budgets, what
DeepSpeed offloads. Defaults cited from cli/train_ppo_ray.py (0.11.2)."""

from __future__ import annotations

from planner.intake.collect import Collector, as_bool, as_float, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup, read_model

ORL = "openrlhf 0.11.2"
T = "cli/train_ppo_ray.py"
ESTIMATORS = {
    "gae": "ppo",
    "group_norm": "grpo",
    "dr_grpo": "grpo",
    "rloo": "rloo",
    "reinforce": "reinforce++",
    "reinforce_baseline": "reinforce++",
    "flash_reinforce": "reinforce++",
}
# flat names of <= 0.10.1 -> the dotted name (the 0.10.2 rename)
OLD = {
    "pretrain": "actor.model_name_or_path",
    "critic_pretrain": "critic.model_name_or_path",
    "reward_pretrain": "reward.model_name_or_path",
    "remote_rm_url": "reward.remote_url",
    "colocate_all_models": "train.colocate_all",
    "colocate_actor_ref": "train.colocate_actor_ref",
    "colocate_critic_reward": "train.colocate_critic_reward",
    "deepspeed_enable_sleep": "ds.enable_sleep",
    "enable_sleep": "vllm.enable_sleep",
    "vllm_enable_sleep": "vllm.enable_sleep",
    "zero_stage": "ds.zero_stage",
    "adam_offload": "ds.adam_offload",
    "param_dtype": "ds.param_dtype",
    "bf16": "ds.param_dtype",  # <= 0.10's --bf16 (its DeepSpeed config's bf16.enabled): 0.11.2's bf16
    "packing_samples": "ds.packing_samples",
    "use_dynamic_batch": "train.dynamic_batch_enable",
    "gradient_checkpointing": "actor.gradient_checkpointing_enable",
    "micro_train_batch_size": "train.micro_batch_size",
    "micro_rollout_batch_size": "rollout.micro_batch_size",
    "train_batch_size": "train.batch_size",
    "rollout_batch_size": "rollout.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt",
    "max_epochs": "train.max_epochs",
    "max_len": "data.max_len",
    "max_new_tokens": "rollout.max_new_tokens",
    "generate_max_len": "rollout.max_new_tokens",
    "advantage_estimator": "algo.advantage.estimator",
    "init_kl_coef": "algo.kl.init_coef",
    "use_kl_loss": "algo.kl.use_loss",
    "entropy_loss_coef": "actor.entropy_coef",
    "lora_rank": "ds.lora.rank",
    "train_max_tokens_per_gpu": "train.max_tokens_per_gpu",
    "rollout_max_tokens_per_gpu": "rollout.max_tokens_per_gpu",
}
for _role in ("actor", "critic", "ref", "reward"):
    OLD[f"{_role}_num_nodes"] = f"{_role}.num_nodes"
    OLD[f"{_role}_num_gpus_per_node"] = f"{_role}.num_gpus_per_node"
for _key in ("num_engines", "tensor_parallel_size", "gpu_memory_utilization", "enforce_eager"):
    OLD[f"vllm_{_key}"] = f"vllm.{_key}"
DEFAULTS = {  # dotted flag -> (0.11.2's default, line)
    "algo.advantage.estimator": ("gae", 515),
    "algo.kl.init_coef": (0.01, 438),
    "ds.zero_stage": (2, 327),
    "train.micro_batch_size": (1, 412),
    "train.batch_size": (128, 413),
    "rollout.batch_size": (1024, 392),
    "rollout.micro_batch_size": (1, 396),
    "rollout.n_samples_per_prompt": (1, 433),
    "train.max_epochs": (1, 397),
    "data.max_len": (2048, 398),
    "vllm.gpu_memory_utilization": (0.95, 252),
    "vllm.tensor_parallel_size": (1, 236),
    "train.max_tokens_per_gpu": (16192, 380),
}
for _role in ("actor", "critic", "ref", "reward"):
    DEFAULTS[f"{_role}.num_gpus_per_node"] = (8, 214)
    DEFAULTS[f"{_role}.num_nodes"] = (1, 213)


def dotted(c: Collector, flags: dict[str, Flag], names: dict[str, str] = OLD) -> dict[str, Flag]:
    """The flags by their 0.11.2 names (`names`: a flat name -> its dotted name in this entry point); old flat names
    are read and said once (0.11.2 refuses them)."""
    out, old = {}, []
    for key, f in flags.items():
        if key in names:
            old.append(f"--{key} (--{names[key]})")
            out.setdefault(names[key], f)
        else:
            out[key] = f
    if old:
        where = next(f.source for k, f in flags.items() if k in names).split(" ")[0]
        c.note(
            f"{where} {len(old)} flat flag names of OpenRLHF 0.10.1 and before, read as their dotted names (0.11.2's "
            f"parser refuses the flat ones): {', '.join(old)}"
        )
    return out


def get(f: dict[str, Flag], key: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    value, line = DEFAULTS[key]
    return value, default(ORL, f"{T}:{line}", f"--{key} {value}")


def on(f: dict[str, Flag], key: str) -> bool:
    return key in f and bool(as_bool(one(f[key].value)) if f[key].value is not True else True)


def precision(c: Collector, f: dict[str, Flag], cite: str) -> None:
    """--ds.param_dtype bf16|fp16 (0.11.2's default bf16), or the flat --bf16 of 0.10 and before."""
    dtype = str(one(f["ds.param_dtype"].value)) if "ds.param_dtype" in f else "bf16"
    c.set(
        "precision",
        dtype if dtype in ("bf16", "fp16") else "bf16",
        f["ds.param_dtype"].source if "ds.param_dtype" in f else default(ORL, cite, "--ds.param_dtype bf16"),
        "--ds.param_dtype",
    )


def read(c: Collector, flags: dict[str, Flag], near) -> None:
    f = dotted(c, flags)
    est, src = get(f, "algo.advantage.estimator")
    kind = ESTIMATORS.get(str(est), "grpo")
    c.set("workload.kind", kind, src, "--algo.advantage.estimator")
    coef, cs = get(f, "algo.kl.init_coef")
    loss = (
        f"; {f['algo.kl.use_loss'].source} (the KL in the loss or the reward: the same reference)"
        if ("algo.kl.use_loss" in f)
        else ""
    )
    c.set(
        "workload.beta",
        as_float(coef) or 0.0,
        f"{cs} (> 0 keeps a reference model, {T}:93-103){loss}",
        "--algo.kl.init_coef",
    )
    if "actor.model_name_or_path" in f:
        k = f["actor.model_name_or_path"]
        read_model(c, str(one(k.value)), k.source, "--actor.model_name_or_path", near)
    precision(c, f, f"{T}:330")
    stage, ss = get(f, "ds.zero_stage")
    c.number("zero_stage", stage, ss, "--ds.zero_stage", minimum=0)
    c.set("fsdp", "off", default(ORL, T, "DeepSpeed only"), "--ds.zero_stage")
    if on(f, "ds.adam_offload"):
        c.set("offload", "optimizer", f["ds.adam_offload"].source, "--ds.adam_offload")
    ckpt = on(f, "actor.gradient_checkpointing_enable")
    c.set(
        "checkpointing",
        "full" if ckpt else "off",
        f["actor.gradient_checkpointing_enable"].source if ckpt else default(ORL, f"{T}:328", "no checkpointing"),
        "--actor.gradient_checkpointing_enable",
    )
    c.set("attention", "flash", default(ORL, f"{T}:342-347", "flash_attention_2"), "--ds.attn_implementation")
    _split(c, f)
    _placement(c, f, kind, near)
    _rollout(c, f)


def _split(c: Collector, f: dict[str, Flag]) -> None:
    n, ns = get(f, "rollout.n_samples_per_prompt")
    c.number("workload.num_generations", n, ns, "--rollout.n_samples_per_prompt")
    length, ls = get(f, "data.max_len")
    new = f.get("rollout.max_new_tokens")
    total = as_int(length) or 2048
    completion = as_int(new.value) if new is not None else None
    if completion and completion < total:
        c.number("workload.max_completion_length", completion, new.source, "--rollout.max_new_tokens")
        c.number(
            "workload.max_prompt_length", total - completion, f"{ls} less --rollout.max_new_tokens", "--data.max_len"
        )
    else:
        c.number(
            "workload.max_prompt_length",
            total // 4,
            f"{ls} (memplan assumption: a quarter of it prompt)",
            "--data.max_len",
        )
        c.number("workload.max_completion_length", total - total // 4, f"{ls} (the rest completion)", "--data.max_len")
    epochs, es = get(f, "train.max_epochs")
    c.number("workload.num_iterations", epochs, es, "--train.max_epochs")
    micro, ms = get(f, "train.micro_batch_size")
    c.number("micro_batch", micro, ms, "--train.micro_batch_size")
    gb, gs = get(f, "train.batch_size")
    prompts, ps = get(f, "rollout.batch_size")
    actor = (as_int(get(f, "actor.num_gpus_per_node")[0]) or 8) * (as_int(get(f, "actor.num_nodes")[0]) or 1)
    m, g, p = as_int(micro) or 1, as_int(gb) or 128, as_int(prompts) or 1024
    if g % (m * actor) == 0:
        accum = g // (m * actor)
        c.number("grad_accum", accum, f"{gs} / (micro {m} x {actor} actor GPUs)", "--train.batch_size")
        samples = p * (as_int(n) or 1)
        if samples % g == 0:
            c.number(
                "workload.roles.mini_batches", samples // g, f"{ps} x samples per prompt / {gs}", "--rollout.batch_size"
            )


# the roles' and engines' counts --train.colocate_all places on the actor's GPUs (asserted equal, {T}:41-63)
COLOCATED = ("ref.num_gpus_per_node", "ref.num_nodes", "vllm.num_engines")


def _placement(c: Collector, f: dict[str, Flag], kind: str, near) -> None:
    """--train.colocate_all: every role on the actor's GPUs; else each role on its own GPUs, actor+ref and
    critic+reward sharing where their colocate flags say ({T}:39-142)."""
    r = "workload.roles."
    gpus = {
        role: (as_int(get(f, f"{role}.num_gpus_per_node")[0]) or 8) * (as_int(get(f, f"{role}.num_nodes")[0]) or 1)
        for role in ("actor", "critic", "ref", "reward")
    }
    per_node = as_int(get(f, "actor.num_gpus_per_node")[0]) or 8
    engines = as_int(f["vllm.num_engines"].value) if "vllm.num_engines" in f else None
    tp = as_int(get(f, "vllm.tensor_parallel_size")[0]) or 1
    beta = (as_float(get(f, "algo.kl.init_coef")[0]) or 0) > 0
    reward = "reward.model_name_or_path" in f and "reward.remote_url" not in f
    if "reward.remote_url" in f:
        c.note(f"{f['reward.remote_url'].source} (a remote reward: its server's memory is not on these GPUs)")
    if reward:
        k = f["reward.model_name_or_path"]
        found = lookup(str(one(k.value)).split(",")[0], near)
        if found is not None:
            c.set(r + "reward_model", found.ref, f"{k.source} ({found.how})", "--reward.model_name_or_path")
        else:
            reward = False
            c.note(f"{k.source} (not found offline: pass its config.json; planned without the reward model)")
    if kind == "ppo":
        k = f.get("critic.model_name_or_path") or f.get("reward.model_name_or_path")
        if k is not None:
            found = lookup(str(one(k.value)).split(",")[0], near)
            if found is not None:
                c.set(
                    r + "critic_model",
                    found.ref,
                    f"{k.source} ({found.how}; {T}:644-650)",
                    "--critic.model_name_or_path",
                )
    if not engines:
        c.note(
            "--vllm.num_engines not given: OpenRLHF generates without vLLM, which memplan does not plan (planned with one engine a GPU)"
        )
    per_src, nodes_src = get(f, "actor.num_gpus_per_node")[1], get(f, "actor.num_nodes")[1]
    if on(f, "train.colocate_all"):
        same = [f[k].source for k in COLOCATED if k in f]
        why = f"; {'; '.join(same)} (the actor's GPUs, all roles and engines on them: {T}:41-63)" if same else ""
        c.set(r + "placement", "colocate", f["train.colocate_all"].source + why, "--train.colocate_all")
        c.number(
            "gpus_per_node",
            min(per_node, gpus["actor"]),
            f"{per_src} (every role on them)",
            "--actor.num_gpus_per_node",
        )
        c.number("nodes", max(1, gpus["actor"] // per_node), nodes_src, "--actor.num_nodes")
        return
    groups = {"actor": ["actor"]}
    if beta and on(f, "train.colocate_actor_ref"):
        groups["actor"].append("ref")
    elif beta:
        groups["ref"] = ["ref"]
    if kind == "ppo":
        groups["critic"] = ["critic"]
    if reward and kind == "ppo" and on(f, "train.colocate_critic_reward"):
        groups["critic"].append("reward")
    elif reward:
        groups["reward"] = ["reward"]
    parts = [f"{'+'.join(roles)}:{gpus[lead]}" for lead, roles in groups.items()]
    rollout = (engines or gpus["actor"] // tp) * tp
    parts.append(f"rollout:{rollout}")
    total = sum(int(p.split(":")[1]) for p in parts)
    why = f"{per_src} (each role on its own GPUs, {T}:39-142: {total} in all)"
    c.set(r + "placement", ",".join(parts), why, "--actor.num_gpus_per_node")
    even = total % per_node == 0
    c.number("gpus_per_node", per_node if even else total, why, "--actor.num_gpus_per_node")
    c.number("nodes", total // per_node if even else 1, why, "--actor.num_nodes")


def _rollout(c: Collector, f: dict[str, Flag]) -> None:
    r = "workload.roles."
    util, us = get(f, "vllm.gpu_memory_utilization")
    c.set(r + "rollout_memory", as_float(util) or 0.95, us, "--vllm.gpu_memory_utilization")
    tp, ts = get(f, "vllm.tensor_parallel_size")
    c.number(r + "rollout_tp", tp, ts, "--vllm.tensor_parallel_size")
    sleep = on(f, "vllm.enable_sleep") and on(f, "train.colocate_all")
    c.set(
        r + "sleep_level",
        1 if sleep else 0,
        f["vllm.enable_sleep"].source
        + (" (level 1, vllm_engine.py:136-137)" if sleep else f" (off without --train.colocate_all, {T}:707-709)")
        if "vllm.enable_sleep" in f
        else default(ORL, f"{T}:244-249", "no vLLM sleep"),
        "--vllm.enable_sleep",
    )
    c.set(
        r + "rollout_eager",
        on(f, "vllm.enforce_eager"),
        f["vllm.enforce_eager"].source if "vllm.enforce_eager" in f else default(ORL, f"{T}:243", "CUDA graphs"),
        "--vllm.enforce_eager",
    )
    offload = []
    if on(
        f, "ds.enable_sleep"
    ):  # optimizer states, grads and fp32 master weights to the host (deepspeed_utils.py:151-188)
        offload += ["actor-optimizer", "critic-optimizer"]
    offload += [role for role in ("ref", "reward") if on(f, f"{role}.offload")]
    if offload:
        c.set(
            r + "offload",
            tuple(offload),
            "; ".join(f[k].source for k in ("ds.enable_sleep", "ref.offload", "reward.offload") if k in f),
            "--ds.enable_sleep",
        )
    packed = on(f, "ds.packing_samples") or on(f, "train.dynamic_batch_enable")
    c.set(
        r + "remove_padding",
        packed,
        f["ds.packing_samples"].source if "ds.packing_samples" in f else default(ORL, f"{T}:375", "padded rows"),
        "--ds.packing_samples",
    )
    if on(f, "train.dynamic_batch_enable"):
        budget, bs = get(f, "train.max_tokens_per_gpu")
        c.number(r + "max_tokens_per_gpu", budget, bs, "--train.max_tokens_per_gpu")
        roll = f.get("rollout.max_tokens_per_gpu")
        c.number(
            r + "logprob_max_tokens_per_gpu",
            roll.value if roll else budget,
            roll.source if roll else f"{bs} ({T}:691-697)",
            "--rollout.max_tokens_per_gpu",
        )
    else:
        rm, rs = get(f, "rollout.micro_batch_size")
        length = as_int(get(f, "data.max_len")[0]) or 2048
        c.number(
            r + "logprob_max_tokens_per_gpu",
            (as_int(rm) or 1) * length,
            f"{rs} x --data.max_len (the experience passes' rows)",
            "--rollout.micro_batch_size",
        )
    ent = f.get("actor.entropy_coef")
    if ent is not None:
        c.set(
            r + "entropy",
            "on",
            f"{ent.source} (the entropy over fp32 logits, ppo_actor.py:299)",
            "--actor.entropy_coef",
        )


DPO = "cli/train_dpo.py"
# train_dpo's flat names whose dotted name is its policy's (`--model.*`, cli/train_dpo.py:192,300 in 0.11.2), not the
# PPO actor's: `--pretrain` and `--gradient_checkpointing` were its model's flags (OpenRLHF#384, a 2024-07 command)
DPO_OLD = OLD | {
    "pretrain": "model.model_name_or_path",
    "gradient_checkpointing": "model.gradient_checkpointing_enable",
}
DPO_DEFAULTS = {"train.micro_batch_size": (8, 189), "train.batch_size": (128, 190), "data.max_len": (512, 319)}


def read_dpo(c: Collector, flags: dict[str, Flag], near) -> None:
    """OpenRLHF 0.11.2's DPO (`deepspeed --module openrlhf.cli.train_dpo`): the policy trained by DeepSpeed ZeRO, the
    reference a DeepSpeed inference copy, chosen and rejected rows in one forward (trainer/dpo_trainer.py:306-323);
    the GPUs are the deepspeed launcher's (read before this)."""
    f = dotted(c, flags, DPO_OLD)

    def val(key: str) -> tuple[object, str]:
        if key in f:
            return one(f[key].value), f[key].source
        value, line = DPO_DEFAULTS[key]
        return value, default(ORL, f"{DPO}:{line}", f"--{key} {value}")

    c.set("workload.kind", "dpo", default(ORL, DPO, "DPO"), "openrlhf.cli.train_dpo")
    if "model.model_name_or_path" in f:
        k = f["model.model_name_or_path"]
        read_model(c, str(one(k.value)), k.source, "--model.model_name_or_path", near)
    length, ls = val("data.max_len")
    c.number("workload.max_length", length, ls, "--data.max_len", minimum=2)
    micro, ms = val("train.micro_batch_size")
    c.number("micro_batch", micro, ms, "--train.micro_batch_size")
    batch, bs = val("train.batch_size")
    world = (as_int(c.get("gpus_per_node", 1)) or 1) * (as_int(c.get("nodes", 1)) or 1)
    m, g = as_int(micro) or 8, as_int(batch) or 128
    if g % (m * world) == 0:
        c.number("grad_accum", g // (m * world), f"{bs} / (micro {m} x {world} GPUs)", "--train.batch_size")
    else:
        c.note(f"{bs} is not micro {m} x {world} GPUs x an accumulation: DeepSpeed refuses it at start")
    stage, ss = get(f, "ds.zero_stage")
    c.number("zero_stage", stage, ss, "--ds.zero_stage", minimum=0)
    if on(f, "ds.adam_offload"):
        c.set("offload", "optimizer", f["ds.adam_offload"].source, "--ds.adam_offload")
    ckpt = on(f, "model.gradient_checkpointing_enable")
    src = f["model.gradient_checkpointing_enable"].source if ckpt else default(ORL, f"{DPO}:192", "no checkpointing")
    c.set("checkpointing", "full" if ckpt else "off", src, "--model.gradient_checkpointing_enable")
    precision(c, f, DPO)
    c.set("attention", "flash", default(ORL, f"{T}:342-347", "flash_attention_2"), "--ds.attn_implementation")
    if on(f, "ds.packing_samples"):
        c.note(f"{f['ds.packing_samples'].source} (packed DPO rows are not planned; planned padded)")


def release_hint(flags: dict[str, Flag]) -> tuple[str, str] | None:
    """The release a flat flag names (OLD: 0.10.1 and before; 0.9's --bf16 where 0.10 took --param_dtype), else None
    (planner.intake.releases)."""
    flat = next((f for k, f in flags.items() if k in OLD), None)
    old = "0.9" if "bf16" in flags else "0.10"
    return (old, f"{flat.source} (a flat flag of OpenRLHF 0.10.1 and before)") if flat else None
