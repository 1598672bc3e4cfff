"""OpenRLHF 0.11.2's `python3 -m openrlhf.cli.train_ppo_ray` flags (dotted, as since 0.10.2), and the flat names of
0.10.1 and before, which 0.11.2's parser refuses (read here, said in the reading): the estimator and so the roles,
the reward and critic models, each role's GPUs or --train.colocate_all, the batch split, vLLM's engines (their sleep
and share, the token budgets, what DeepSpeed offloads: reader_rollout.py). Defaults cited from cli/train_ppo_ray.py
(0.11.2)."""

from __future__ import annotations

from planner.frameworks.openrlhf import lmmr1
from planner.frameworks.openrlhf import reader_mmeureka as forks
from planner.frameworks.openrlhf.keys import KEYS, T
from planner.frameworks.openrlhf.reader_dpo import DPO_DEFAULTS, DPO_OLD, read_dpo  # noqa: F401 - re-exported
from planner.frameworks.openrlhf.reader_flags import (  # noqa: F401 - release_hint re-exported
    ESTIMATORS,
    OLD,
    ORL,
    attention,
    dotted,
    get,
    lora_targets,
    on,
    precision,
    refuse_parallel_groups,
    release_hint,
    zero_buckets,
)
from planner.frameworks.openrlhf.reader_ppo import read_old_ppo
from planner.frameworks.openrlhf.reader_rollout import read_rollout
from planner.frameworks.openrlhf.reader_sft import read_sft
from planner.intake import line_defaults, releases, world
from planner.intake.collect import Collector, as_float, as_int, default, is_file, one
from planner.intake.flags import Flag
from planner.intake.flags import parse as parse_flags
from planner.intake.models import lookup, read_model
from planner.intake.shell import read_script


def read(c: Collector, flags: dict[str, Flag], near) -> None:
    f = line_defaults.with_defaults(c, "openrlhf", KEYS, dotted(c, flags))  # 0.9's --micro_train_batch_size 4
    est, src = get(f, KEYS.key("workload.kind"))
    kind = ESTIMATORS.get(str(est), "grpo")
    c.set("workload.kind", kind, src, KEYS.flag("workload.kind"))
    coef, cs = get(f, KEYS.key("workload.beta"))
    loss = (
        f"; {f['algo.kl.use_loss'].source} (the KL in the loss or the reward: the same reference)"
        if (KEYS.key("kl_loss") in f)
        else ""
    )
    c.set(
        "workload.beta",
        as_float(coef) or 0.0,
        f"{cs} (> 0 keeps a reference model, {T}:93-103){loss}",
        KEYS.flag("workload.beta"),
    )
    if KEYS.key("model") in f:
        k = f[KEYS.key("model")]
        read_model(c, str(one(k.value)), k.source, KEYS.flag("model"), near)
    precision(c, f, f"{T}:330")
    stage, ss = get(f, KEYS.key("zero_stage"))
    c.number("zero_stage", stage, ss, KEYS.flag("zero_stage"), minimum=0)
    zero_buckets(c, f, as_int(stage) or 0)
    c.set("fsdp", "off", default(ORL, T, "DeepSpeed only"), KEYS.flag("zero_stage"))
    if on(f, KEYS.key("offload")):
        c.set("offload", "optimizer", f[KEYS.key("offload")].source, KEYS.flag("offload"))
    ckpt = on(f, KEYS.key("checkpointing"))
    c.set(
        "checkpointing",
        "full" if ckpt else "off",
        f[KEYS.key("checkpointing")].source if ckpt else default(ORL, f"{T}:328", "no checkpointing"),
        KEYS.flag("checkpointing"),
    )
    attention(c, f, f"{T}:342-347")
    _split(c, f)
    _placement(c, f, kind, near)
    read_rollout(c, f)


def _split(c: Collector, f: dict[str, Flag]) -> None:
    n, ns = get(f, KEYS.key("workload.num_generations"))
    c.number("workload.num_generations", n, ns, KEYS.flag("workload.num_generations"))
    length, ls = get(f, KEYS.key("seq_len"))
    new = f.get(KEYS.key("workload.max_completion_length"))
    total = as_int(length) or 2048
    completion = as_int(new.value) if new is not None else None
    prompt = f.get("prompt_max_len")  # 0.8.x: no --max_len, the total is the two (v0.8.9 cli/train_ppo_ray.py:44)
    moved = line_defaults.moved_default(c, "openrlhf", "workload.max_prompt_length")
    pv, psrc = (prompt.value, prompt.source) if prompt is not None else moved or (None, "")
    if pv is not None and completion and f.get(KEYS.key("seq_len")) is None:
        total, ls = as_int(pv) + completion, f"{psrc} plus --generate_max_len"
    if completion and completion < total:
        c.number("workload.max_completion_length", completion, new.source, KEYS.flag("workload.max_completion_length"))
        c.number(
            "workload.max_prompt_length",
            total - completion,
            f"{ls} less --rollout.max_new_tokens",
            KEYS.flag("seq_len"),
        )
    else:
        c.number(
            "workload.max_prompt_length",
            total // 4,
            f"{ls} (memplan assumption: a quarter of it prompt)",
            KEYS.flag("seq_len"),
        )
        c.number(
            "workload.max_completion_length", total - total // 4, f"{ls} (the rest completion)", KEYS.flag("seq_len")
        )
    epochs, es = get(f, KEYS.key("workload.num_iterations"))
    c.number("workload.num_iterations", epochs, es, KEYS.flag("workload.num_iterations"))
    micro, ms = get(f, KEYS.key("micro_batch"))
    c.number("micro_batch", micro, ms, KEYS.flag("micro_batch"))
    gb, gs = get(f, KEYS.key("global_batch"))
    prompts, ps = get(f, KEYS.key("rollout_batch"))
    actor = (as_int(get(f, KEYS.key("actor.num_gpus_per_node"))[0]) or 8) * (
        as_int(get(f, KEYS.key("actor.num_nodes"))[0]) or 1
    )
    m, g, p = as_int(micro) or 1, as_int(gb) or 128, as_int(prompts) or 1024
    if g % (m * actor) == 0:
        accum = g // (m * actor)
        c.number("grad_accum", accum, f"{gs} / (micro {m} x {actor} actor GPUs)", KEYS.flag("global_batch"))
        samples = p * (as_int(n) or 1)
        if samples % g == 0:
            c.number(
                "workload.roles.mini_batches",
                samples // g,
                f"{ps} x samples per prompt / {gs}",
                KEYS.flag("rollout_batch"),
            )


# the roles' and engines' counts --train.colocate_all places on the actor's GPUs (asserted equal, {T}:41-63)
COLOCATED = (KEYS.key("ref.num_gpus_per_node"), KEYS.key("ref.num_nodes"), KEYS.key("engines"))


def _role_models(c: Collector, f: dict[str, Flag], kind: str, near) -> bool:
    """The reward and critic models the flags name, looked up offline (a remote reward is noted: its server's memory
    is not on these GPUs); whether a reward model is planned on them."""
    r = "workload.roles."
    reward = KEYS.key("reward_model") in f and KEYS.key("reward_url") not in f
    if KEYS.key("reward_url") in f:
        c.note(f"{f['reward.remote_url'].source} (a remote reward: its server's memory is not on these GPUs)")
    if reward:
        k = f[KEYS.key("reward_model")]
        found = lookup(str(one(k.value)).split(",")[0], near)
        if found is not None:
            c.set(r + "reward_model", found.ref, f"{k.source} ({found.how})", KEYS.flag("reward_model"))
        else:
            reward = False
            c.note(f"{k.source} (not found offline: pass its config.json; planned without the reward model)")
    if kind == "ppo":
        k = f.get(KEYS.key("critic_model")) or f.get(KEYS.key("reward_model"))
        if k is not None:
            found = lookup(str(one(k.value)).split(",")[0], near)
            if found is not None:
                c.set(
                    r + "critic_model",
                    found.ref,
                    f"{k.source} ({found.how}; {T}:644-650)",
                    KEYS.flag("critic_model"),
                )
    return reward


def _placement(c: Collector, f: dict[str, Flag], kind: str, near) -> None:
    """--train.colocate_all: every role on the actor's GPUs; else each role on its own GPUs (_apart)."""
    gpus = {
        role: (as_int(get(f, f"{role}.num_gpus_per_node")[0]) or 8) * (as_int(get(f, f"{role}.num_nodes")[0]) or 1)
        for role in ("actor", "critic", "ref", "reward")
    }
    per_node = as_int(get(f, KEYS.key("actor.num_gpus_per_node"))[0]) or 8
    engines = as_int(f[KEYS.key("engines")].value) if KEYS.key("engines") in f else None
    tp = as_int(get(f, KEYS.key("rollout_tp"))[0]) or 1
    beta = (as_float(get(f, KEYS.key("workload.beta"))[0]) or 0) > 0
    reward = _role_models(c, f, kind, near)
    if not engines:
        c.note(
            "--vllm.num_engines not given: OpenRLHF generates without vLLM, which memplan does not plan (planned with one engine a GPU)"
        )
    if not on(f, KEYS.key("colocate_all")):
        return _apart(c, f, kind, gpus, (engines or gpus["actor"] // tp) * tp, ref=beta, reward=reward)
    per_src, nodes_src = get(f, KEYS.key("actor.num_gpus_per_node"))[1], get(f, KEYS.key("actor.num_nodes"))[1]
    same = [f[k].source for k in COLOCATED if k in f]
    why = f"; {'; '.join(same)} (the actor's GPUs, all roles and engines on them: {T}:41-63)" if same else ""
    c.set("workload.roles.placement", "colocate", f[KEYS.key("colocate_all")].source + why, KEYS.flag("colocate_all"))
    c.number(
        "gpus_per_node",
        min(per_node, gpus["actor"]),
        f"{per_src} (every role on them)",
        KEYS.flag("actor.num_gpus_per_node"),
    )
    c.number("nodes", max(1, gpus["actor"] // per_node), nodes_src, KEYS.flag("actor.num_nodes"))


def _apart(c: Collector, f: dict[str, Flag], kind: str, gpus: dict, rollout: int, ref: bool, reward: bool) -> None:
    """Each role on its own GPUs (`gpus`, the rollout's engines on `rollout`), actor+ref and critic+reward sharing
    where their colocate flags say ({T}:39-142); `ref` and `reward`: whether those roles run."""
    per_node = as_int(get(f, KEYS.key("actor.num_gpus_per_node"))[0]) or 8
    per_src = get(f, KEYS.key("actor.num_gpus_per_node"))[1]
    groups = {"actor": ["actor"]}
    if ref and on(f, KEYS.key("colocate_actor_ref")):
        groups["actor"].append("ref")
    elif ref:
        groups["ref"] = ["ref"]
    if kind == "ppo":
        groups["critic"] = ["critic"]
    if reward and kind == "ppo" and on(f, KEYS.key("colocate_critic_reward")):
        groups["critic"].append("reward")
    elif reward:
        groups["reward"] = ["reward"]
    parts = [f"{'+'.join(roles)}:{gpus[lead]}" for lead, roles in groups.items()]
    parts.append(f"rollout:{rollout}")
    total = sum(int(p.split(":")[1]) for p in parts)
    why = f"{per_src} (each role on its own GPUs, {T}:39-142: {total} in all)"
    c.set("workload.roles.placement", ",".join(parts), why, KEYS.flag("actor.num_gpus_per_node"))
    even = total % per_node == 0
    c.number("gpus_per_node", per_node if even else total, why, KEYS.flag("actor.num_gpus_per_node"))
    c.number("nodes", total // per_node if even else 1, why, KEYS.flag("actor.num_nodes"))


def read_launched(c: Collector, run) -> None:
    """planner.intake's dispatch of `python -m openrlhf.cli.train_ppo_ray`, `train_dpo` or `train_sft`
    (Framework.launched): the release from its flags, then PPO's roles (Ray places them) or DPO's or SFT's one trainer
    on the launcher's GPUs (planner.frameworks.openrlhf.sft); the pre-Ray `train_ppo` every role in every process
    (planner.frameworks.openrlhf.reader_ppo)."""
    flags, _ = parse_flags(run.args, run.command.path)
    refuse_parallel_groups(c, flags)  # every line and fork: AutoTP and ring attention
    lora_targets(c, flags)
    if run.target == "openrlhf.cli.train_ppo":
        world.read(c, run)
        return read_old_ppo(c, flags, run.command.path)
    module = None
    if run.target.endswith("ppo_ray") and is_file(run.command.path):  # the script's other commands: LMM-R1's servers
        module = lmmr1.module_sign(read_script(run.command.path).commands)
    releases.by_flags(c, "openrlhf", run, release_hint(flags, module))  # --bf16 alone: 0.8 and 0.9 each planned
    if run.target.endswith(("train_dpo", "train_sft")):
        world.read(c, run)
        if run.target.endswith("train_sft"):
            return read_sft(c, flags, run.command.path)
        read_dpo(c, flags, run.command.path)
    else:
        read(c, flags, run.command.path)
        release = c.facts.get("release", ("",))[0]
        if release in forks.LINES:  # MM-Eureka's or LMM-R1's own flags (reader_mmeureka)
            forks.read(c, flags, f"{run.where} {run.target}", release)
