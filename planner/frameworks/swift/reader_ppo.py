"""ms-swift 4.6.0's `swift rlhf --rlhf_type ppo` read as a role run with every role in every process and the policy's
own HF generate (planner.config.roles: placement colocate, rollout engine hf). Cited in the 4.6.0 wheel and the
trl 0.29.1 it runs (trl/experimental/ppo/ppo_trainer.py):
- the policy and the value model, trained together (PolicyAndValueWrapper, ppo_trainer.py:284-297, one optimizer);
  the value model is --reward_model's checkpoint again (swift/pipelines/train/rlhf.py:126-134), prepared with the
  run's tuner (:113);
- the reward model, frozen (:111); the reference: a copy of the model for full training (swift/arguments/
  rlhf_args.py:294-295), none under LoRA (the adapter disabled: ppo_trainer.py:434);
- generation: unwrap_model_for_generation over policy and value model (:679-684; under ZeRO-3 every parameter
  gathered), local_rollout_forward_batch_size rows at a time (rlhf_args.py:124, default 64), each step's fp32 scores
  kept for the rank's batch (:110-119);
- no activation checkpointing whatever --gradient_checkpointing says: ms-swift's PPOTrainer makes
  _prepare_gradient_checkpointing a no-op (swift/rlhf_trainers/ppo_trainer.py:107-112), and TRL's train() (:600) is
  its own loop, never transformers' Trainer.train that enables it (transformers 5.19 trainer.py:1503-1514);
- kl_coef (:116, 0.05), num_ppo_epochs (:114, 4), max_completion_length (:242, 512; response_length and
  max_new_tokens are its older names, :472-473);
- num_mini_batches (:123, 1) splits the rank's batch (micro x accumulation rows, one generation) into mini-batches
  (ppo_trainer.py:455, 461-463), each grad_accum / num_mini_batches micro-steps (:801-805) whose tensors are
  deleted at its end (:869): planned as roles.mini_batches of that many micro-steps (the generation batch is their
  product, planner.config.workload.steps_per_gen)."""

from __future__ import annotations

from planner.config.roles import ACTOR
from planner.intake.collect import SWIFT, Collector, as_float, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup

A = "swift/arguments/rlhf_args.py"
# the source of PPO's checkpointing (read by the caller, swift/reader.py _training)
NO_CHECKPOINTING = default(
    SWIFT, "swift/rlhf_trainers/ppo_trainer.py:107-112", "PPO prepares no gradient checkpointing"
)


def value(f: dict[str, Flag], key: str, fallback: object, line: str) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    return fallback, default(SWIFT, f"{A}:{line}", f"--{key} {fallback}")


def read_ppo(c: Collector, f: dict[str, Flag], near) -> None:
    """PPO's inputs and roles; the caller read the prompt's limit (--max_length) and the policy's recipe."""
    r = "workload.roles."
    c.set(
        "workload.num_generations",
        1,
        default(SWIFT, "trl ppo_trainer.py:686-692", "one response a prompt"),
        "--rlhf_type",
    )
    coef, cs = value(f, "kl_coef", 0.05, "116")
    c.set("workload.beta", as_float(coef) or 0.0, cs, "--kl_coef")
    epochs, es = value(f, "num_ppo_epochs", 4, "114")
    c.number("workload.num_iterations", epochs, es, "--num_ppo_epochs")
    key = next(
        (k for k in ("response_length", "max_new_tokens", "max_completion_length") if k in f), "max_completion_length"
    )
    new, ns = value(f, key, 512, "242")
    c.number("workload.max_completion_length", new, ns, f"--{key}", minimum=1)
    _mini_batches(c, f)
    rows, rs = value(f, "local_rollout_forward_batch_size", 64, "124")
    c.number(r + "generate_batch", rows, rs, "--local_rollout_forward_batch_size")
    why = "swift/pipelines/train/rlhf.py:126-134 (policy, value, reference and reward model in every process)"
    c.set(r + "placement", "colocate", default(SWIFT, why, "every role in every process"), "--rlhf_type")
    c.set(
        r + "rollout_engine",
        "hf",
        default(SWIFT, "trl ppo_trainer.py:679-692", "the policy's HF generate"),
        "--rlhf_type",
    )
    if "reward_model" not in f:
        c.note("--rlhf_type ppo without --reward_model: ms-swift needs one (the value model is its checkpoint)")
        return
    k = f["reward_model"]
    found = lookup(str(one(k.value)), near)
    name, how = (found.ref, found.how) if found else (ACTOR, "not found offline: planned with the policy's shapes")
    for field, flag in (("reward_model", "--reward_model"), ("critic_model", "--reward_model")):
        c.set(r + field, name, f"{k.source} ({how}; rlhf.py:126-134)", flag)


def _mini_batches(c: Collector, f: dict[str, Flag]) -> None:
    """--num_mini_batches N: TRL's mini-batch is the rank's micro x accumulation rows over N (exact_div, trl
    ppo_trainer.py:461-463), run as micro-batches of per_device_train_batch_size (:805-808): grad_accum becomes the
    micro-steps of one mini-batch and roles.mini_batches N. Where a mini-batch is not whole micro-batches it stays
    one mini-batch of all the accumulation (the hungrier: every micro-step's tensors alive into the next)."""
    if "num_mini_batches" not in f:
        return
    k = f["num_mini_batches"]
    n = c.number("workload.roles.mini_batches", one(k.value), k.source, "--num_mini_batches")
    micro, accum = c.get("micro_batch", 1), c.get("grad_accum", 1)
    if n is None or n == 1 or not isinstance(micro, int) or not isinstance(accum, int):
        return
    if accum % n:
        rows = micro * accum
        why = "TRL refuses it" if rows % n else "not whole micro-batches"
        c.note(
            f"{k.source} ({rows} rows a rank over {n} mini-batches: {why}, trl ppo_trainer.py:461-463, 805; planned "
            "as one mini-batch)"
        )
        c.set("workload.roles.mini_batches", 1, k.source + " (not planned: see the note)", "--num_mini_batches")
        return
    g = c.setting("grad_accum")
    src = f"{g.source}, over {k.source}: {accum} / {n} micro-steps a mini-batch (trl ppo_trainer.py:461-463, 801-805)"
    c.set("grad_accum", accum // n, src, g.key)
