"""verl 0.9.1's RL runs (`python3 -m verl.trainer.main_ppo key=value ...`, Hydra overrides over ppo_trainer.yaml): the
estimator and so the roles, the batch split, the rollout engine, the token budgets and what each role offloads, each
with verl's default where the script gives none (paths under verl/trainer/config/ unless said)."""

from __future__ import annotations

from planner.intake.collect import Collector, as_bool, as_float, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup, read_model

VERL = "verl 0.9.1"
A = "actor_rollout_ref."
ESTIMATORS = {"gae": "ppo", "grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce++"}
# key -> (verl's default, where it is set)
DEFAULTS = {
    "algorithm.adv_estimator": ("gae", "ppo_trainer.yaml:78"),
    "data.train_batch_size": (1024, "data/legacy_data.yaml:42"),
    "data.max_prompt_length": (512, "data/legacy_data.yaml:35"),
    "data.max_response_length": (512, "data/legacy_data.yaml:39"),
    A + "rollout.n": (1, "rollout/rollout.yaml:127"),
    A + "actor.ppo_mini_batch_size": (256, "actor/actor.yaml:18"),
    A + "actor.ppo_epochs": (1, "actor/actor.yaml:119"),
    A + "actor.use_dynamic_bsz": (False, "actor/actor.yaml:28"),
    A + "actor.ppo_max_token_len_per_gpu": (16384, "actor/actor.yaml:33"),
    A + "actor.use_kl_loss": (False, "actor/actor.yaml:103"),
    A + "actor.kl_loss_coef": (0.001, "actor/actor.yaml:113"),
    A + "actor.entropy_coeff": (0, "actor/actor.yaml:93"),
    A + "actor.entropy_checkpointing": (False, "actor/dp_actor.yaml:43"),
    A + "model.enable_gradient_checkpointing": (True, "model/hf_model.yaml:34"),
    A + "model.use_remove_padding": (True, "model/hf_model.yaml:40"),
    A + "rollout.name": ("vllm", "rollout/rollout.yaml:5 (required; vllm assumed)"),
    A + "rollout.gpu_memory_utilization": (0.5, "rollout/rollout.yaml:46"),
    A + "rollout.tensor_model_parallel_size": (2, "rollout/rollout.yaml:64"),
    A + "rollout.free_cache_engine": (True, "rollout/rollout.yaml:61"),
    A + "rollout.enforce_eager": (False, "rollout/rollout.yaml:52"),
    "algorithm.use_kl_in_reward": (False, "ppo_trainer.yaml:102"),
    "algorithm.kl_ctrl.kl_coef": (0.001, "ppo_trainer.yaml:117"),
    "critic.ppo_infer_max_token_len_per_gpu": (32768, "workers/config/critic.py:89, the v1 trainer's critic budget"),
    "trainer.n_gpus_per_node": (8, "ppo_trainer.yaml:171"),
    "trainer.nnodes": (1, "ppo_trainer.yaml:168"),
}


def get(f: dict[str, Flag], key: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    value, cite = DEFAULTS[key]
    return value, default(VERL, cite, f"{key} {value}")


def read(c: Collector, f: dict[str, Flag], near) -> None:
    """Every setting of a main_ppo run (`f`: its overrides, '+' dropped, by key)."""
    est, src = get(f, "algorithm.adv_estimator")
    kind = ESTIMATORS.get(str(est))
    if kind is None:
        c.note(f"{src} ({est}: no critic, planned as grpo's roles)")
        kind = "grpo"
    c.set("workload.kind", kind, src, "algorithm.adv_estimator")
    c.set(
        "precision",
        "bf16",
        default(VERL, "engine/fsdp.yaml:33, transformer_impl.py:391-401", "fp32 weights, bf16 compute"),
        "engine",
    )
    c.set(
        "attention", "flash", default(VERL, "workers/config/model.py:185", "flash_attention_2"), "attn_implementation"
    )
    if A + "model.path" in f:
        read_model(c, str(one(f[A + "model.path"].value)), f[A + "model.path"].source, "model.path", near)
    _split(c, f)
    _roles(c, f, near)
    _sharding(c, f)


def _split(c: Collector, f: dict[str, Flag]) -> None:
    per_node, s1 = get(f, "trainer.n_gpus_per_node")
    nodes, s2 = get(f, "trainer.nnodes")
    c.number("gpus_per_node", per_node, s1, "trainer.n_gpus_per_node")
    c.number("nodes", nodes, s2, "trainer.nnodes")
    n, ns = get(f, A + "rollout.n")
    c.number("workload.num_generations", n, ns, "rollout.n")
    for key, field in (
        ("data.max_prompt_length", "max_prompt_length"),
        ("data.max_response_length", "max_completion_length"),
    ):
        v, s = get(f, key)
        c.number(f"workload.{field}", v, s, key)
    epochs, es = get(f, A + "actor.ppo_epochs")
    c.number("workload.num_iterations", epochs, es, "actor.ppo_epochs")
    mini, ms = get(f, A + "actor.ppo_mini_batch_size")
    prompts, ps = get(f, "data.train_batch_size")
    n_i, mini_i, prompts_i = as_int(n) or 1, as_int(mini), as_int(prompts)
    world = (as_int(per_node) or 1) * (as_int(nodes) or 1)
    key = A + "actor.ppo_micro_batch_size_per_gpu"
    micro = as_int(one(f[key].value)) if key in f else None
    dynamic = as_bool(one(f[A + "actor.use_dynamic_bsz"].value)) if A + "actor.use_dynamic_bsz" in f else False
    source = f[key].source if key in f else default(VERL, "actor/actor.yaml:24", key)
    if micro is None:
        micro = 1
        if dynamic:  # the token budget cuts the micro-batches; one sample is the split's unit
            source = f"{f[A + 'actor.use_dynamic_bsz'].source} (micro-batches cut by tokens)"
        else:
            c.note(f"{key} not given (verl requires it or a token budget): planned at 1 sample")
    c.number("micro_batch", micro, source, key)
    if mini_i and world and mini_i * n_i % (world * micro) == 0:
        accum = mini_i * n_i // (world * micro)
        c.number(
            "grad_accum", accum, f"{ms} x rollout.n {n_i} / ({world} GPUs x micro {micro})", "actor.ppo_mini_batch_size"
        )
        if prompts_i and prompts_i % mini_i == 0:
            c.number("workload.roles.mini_batches", prompts_i // mini_i, f"{ps} / {ms}", "data.train_batch_size")


def _roles(c: Collector, f: dict[str, Flag], near) -> None:
    r = "workload.roles."
    name, s = get(f, A + "rollout.name")
    c.set(r + "rollout_engine", str(name), s, "rollout.name")
    for key, field, cast in (
        ("rollout.gpu_memory_utilization", "rollout_memory", as_float),
        ("rollout.tensor_model_parallel_size", "rollout_tp", as_int),
    ):
        v, s = get(f, A + key)
        if cast(v) is not None:
            c.set(r + field, cast(v), s, key)
    free, s = get(f, A + "rollout.free_cache_engine")
    c.set(r + "sleep_level", 2 if as_bool(free) else 0, s, "rollout.free_cache_engine")
    eager, s = get(f, A + "rollout.enforce_eager")
    c.set(r + "rollout_eager", bool(as_bool(eager)), s, "rollout.enforce_eager")
    padding, s = get(f, A + "model.use_remove_padding")
    c.set(r + "remove_padding", bool(as_bool(padding)), s, "model.use_remove_padding")
    ckpt, s = get(f, A + "model.enable_gradient_checkpointing")
    c.set("checkpointing", "full" if as_bool(ckpt) else "off", s, "model.enable_gradient_checkpointing")
    _beta(c, f)
    _budgets(c, f)
    _entropy(c, f)
    if "critic.model.path" in f:
        k = "critic.model.path"
        role_model(c, "critic_model", str(one(f[k].value)), f[k].source, k, near)
    enabled = f.get("reward.reward_model.enable")
    if enabled is not None and as_bool(enabled.value) and "reward.reward_model.model_path" in f:
        k = "reward.reward_model.model_path"
        role_model(c, "reward_model", str(one(f[k].value)), f[k].source, k, near)
        share = f.get("reward.reward_model.rollout.gpu_memory_utilization")
        if share is not None and as_float(share.value):
            c.set(
                r + "reward_memory",
                as_float(share.value),
                share.source,
                "reward.reward_model.rollout.gpu_memory_utilization",
            )
    offloads = [
        o
        for key, o in (
            (A + "actor.fsdp_config.param_offload", "actor-params"),
            (A + "actor.fsdp_config.optimizer_offload", "actor-optimizer"),
            ("critic.fsdp.param_offload", "critic-params"),
            ("critic.fsdp.optimizer_offload", "critic-optimizer"),
        )
        if key in f and as_bool(f[key].value)
    ]
    if offloads:
        c.set(
            r + "offload",
            tuple(offloads),
            "; ".join(f[k].source for k in f if k.endswith("_offload") and as_bool(f[k].value)),
            "param_offload",
        )


def role_model(c: Collector, field: str, name: str, source: str, key: str, near) -> None:
    """The critic's or reward model's config, found offline as the actor's is; else a note, and the actor's model
    (critic) or none (reward model) is planned."""
    found = lookup(name, near)
    if found is None:
        c.note(f"{source} ({name} not found offline: pass its config.json; planned without it)")
        return
    c.set(f"workload.roles.{field}", found.ref, f"{source} ({found.how})", key)


def _beta(c: Collector, f: dict[str, Flag]) -> None:
    loss, ls = get(f, A + "actor.use_kl_loss")
    reward, rs = get(f, "algorithm.use_kl_in_reward")
    if as_bool(loss):
        coef, s = get(f, A + "actor.kl_loss_coef")
        c.set("workload.beta", as_float(coef) or 0.001, f"{ls}; {s}", "actor.kl_loss_coef")
    elif as_bool(reward):
        coef, s = get(f, "algorithm.kl_ctrl.kl_coef")
        c.set("workload.beta", as_float(coef) or 0.001, f"{rs}; {s}", "algorithm.kl_ctrl.kl_coef")
    else:
        moot = [f[k].source for k in (A + "actor.kl_loss_coef", "algorithm.kl_ctrl.kl_coef") if k in f]
        why = f"; {'; '.join(moot)} (unused: no KL term)" if moot else ""
        c.set("workload.beta", 0.0, f"{ls}; {rs} (no reference model){why}", "actor.use_kl_loss")


def _budgets(c: Collector, f: dict[str, Flag]) -> None:
    r = "workload.roles."
    dynamic, ds = get(f, A + "actor.use_dynamic_bsz")
    if as_bool(dynamic):
        v, s = get(f, A + "actor.ppo_max_token_len_per_gpu")
        c.number(r + "max_tokens_per_gpu", v, f"{ds}; {s}", "actor.ppo_max_token_len_per_gpu")
        key = A + "rollout.log_prob_max_token_len_per_gpu"
        lp = f.get(key, None)
        c.number(
            r + "logprob_max_tokens_per_gpu",
            lp.value if lp else v,
            lp.source if lp else f"{s} (log_prob_max_token_len_per_gpu follows it, rollout/rollout.yaml:117)",
            key,
        )
    v, s = get(f, "critic.ppo_infer_max_token_len_per_gpu")
    c.number(r + "critic_max_tokens_per_gpu", v, s, "critic.ppo_infer_max_token_len_per_gpu")
    for key in ("critic.ppo_max_token_len_per_gpu", "critic.ppo_micro_batch_size_per_gpu", "critic.use_dynamic_bsz"):
        if key in f:
            c.note(
                f"{f[key].source} (not applied by verl 0.9.1's default trainer: it cuts the critic's micro-batches by "
                "critic.ppo_infer_max_token_len_per_gpu, trainer/ppo/v1/trainer_base.py:267-268)"
            )


def _entropy(c: Collector, f: dict[str, Flag]) -> None:
    coef, s = get(f, A + "actor.entropy_coeff")
    ckpt, cs = get(f, A + "actor.entropy_checkpointing")
    calc = f.get(A + "actor.calculate_entropy")
    on = (as_float(coef) or 0) != 0 or bool(calc is not None and as_bool(one(calc.value)))
    value = ("checkpointed" if as_bool(ckpt) else "on") if on else "off"
    c.set("workload.roles.entropy", value, f"{s}; {cs}", "actor.entropy_coeff")


def _sharding(c: Collector, f: dict[str, Flag]) -> None:
    reshard = f.get(A + "actor.fsdp_config.reshard_after_forward")
    grad_op = reshard is not None and as_bool(reshard.value) is False
    c.set(
        "fsdp",
        "grad-op" if grad_op else "full",
        reshard.source if reshard else default(VERL, "engine/fsdp.yaml:23", "reshard_after_forward true"),
        "actor.strategy",
    )
    c.set("zero_stage", 0, default(VERL, "workers/config/engine.py:306", "FSDP only"), "actor.strategy")
    policy = f.get(A + "actor.fsdp_config.offload_policy")
    if policy is not None and as_bool(policy.value):
        c.set("offload", "optimizer+params", policy.source, "offload_policy")
    lora = f.get(A + "model.lora_rank")
    if lora is not None and (as_int(lora.value) or 0) > 0:
        c.number("lora_rank", lora.value, lora.source, "model.lora_rank")
