"""LLaMA-Factory's `stage: ppo` read as a role run with every role in every process and the policy's own HF generate
(planner.config.roles: placement colocate, rollout engine hf), as v0.8.3 runs it on TRL 0.8-0.9's PPOTrainer (cited
at github.com/hiyouga/LLaMA-Factory v0.8.3 src/llamafactory/; TRL at v0.9.6):
- the policy is TRL's AutoModelForCausalLMWithValueHead (train/ppo/workflow.py:47 add_valuehead=True): the critic is
  its value head, Linear(hidden, 1) (trl models/modeling_value_head.py:46), trained with the policy: no model of its
  own (the framework's RoleEngine.value_head_on_policy);
- the reference: none under LoRA, the adapter disabled instead (train/trainer_utils.py:117-118; trl
  trainer/ppo_trainer.py:244-253), else a second copy of the model (:119-127);
- the reward model (reward_model_type, default lora: hparams/finetuning_args.py:207-209): api a server (no GPU
  memory, trainer_utils.py:137-140), lora an adapter and head loaded onto the policy (:141-156: no weights of its
  own), full its own model prepared with the policy's DeepSpeed (train/ppo/trainer.py:166-174);
- generation: unwrap_model_for_generation over the policy (train/ppo/trainer.py:348), which under ZeRO-3 gathers
  every parameter at once (trl models/utils.py:161-165), over mini_batch_size = per_device_train_batch_size rows at
  a time (trainer.py:91, :248-250); prompts cut at cutoff_len (data/processors/unsupervised.py:58), max_new_tokens
  after them (hparams/generating_args.py:51-53, default 1024);
- the log-probs from fp32 logits (trl models/modeling_value_head.py:188-190)."""

from __future__ import annotations

from planner.config.roles import ACTOR
from planner.frameworks.llamafactory.reader_keys import look
from planner.intake.collect import Collector, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup

LF = "llamafactory 0.8.3"
TRL_KL = (
    "trl 0.9.6 trainer/ppo_config.py:75"  # init_kl_coef 0.2: LLaMA-Factory passes none (train/ppo/trainer.py:89-100)
)


def read_ppo(c: Collector, f: dict[str, Flag], src: str, near) -> None:
    """stage ppo's workload and roles; the caller reads the policy's recipe as for SFT."""
    r = "workload.roles."
    c.set("workload.kind", "ppo", src, "stage")
    c.set("workload.num_generations", 1, default(LF, "train/ppo/trainer.py:248-255", "one response a prompt"), "stage")
    c.set("workload.beta", 0.2, default(LF, TRL_KL, "init_kl_coef 0.2"), "stage")
    why = "train/ppo/workflow.py:47-54 (policy with its value head, reference and reward model in every process)"
    c.set(r + "placement", "colocate", default(LF, why, "every role in every process"), "stage")
    c.set(r + "rollout_engine", "hf", default(LF, "train/ppo/trainer.py:348-355", "the policy's HF generate"), "stage")
    cut, cs = look(c, f, "seq_len")  # the release's cutoff_len default where the file sets none
    c.number(
        "workload.max_prompt_length", cut, f"{cs} (the prompt's cut: data/processors/unsupervised.py:58)", "cutoff_len"
    )
    for field, key, fallback, cite in (
        ("workload.max_completion_length", "max_new_tokens", 1024, "hparams/generating_args.py:51-53"),
        ("workload.num_iterations", "ppo_epochs", 4, "hparams/finetuning_args.py:167-169"),
    ):
        k = f.get(key)
        value, src = (one(k.value), k.source) if k else (fallback, default(LF, cite, f"{key} {fallback}"))
        c.number(field, value, src, key)
    if "ppo_buffer_size" in f:
        k = f["ppo_buffer_size"]
        c.number(r + "mini_batches", one(k.value), f"{k.source} (trainer.py:92: batch x buffer)", "ppo_buffer_size")
    _reward(c, f, near)
    if "ref_model" in f:
        c.note(f"{f['ref_model'].source} (a reference of another model: planned with the policy's shapes)")


def _reward(c: Collector, f: dict[str, Flag], near) -> None:
    k = f.get("reward_model_type")
    kind = str(one(k.value)) if k is not None and k.value not in (None, "") else "lora"
    where = k.source if k is not None else default(LF, "hparams/finetuning_args.py:207-209", "reward_model_type lora")
    if kind == "api":
        c.note(f"{where} (a reward server: no memory on these GPUs, train/trainer_utils.py:137-140)")
        return
    if kind == "lora":
        c.note(f"{where} (an adapter and head on the policy: no weights of its own, train/trainer_utils.py:141-156)")
        return
    m = f.get("reward_model")
    found = lookup(str(one(m.value)), near) if m is not None and m.value else None
    value = found.ref if found is not None else ACTOR
    how = (
        found.how if found is not None else "not found offline: planned with the policy's shapes; pass its config.json"
    )
    c.set(
        "workload.roles.reward_model", value, f"{m.source if m else where} ({how}; trainer.py:166-174)", "reward_model"
    )
