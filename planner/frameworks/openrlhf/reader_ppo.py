"""OpenRLHF's DeepSpeed-only PPO of before Ray (`deepspeed --module openrlhf.cli.train_ppo`, v0.6.1 and before; gone
at v0.6.2): every process holds the actor and critic (trained by DeepSpeed ZeRO), the initial model (the reference)
and the reward model, and samples with the actor's own HF generate, read as a role run with every role colocated and
rollout engine hf (planner.config.roles). Cited from v0.5.7 cli/train_ppo.py (github.com/OpenRLHF/OpenRLHF; v0.6.1's
has the same flags and defaults, 3 lines lower):
- actor :23-33 (ds train config), critic :38-53 (a value head model of --critic_pretrain, which defaults to
  --reward_pretrain, else --pretrain: :422-428), reward model :57-69 unless --remote_rm_url, initial model :82-88
  (ds eval config: ZeRO-3 when training with it, else whole: utils/deepspeed/deepspeed.py:261-263), all prepared
  together (:200-210);
- generation: actor.generate (models/actor.py:147, HF generate) over --micro_rollout_batch_size prompts at a time
  (trainer/ppo_utils/experience_maker.py:251-254), then the actor's, initial model's, critic's and reward model's
  forwards over those rows (:286-304); under ZeRO-3 the DeepSpeed engine fetches layer by layer (no whole gather).
The GPUs are the deepspeed launcher's (read before this)."""

from __future__ import annotations

from planner.config.roles import ACTOR
from planner.frameworks.openrlhf.reader_flags import on, split_batch, zero_buckets
from planner.intake.collect import Collector, as_float, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup, read_model

PPO = "v0.5.7 cli/train_ppo.py"
OLD = "openrlhf 0.5.7"
# flag -> (default, v0.5.7 line)
DEFAULTS = {
    "rollout_batch_size": (512, 302),
    "micro_rollout_batch_size": (8, 303),
    "prompt_max_len": (1024, 305),
    "generate_max_len": (1024, 306),
    "micro_train_batch_size": (4, 316),
    "train_batch_size": (128, 317),
    "n_samples_per_prompt": (1, 323),
    "init_kl_coef": (0.01, 330),
    "zero_stage": (2, 346),
    "advantage_estimator": ("gae", 362),
    "max_epochs": (1, 304),  # passes over each experience batch (trainer/ppo_trainer.py:277)
}
ESTIMATORS = {"gae": "ppo", "reinforce": "reinforce++", "rloo": "rloo"}  # :364 choices


def val(f: dict[str, Flag], key: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    value, line = DEFAULTS[key]
    return value, default(OLD, f"{PPO}:{line}", f"--{key} {value}")


def read_old_ppo(c: Collector, f: dict[str, Flag], near) -> None:
    """train_ppo's fields: the policy's recipe, the batch split over the launcher's GPUs, every role colocated."""
    r = "workload.roles."
    est, es = val(f, "advantage_estimator")
    kind = ESTIMATORS.get(str(est), "ppo")
    c.set("workload.kind", kind, es, "--advantage_estimator")
    coef, cs = val(f, "init_kl_coef")
    c.set(
        "workload.beta",
        as_float(coef) or 0.0,
        f"{cs} (the initial model is loaded whatever it is: :82-88)",
        "--init_kl_coef",
    )
    if "pretrain" in f:
        read_model(c, str(one(f["pretrain"].value)), f["pretrain"].source, "--pretrain", near)
    _recipe(c, f)
    _split(c, f)
    why = f"{PPO}:200-210 (actor, critic, reward and initial model prepared in every process; HF generate, :257)"
    c.set(r + "placement", "colocate", default(OLD, why, "every role in every process"), "openrlhf.cli.train_ppo")
    c.set(
        r + "rollout_engine", "hf", default(OLD, "models/actor.py:147", "the actor's HF generate"), "--generate_max_len"
    )
    c.set(r + "remove_padding", on(f, "packing_samples"), default(OLD, PPO, "padded rows"), "--packing_samples")
    _models(c, f, kind, near)


def _recipe(c: Collector, f: dict[str, Flag]) -> None:
    bf16 = "bf16" in f
    c.set(
        "precision",
        "bf16" if bf16 else "fp32",
        f["bf16"].source if bf16 else default(OLD, f"{PPO}:348", "fp32"),
        "--bf16",
    )
    stage, ss = val(f, "zero_stage")
    c.number("zero_stage", stage, ss, "--zero_stage", minimum=0)
    zero_buckets(c, f, as_int(stage) or 0)
    c.set("fsdp", "off", default(OLD, PPO, "DeepSpeed only"), "--zero_stage")
    if on(f, "adam_offload"):
        c.set("offload", "optimizer", f["adam_offload"].source, "--adam_offload")
    ckpt = on(f, "gradient_checkpointing")
    off = default(OLD, f"{PPO}:347", "no checkpointing")
    c.set(
        "checkpointing",
        "full" if ckpt else "off",
        f["gradient_checkpointing"].source if ckpt else off,
        "--gradient_checkpointing",
    )
    flash = on(f, "flash_attn")  # models/actor.py:53 eager without it
    c.set(
        "attention",
        "flash" if flash else "eager",
        f["flash_attn"].source if flash else default(OLD, "models/actor.py:53", "eager"),
        "--flash_attn",
    )
    if "lora_rank" in f and (as_int(one(f["lora_rank"].value)) or 0) > 0:
        c.number("lora_rank", one(f["lora_rank"].value), f["lora_rank"].source, "--lora_rank")
    if on(f, "load_in_4bit"):
        c.set("quant", "nf4", f["load_in_4bit"].source, "--load_in_4bit")
    for key in ("enable_ema", "pretrain_data"):
        if key in f:
            c.note(f"{f[key].source} (--{key}: its extra model or PTX batch is not planned)")


def _split(c: Collector, f: dict[str, Flag]) -> None:
    r = "workload.roles."
    prompt, ps = val(f, "prompt_max_len")
    new, ns = val(f, "generate_max_len")
    c.number("workload.max_prompt_length", prompt, ps, "--prompt_max_len")
    c.number("workload.max_completion_length", new, ns, "--generate_max_len")
    n, nsrc = val(f, "n_samples_per_prompt")
    c.number("workload.num_generations", n, nsrc, "--n_samples_per_prompt")
    epochs, es = val(f, "max_epochs")
    c.number("workload.num_iterations", epochs, es, "--max_epochs")
    micro, ms = val(f, "micro_train_batch_size")
    c.number("micro_batch", micro, ms, "--micro_train_batch_size")
    gen, gs = val(f, "micro_rollout_batch_size")
    c.number(r + "generate_batch", gen, f"{gs} (experience_maker.py:251-254)", "--micro_rollout_batch_size")
    rows = as_int(gen) or 8
    c.number(
        r + "logprob_max_tokens_per_gpu",
        rows * ((as_int(prompt) or 1024) + (as_int(new) or 1024)),
        f"{gs} x (prompt + completion) (the experience passes' rows, experience_maker.py:286-304)",
        "--micro_rollout_batch_size",
    )
    batch, bs = val(f, "train_batch_size")
    prompts, rs = val(f, "rollout_batch_size")
    m, g, p = as_int(micro) or 4, as_int(batch) or 128, as_int(prompts) or 512
    if split_batch(c, m, g, bs, "--train_batch_size") and (p * (as_int(n) or 1)) % g == 0:
        c.number(
            r + "mini_batches",
            p * (as_int(n) or 1) // g,
            f"{rs} x samples per prompt / {bs}",
            "--rollout_batch_size",
        )


def _models(c: Collector, f: dict[str, Flag], kind: str, near) -> None:
    """The reward model (unless --remote_rm_url) and the critic (--critic_pretrain, else the reward model's, :422-428);
    one not found offline is planned with the actor's shapes, said."""
    r = "workload.roles."
    if "remote_rm_url" in f:
        c.note(f"{f['remote_rm_url'].source} (a remote reward: its server's memory is not on these GPUs)")
    elif "reward_pretrain" in f:
        _role_model(c, f["reward_pretrain"], r + "reward_model", "--reward_pretrain", near)
    if kind != "ppo":
        return
    k = f.get("critic_pretrain") or (f.get("reward_pretrain") if "remote_rm_url" not in f else None)
    if k is not None:
        _role_model(c, k, r + "critic_model", "--critic_pretrain", near)


def _role_model(c: Collector, k: Flag, field: str, key: str, near) -> None:
    found = lookup(str(one(k.value)), near)
    if found is not None:
        c.set(field, found.ref, f"{k.source} ({found.how})", key)
        return
    c.set(field, ACTOR, f"{k.source} (not found offline: planned with the actor's shapes; pass its config.json)", key)
