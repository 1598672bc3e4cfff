"""The task an axolotl config trains (planner.config.knobfields `task`, `num_labels`, `negatives`), read at v0.18.0
(src/axolotl/..., github.com/axolotl-ai-cloud/axolotl):

- `reward_model: true` (from v0.5.0, v0_4_1/__init__.py:590) runs AxolotlRewardTrainer, TRL's RewardTrainer
  (core/builders/causal.py:160-161, core/trainers/trl.py:58) on AutoModelForSequenceClassification with num_labels 1
  (utils/schemas/validation.py:257-262 where unset; causal.py:437-443 sets 1 on the loaded model whatever was
  given: TRL 1.8's RewardTrainer refuses another, trl/trainer/reward_trainer.py:400-404). Its collator is TRL's
  DataCollatorForPreference (causal.py:515-519), which stacks each pair's chosen and rejected rows into one batch of
  2 x micro_batch_size (trl v1.8.0 reward_trainer.py:198-222), each row truncated to sequence_len
  (prompt_strategies/bradley_terry/chat_template.py:105-108) and padded to it (pad_to_sequence_len, which
  validation.py:246-254 turns on, gives the collator pad_to_multiple_of: causal.py:386-390): memplan's seq-cls task
  with one negative, as TRL's own RewardTrainer reads (planner.intake.tasks.read_reward), at seq_len sequence_len.
  Before v0.14.0 its collator was TRL's RewardDataCollatorWithPadding (v0.12.0 core/builders/causal.py:14), the
  chosen and rejected rows two forwards of micro_batch_size rows (trl v0.12.0 reward_trainer.py:277-286) whose graphs
  both stay for the backward: the same rows held, planned alike; num_labels 1 is the schema's default only from
  v0.16.0 (validation.py), planned at 1 for every line (a second label is one more row of the score head).
- `process_reward_model: true` (from v0.7.0) runs TRL's PRMTrainer on AutoModelForTokenClassification, num_labels 2
  (validation.py:264-267; causal.py:162-163): a label for every token, which no memplan task is: named, not planned.
- model_type (loaders/model.py:929-936 loads that transformers class) naming a classifier without either key: axolotl
  trains it with its causal-LM trainer and collator, whose token labels no classifier's loss takes: named, not
  planned.
"""

from __future__ import annotations

from planner.frameworks.axolotl.keys import KEYS
from planner.intake.collect import Collector, as_bool
from planner.intake.flags import Flag

CLASSIFIERS = ("ForSequenceClassification", "ForTokenClassification")
NAMED = ("process_reward_model",)  # the task keys read_task names as not planned (tests: nothing dropped)
SRC = "axolotl v0.18.0 src/axolotl/"


def read_task(c: Collector, f: dict[str, Flag], kind: str) -> None:
    """reward_model as TRL's RewardTrainer reads (seq-cls, num_labels 1, chosen and rejected rows); the rest named."""
    rm, labels = f.get(KEYS.key("task")), f.get(KEYS.key("num_labels"))
    prm, model_type = f.get("process_reward_model"), f.get("model_type")
    said = f"; {labels.source}" if labels is not None else ""
    if prm is not None and as_bool(prm.value):
        c.note(
            f"{prm.source}{said} (process reward modelling, TRL's PRMTrainer: a token-classification head with a "
            "label for every token, is not planned yet; planned as causal-LM SFT)"
        )
        return
    if rm is None or not as_bool(rm.value):
        if model_type is not None and str(model_type.value).endswith(CLASSIFIERS):
            c.note(
                f"{model_type.source}{said} (a classifier without reward_model: axolotl trains it with its causal-LM "
                "trainer's token labels; not planned, planned as causal-LM SFT)"
            )
        return
    if kind != "sft":  # utils/trainer.py:725-730: with rl the RL builder runs, never causal.py's reward trainer
        c.note(f"{rm.source} (reward_model beside rl: axolotl runs the rl trainer; not planned as a reward model)")
        return
    why = f"{rm.source} ({SRC}core/builders/causal.py:160-161: TRL's RewardTrainer"
    c.set("task", "seq-cls", f"{why}, AutoModelForSequenceClassification)", KEYS.key("task"))
    pairs = "causal.py:515-516, trl v1.8.0 trl/trainer/reward_trainer.py:198-222: chosen and rejected rows"
    c.set("negatives", 1, f"{why}; {pairs})", KEYS.key("task"))
    c.set("num_labels", 1, f"{rm.source}{said} ({SRC}core/builders/causal.py:437-443: num_labels 1)", "num_labels")
