"""verl 0.9.1's RL runs (`python3 -m verl.trainer.main_ppo key=value ...`, Hydra overrides over ppo_trainer.yaml): the
estimator and so the roles, the batch split, the rollout engine, the token budgets and what each role offloads, each
with verl's default where the script gives none (paths under verl/trainer/config/ unless said)."""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.verl import reader_media, reader_sft
from planner.frameworks.verl.keys import KEYS, short
from planner.frameworks.verl.reader_megatron import refuse_megatron
from planner.intake import hydra, line_defaults, releases
from planner.intake.collect import GIVEN_FIELDS, Collector, as_bool, as_float, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup, read_model

VERL = "verl 0.9.1"
ESTIMATORS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce++"}


def get(f: dict[str, Flag], key: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    row = KEYS.named(key)  # verl's default and where it is set (planner.frameworks.verl.keys)
    return row.default, default(VERL, row.cite, f"{key} {row.default}")


def read(c: Collector, f: dict[str, Flag], near) -> None:
    """Every setting of a main_ppo run (`f`: its overrides, '+' dropped, by key)."""
    est, src = get(f, KEYS.key("workload.kind"))
    kind = ESTIMATORS.get(str(est))
    if kind is None:
        c.note(f"{src} ({est}: no critic, planned as grpo's roles)")
        kind = "grpo"
    c.set("workload.kind", kind, src, KEYS.key("workload.kind"))
    c.set(
        "precision",
        "bf16",
        default(VERL, "engine/fsdp.yaml:33, transformer_impl.py:391-401", "fp32 weights, bf16 compute"),
        "engine",
    )
    c.set(
        "attention", "flash", default(VERL, "workers/config/model.py:185", "flash_attention_2"), "attn_implementation"
    )
    if KEYS.key("model") in f:
        read_model(c, str(one(f[KEYS.key("model")].value)), f[KEYS.key("model")].source, short(KEYS.key("model")), near)
    _split(c, f)
    _roles(c, f, near)
    _sharding(c, f)
    reader_media.images_of(c, f)


def _split(c: Collector, f: dict[str, Flag]) -> None:
    per_node, s1 = get(f, KEYS.key("gpus_per_node"))
    nodes, s2 = get(f, KEYS.key("nodes"))
    c.number("gpus_per_node", per_node, s1, KEYS.key("gpus_per_node"))
    c.number("nodes", nodes, s2, KEYS.key("nodes"))
    n, ns = get(f, KEYS.key("workload.num_generations"))
    c.number("workload.num_generations", n, ns, short(KEYS.key("workload.num_generations")))
    if as_int(n) == 1 and c.get("workload.kind") == "grpo":  # ROLES.one_sample_groups
        c.note(f"{ns} (one sample a prompt: GRPO's advantage is its raw score, v0.7.0 core_algos.py:312-314; planned)")
    for key, field in (
        (KEYS.key("workload.max_prompt_length"), "max_prompt_length"),
        (KEYS.key("workload.max_completion_length"), "max_completion_length"),
    ):
        v, s = get(f, key)
        c.number(f"workload.{field}", v, s, key)
    epochs, es = get(f, KEYS.key("workload.num_iterations"))
    c.number("workload.num_iterations", epochs, es, short(KEYS.key("workload.num_iterations")))
    mini, ms = get(f, KEYS.key("mini_batch"))
    prompts, ps = get(f, KEYS.key("rollout_batch"))
    n_i, mini_i, prompts_i = as_int(n) or 1, as_int(mini), as_int(prompts)
    sp = ulysses(c, f)
    world = (as_int(c.get("gpus_per_node")) or 0) * (as_int(c.get("nodes")) or 0)  # 0: asked (Reading.unknown_world)
    dp = world // sp  # each Ulysses group of sp ranks shares its rows (workers/engine/fsdp/transformer_impl.py:651-652)
    key = KEYS.key("micro_batch")
    micro = as_int(one(f[key].value)) if key in f else None
    dynamic = as_bool(one(f[KEYS.key("dynamic_batch")].value)) if KEYS.key("dynamic_batch") in f else False
    source = f[key].source if key in f else default(VERL, "actor/actor.yaml:24", key)
    whole = f.get(KEYS.key("global_micro_batch"))
    if micro is None and whole is not None and dp and as_int(one(whole.value)) and not dynamic:
        micro = max(1, as_int(one(whole.value)) // dp)  # v0.7.0 workers/fsdp_workers.py:249-253, floor division
        source = f"{whole.source} / {dp} data-parallel groups (v0.7.0 workers/fsdp_workers.py:249-253)"
        key = KEYS.key("global_micro_batch")
    if micro is None:
        micro = 1
        if dynamic:  # the token budget cuts the micro-batches; one sample is the split's unit
            source = f"{f[KEYS.key('dynamic_batch')].source} (micro-batches cut by tokens)"
        else:
            c.note(f"{key} not given (verl requires it or a token budget): planned at 1 sample")
    c.number("micro_batch", micro, source, key)

    def groups_of(b: dict) -> int:  # a flag's GPUs: the data-parallel groups again from them
        return max(1, (b.get("gpus_per_node") or 1) * (b.get("nodes") or 1) // sp)

    def micro_of(b: dict) -> int:  # the deprecated global micro-batch over those groups, else the files'
        return max(1, as_int(one(whole.value)) // groups_of(b)) if key == KEYS.key("global_micro_batch") else micro

    if key == KEYS.key("global_micro_batch"):
        c.derived["micro_batch"] = (("gpus_per_node", "nodes"), micro_of)
    if mini_i:
        c.derived["grad_accum"] = (
            ("gpus_per_node", "nodes"),
            lambda b: max(1, mini_i * n_i // (groups_of(b) * micro_of(b))),
        )
    if mini_i and dp and mini_i * n_i % (dp * micro) == 0:
        accum = mini_i * n_i // (dp * micro)
        groups = f"{world} GPUs" if sp == 1 else f"{dp} groups of {sp} Ulysses ranks"
        c.number(
            "grad_accum",
            accum,
            f"{ms} x rollout.n {n_i} / ({groups} x micro {micro})",
            short(KEYS.key("mini_batch")),
        )
        if prompts_i and prompts_i % mini_i == 0:
            c.number("workload.roles.mini_batches", prompts_i // mini_i, f"{ps} / {ms}", KEYS.key("rollout_batch"))


def ulysses(c: Collector, f: dict[str, Flag]) -> int:
    """The actor's Ulysses size (its own key or 0.9.1's fsdp_config form), which the old log-probs run at too and the
    reference follows (ref/dp_ref.yaml:39); a reference or critic split of its own is named, not planned. Returned: the
    size the batch is split by, a --sequence-parallel given beside the files (GIVEN_FIELDS) over theirs."""
    engine = f.get(KEYS.key("engine_sequence_parallel"))
    v, src = (one(engine.value), engine.source) if engine is not None else get(f, KEYS.key("sequence_parallel"))
    sp = as_int(v) or 1
    c.number("sequence_parallel", sp, src, short(KEYS.key("sequence_parallel")))
    sp = split_of(c)
    for field, what in (("ref_sequence_parallel", "the reference's"), ("critic_sequence_parallel", "the critic's")):
        own = f.get(KEYS.key(field))
        if own is not None and (as_int(one(own.value)) or 1) != sp:
            c.note(f"{own.source} ({what} own Ulysses size, not the actor's {sp}: not planned; planned at {sp})")
    return sp


def split_of(c: Collector) -> int:
    """The Ulysses size the batch is split by: a --sequence-parallel given beside the files (GIVEN_FIELDS) over
    theirs."""
    return GIVEN_FIELDS.get().get("sequence_parallel", as_int(c.get("sequence_parallel")) or 1)


def _roles(c: Collector, f: dict[str, Flag], near) -> None:
    r = "workload.roles."
    name, s = get(f, KEYS.key("rollout_engine"))
    c.set(r + "rollout_engine", str(name), s, short(KEYS.key("rollout_engine")))
    for field, cast in (("rollout_memory", as_float), ("rollout_tp", as_int)):
        v, s = get(f, KEYS.key(field))
        if cast(v) is not None:
            c.set(r + field, cast(v), s, short(KEYS.key(field)))
    free, s = get(f, KEYS.key("sleep_level"))
    c.set(r + "sleep_level", 2 if as_bool(free) else 0, s, short(KEYS.key("sleep_level")))
    eager, s = get(f, KEYS.key("rollout_eager"))
    c.set(r + "rollout_eager", bool(as_bool(eager)), s, short(KEYS.key("rollout_eager")))
    padding, s = get(f, KEYS.key("remove_padding"))
    c.set(r + "remove_padding", bool(as_bool(padding)), s, short(KEYS.key("remove_padding")))
    ckpt, s = get(f, KEYS.key("checkpointing"))
    c.set("checkpointing", "full" if as_bool(ckpt) else "off", s, short(KEYS.key("checkpointing")))
    _beta(c, f)
    _budgets(c, f)
    _entropy(c, f)
    _fused_kernels(c, f)
    if KEYS.key("critic_model") in f:
        k = KEYS.key("critic_model")
        role_model(c, "critic_model", str(one(f[k].value)), f[k].source, k, near)
    enabled = f.get(KEYS.key("reward_enable"))
    if enabled is not None and as_bool(enabled.value) and KEYS.key("reward_model") in f:
        k = KEYS.key("reward_model")
        role_model(c, "reward_model", str(one(f[k].value)), f[k].source, k, near)
        share = f.get(KEYS.key("reward_memory"))
        if share is not None and as_float(share.value):
            c.set(
                r + "reward_memory",
                as_float(share.value),
                share.source,
                KEYS.key("reward_memory"),
            )
    _offloads(c, f)


# each role's offload key and the part it offloads (keys.py: the critic's under its 0.2 .. 0.7.0 names too, keys.SPANS)
OFFLOADS = (
    ("actor_param_offload", "", "actor-params"),
    ("actor_optimizer_offload", "", "actor-optimizer"),
    ("ref_param_offload", "", "ref"),
    ("critic_param_offload", "", "critic-params"),
    ("critic_optimizer_offload", "", "critic-optimizer"),
    ("critic_param_offload", "0.6", "critic-params"),
    ("critic_optimizer_offload", "0.6", "critic-optimizer"),
)


def _offloads(c: Collector, f: dict[str, Flag]) -> None:
    """What each role keeps on the host between phases (workload.roles.offload): every key of OFFLOADS set true."""
    on = {
        KEYS.key(field, line): part for field, line, part in OFFLOADS if as_bool(flag_value(f, KEYS.key(field, line)))
    }
    if on:
        c.set(
            "workload.roles.offload",
            tuple(sorted(set(on.values()))),
            "; ".join(f[k].source for k in on),
            "param_offload",
        )


def flag_value(f: dict[str, Flag], key: str) -> object:
    return one(f[key].value) if key in f else None


def role_model(c: Collector, field: str, name: str, source: str, key: str, near) -> None:
    """The critic's or reward model's config, found offline as the actor's is; else a note, and the actor's model
    (critic) or none (reward model) is planned."""
    found = lookup(name, near)
    if found is None:
        c.note(f"{source} ({name} not found offline: pass its config.json; planned without it)")
        return
    c.set(f"workload.roles.{field}", found.ref, f"{source} ({found.how})", key)


def _beta(c: Collector, f: dict[str, Flag]) -> None:
    loss, ls = get(f, KEYS.key("kl_loss"))
    reward, rs = get(f, KEYS.key("kl_in_reward"))
    if as_bool(loss):
        coef, s = get(f, KEYS.key("kl_loss_coef"))
        kl = f.get(KEYS.key("kl_coef"))
        moot = f"; {kl.source} (unused: no KL in the reward)" if kl is not None and not as_bool(reward) else ""
        c.set("workload.beta", as_float(coef) or 0.001, f"{ls}; {s}{moot}", short(KEYS.key("kl_loss_coef")))
    elif as_bool(reward):
        coef, s = get(f, KEYS.key("kl_coef"))
        c.set("workload.beta", as_float(coef) or 0.001, f"{rs}; {s}", KEYS.key("kl_coef"))
    else:
        moot = [f[k].source for k in (KEYS.key("kl_loss_coef"), KEYS.key("kl_coef")) if k in f]
        why = f"; {'; '.join(moot)} (unused: no KL term)" if moot else ""
        c.set("workload.beta", 0.0, f"{ls}; {rs} (no reference model){why}", short(KEYS.key("kl_loss")))


def _budgets(c: Collector, f: dict[str, Flag]) -> None:
    r = "workload.roles."
    dynamic, ds = get(f, KEYS.key("dynamic_batch"))
    if as_bool(dynamic):
        v, s = get(f, KEYS.key("max_tokens_per_gpu"))
        c.number(r + "max_tokens_per_gpu", v, f"{ds}; {s}", short(KEYS.key("max_tokens_per_gpu")))
        key = KEYS.key("logprob_max_tokens_per_gpu")
        lp = f.get(key, None)
        c.number(
            r + "logprob_max_tokens_per_gpu",
            lp.value if lp else v,
            lp.source if lp else f"{s} (log_prob_max_token_len_per_gpu follows it, rollout/rollout.yaml:117)",
            key,
        )
        _ref_budget(c, f, as_int(v))
    _logprob_micro_batches(c, f, bool(as_bool(dynamic)))
    v, s = get(f, KEYS.key("critic_max_tokens_per_gpu"))
    c.number(r + "critic_max_tokens_per_gpu", v, s, KEYS.key("critic_max_tokens_per_gpu"))
    for key in (KEYS.key("critic_max_tokens"), KEYS.key("critic_micro_batch"), KEYS.key("critic_dynamic_batch")):
        if key in f:
            c.note(
                f"{f[key].source} (not applied by verl 0.9.1's default trainer: it cuts the critic's micro-batches by "
                "critic.ppo_infer_max_token_len_per_gpu, trainer/ppo/v1/trainer_base.py:267-268)"
            )


def _logprob_micro_batches(c: Collector, f: dict[str, Flag], dynamic: bool) -> None:
    """The old log-probs' and the reference's micro-batches, each its own key beside the update's (v0.7.0
    workers/fsdp_workers.py:1014, :1054 -> workers/actor/dp_actor.py:357,370): verl requires both without a token
    budget (utils/config.py:156-168); one not given is planned at the actor's micro-batch. Under use_dynamic_bsz the
    passes are cut by tokens (dp_actor.py:366-368; log_prob_use_dynamic_bsz follows the actor's, rollout.yaml:91)."""
    world = (as_int(c.get("gpus_per_node")) or 0) * (as_int(c.get("nodes")) or 0)
    for field in ("logprob_micro_batch", "ref_logprob_micro_batch"):
        key, whole = KEYS.key(field), KEYS.key(field.replace("micro", "global_micro"))
        given = f.get(key) or f.get(whole)
        if given is not None and dynamic:
            c.note(f"{given.source} (unused under use_dynamic_bsz, the passes cut by tokens: not planned)")
        elif key in f:
            c.number(f"workload.roles.{field}", one(f[key].value), f[key].source, short(key))
        elif given is not None and world and as_int(one(given.value)):  # over the data-parallel groups
            dp = world // split_of(c)
            rows = as_int(one(given.value)) // dp  # fsdp_workers.py:266-274, floor division (0: not read)
            c.number(f"workload.roles.{field}", rows, f"{given.source} / {dp} data-parallel groups", short(whole))
        elif given is not None:
            c.note(f"{given.source} (a global micro-batch over GPUs not known: not planned)")


def _ref_budget(c: Collector, f: dict[str, Flag], actor_budget: int | None) -> None:
    """The reference's own token budget (ref.log_prob_max_token_len_per_gpu, following the actor's, ref/ref.yaml:24;
    its pass cut by it: workers/actor/dp_actor.py:366-368): read where it is not the old log-probs'."""
    key = KEYS.key("ref_logprob_max_tokens_per_gpu")
    given, planned = f.get(key), c.get("workload.roles.logprob_max_tokens_per_gpu")
    budget, source = (
        (as_int(one(given.value)), given.source)
        if given
        else (actor_budget, f"{key} (follows the actor's, ref/ref.yaml:24)")
    )
    if budget != planned:
        c.number("workload.roles.ref_logprob_max_tokens_per_gpu", budget, source, short(key))


def _entropy(c: Collector, f: dict[str, Flag]) -> None:
    coef, s = get(f, KEYS.key("entropy"))
    ckpt, cs = get(f, KEYS.key("entropy_checkpointing"))
    calc = f.get(KEYS.key("calculate_entropy"))
    on = (as_float(coef) or 0) != 0 or bool(calc is not None and as_bool(one(calc.value)))
    value = ("checkpointed" if as_bool(ckpt) else "on") if on else "off"
    c.set("workload.roles.entropy", value, f"{s}; {cs}", short(KEYS.key("entropy")))


def _fused_kernels(c: Collector, f: dict[str, Flag]) -> None:
    """model.use_fused_kernels (default False, v0.7.0 trainer/config/model/hf_model.yaml:61): the actor and the
    reference return the log-probs and entropy from FusedLinearForPPO, 512 tokens of logits at a time (workers/
    fsdp_workers.py:787-879, workers/actor/dp_actor.py:194-209, models/transformers/qwen2_vl.py:490, utils/experimental/
    torch_functional.py:75-193): planned (planner.estimate.role_heads.fused_*). Its other backends (triton: verl's
    linear_cross_entropy kernel; liger in 0.9.1) are named and planned as the torch one."""
    on, s = get(f, KEYS.key("workload.roles.fused_kernels"))
    c.set("workload.roles.fused_kernels", bool(as_bool(on)), s, short(KEYS.key("workload.roles.fused_kernels")))
    backend = f.get(KEYS.key("fused_backend"))
    if as_bool(on) and backend is not None and str(one(backend.value)).strip("'\"") != "torch":
        c.note(f"{backend.source} (planned as the torch backend's 512-token chunks: the other kernels not measured)")


def _sharding(c: Collector, f: dict[str, Flag]) -> None:
    reshard = f.get(KEYS.key("fsdp"))
    grad_op = reshard is not None and as_bool(reshard.value) is False
    c.set(
        "fsdp",
        "grad-op" if grad_op else "full",
        reshard.source if reshard else default(VERL, "engine/fsdp.yaml:23", "reshard_after_forward true"),
        short(KEYS.key("strategy")),
    )
    c.set("zero_stage", 0, default(VERL, "workers/config/engine.py:306", "FSDP only"), short(KEYS.key("strategy")))
    policy = f.get(KEYS.key("offload"))
    if policy is not None and as_bool(policy.value):
        c.set("offload", "optimizer+params", policy.source, "offload_policy")
    # the critic's offload_policy (written as the actor's: writer_rl.py); memplan plans one --offload for both
    critic = [f[k] for k in dict.fromkeys(KEYS.key("critic_offload", line) for line in ("", "0.6")) if k in f]
    actor = bool(policy is not None and as_bool(policy.value))
    for flag in critic:
        if bool(as_bool(flag.value)) != actor:
            c.note(f"{flag.source} (planned as the actor's offload_policy: memplan plans one --offload for both)")
    lora = f.get(KEYS.key("lora_rank"))
    if lora is not None and (as_int(lora.value) or 0) > 0:
        c.number("lora_rank", lora.value, lora.source, short(KEYS.key("lora_rank")))


def read_launched(c: Collector, run) -> None:
    """planner.intake's dispatch of `python -m verl.trainer.main_ppo` (Framework.launched): the user's own Hydra config
    (--config-path/--config-name) under the command line's overrides (`+key=value` too); its SFT trainers' runs
    (reader_sft.MODULES) to reader_sft, its Megatron engine refused (reader_megatron.py)."""
    if run.target in reader_sft.MODULES:
        return reader_sft.read_launched(c, run)
    over = {k.lstrip("+"): v for k, v in hydra.overrides(run.args, run.command.path, plus=True).items()}
    base = hydra.config(c, run, "verl's ppo_trainer.yaml defaults read")
    flags = base | over
    refuse_megatron(flags, run)
    lines = releases.taking("verl", "ppo", flags)  # keys only 0.7 takes (keys.SPANS); else each line planned
    releases.by_flags(c, "verl", run, (lines[0][-1], lines[1], lines[0]) if lines else None)  # a pin first
    read(c, line_defaults.with_defaults(c, "verl", KEYS, flags), run.command.path)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a verl trainer config read alone (Framework.reads: a Hydra config over
    ppo_trainer.yaml, examples/split_placement/config/ppo_trainer_split.yaml): its keys flat, as main_ppo reads them."""
    f: dict[str, Flag] = {}
    hydra.flatten(data, "", path, f)
    if isinstance(data.get("defaults"), list):
        f["defaults"] = Flag("defaults", data["defaults"], f"{path.name}: defaults: {data['defaults']}", "defaults")
    f |= {k.lstrip("+"): v for k, v in flags.items()}
    refuse_megatron(f)
    lines = releases.taking("verl", "ppo", f)
    releases.by_flags_in(c, "verl", [path.parent.resolve()], (lines[0][-1], lines[1], lines[0]) if lines else None)
    read(c, line_defaults.with_defaults(c, "verl", KEYS, f), path)
