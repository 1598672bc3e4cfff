"""TRL's GRPOTrainer and DPOTrainer built for a plan: the cpu probe's per-phase measurement and `planner train
--workload grpo|dpo` both run them here. memplan writes no RL trainer: TRL is the library for it.

Pieces: a word-level tokenizer built in code (nothing downloaded; one token per word), prompt / preference
datasets of exactly the planned lengths, a built-in reward (format: completions that are short and end in a
period score higher) or the user's `module:function`, and the GRPOConfig / DPOConfig fields the plan exports
(planner.export.export.trl_args) with its batch split and precision.
"""

from __future__ import annotations

import importlib
import os
import sys

from transformers import TrainerCallback

WORDS = [f"w{i}" for i in range(200)] + ["."]
SPECIAL = ["[PAD]", "[UNK]", "<s>", "</s>"]


def tokenizer():
    """A word-level fast tokenizer over WORDS (ids below len(SPECIAL) + len(WORDS)); left padding for generation."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="left",
    )
    return fast


def words(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7919 + i * 31) % (len(WORDS) - 1)] for i in range(n))


def prompts(n: int, tokens: int):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [words(tokens, i) for i in range(n)]})


def pairs(n: int, prompt_tokens: int, completion_tokens: int):
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "prompt": [words(prompt_tokens, i) for i in range(n)],
            "chosen": [words(completion_tokens, i + 1) for i in range(n)],
            "rejected": [words(completion_tokens, i + 2) for i in range(n)],
        }
    )


def unpaired(n: int, prompt_tokens: int, completion_tokens: int):
    """KTO's rows: one completion each, desirable and undesirable in turn (KTOTrainer's unpaired preference data)."""
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "prompt": [words(prompt_tokens, i) for i in range(n)],
            "completion": [words(completion_tokens, i + 1) for i in range(n)],
            "label": [i % 2 == 0 for i in range(n)],
        }
    )


def format_reward(completions, **_):
    """Built-in reward: 1 for a completion ending in a period, less a length penalty (0.001 per word). A
    conversational completion (a VLM's: TRL hands the assistant's messages) is scored on its text."""
    texts = [c if isinstance(c, str) else _message_text(c) for c in completions]
    return [float(t.strip().endswith(".")) - 0.001 * len(t.split()) for t in texts]


def _message_text(messages: list) -> str:
    content = messages[-1]["content"] if messages else ""
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if isinstance(part, dict))


def reward_function(spec: str | None):
    """--reward module:function, or the built-in format reward."""
    if not spec:
        return format_reward
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def config(
    kind: str,
    out_dir: str,
    trl_fields: dict,
    micro_batch: int,
    grad_accum: int,
    precision: str,
    checkpointing: bool,
    steps: int,
    seed: int = 0,
    worst_case: bool = False,
    **extra,
):
    """GRPOConfig / DPOConfig for the plan; worst_case: completions are never cut short by an end token (the
    memory the plan is made for)."""
    from trl import DPOConfig, GRPOConfig, KTOConfig

    common = dict(
        output_dir=out_dir,
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=grad_accum,
        max_steps=steps,
        learning_rate=extra.pop("learning_rate", 1e-5),
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        **{_checkpointing_field(): checkpointing},
        use_cpu=os.environ.get("CUDA_VISIBLE_DEVICES") == "" or not _cuda(),
        disable_tqdm=True,
        dataloader_num_workers=0,
        **extra,
    )
    if kind == "grpo":
        fields = dict(trl_fields)
        if worst_case:
            fields["generation_kwargs"] = {"min_new_tokens": fields["max_completion_length"]}
        return GRPOConfig(**common, **fields, shuffle_dataset=False)
    return (KTOConfig if kind == "kto" else DPOConfig)(**common, **trl_fields)


def _checkpointing_field() -> str:
    """transformers 5.24 renamed TrainingArguments' gradient_checkpointing (kept as a deprecated alias that warns)."""
    from transformers import TrainingArguments

    names = TrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def trainer(
    kind: str,
    model,
    args,
    train_dataset,
    reward: str | None = None,
    peft_config=None,
    dtype=None,
    processing_class=None,
):
    """The TRL trainer; `model` a folder (GRPO's reference model is built from it) or a model; `processing_class` a
    VLM's processor (images in the prompts), else the built-in word tokenizer."""
    if isinstance(model, str):
        model = _auto(model).from_pretrained(model, dtype=dtype, local_files_only=True)
    from trl import DPOTrainer, GRPOTrainer, KTOTrainer

    tok = processing_class or tokenizer()
    if kind == "grpo":
        t = GRPOTrainer(
            model=model,
            reward_funcs=reward_function(reward),
            args=args,
            train_dataset=train_dataset,
            processing_class=tok,
            peft_config=peft_config,
        )
    else:
        t = (KTOTrainer if kind == "kto" else DPOTrainer)(
            model=model, args=args, train_dataset=train_dataset, processing_class=tok, peft_config=peft_config
        )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    t.remove_callback(PrinterCallback)  # one short line per step on stderr instead of every metric on stdout
    t.remove_callback(ProgressCallback)
    t.add_callback(StepLine())
    return t


def _auto(folder: str):
    """transformers' auto class for the folder's model: image-text-to-text for a VLM, else causal LM."""
    import json

    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    with open(os.path.join(folder, "config.json")) as f:
        vlm = "vision_config" in json.load(f)
    return AutoModelForImageTextToText if vlm else AutoModelForCausalLM


class StepLine(TrainerCallback):
    """`step 3/10 loss 0.0123 reward 0.41` on stderr, per optimizer step (rank 0)."""

    def on_log(self, args, state, control, logs=None, **kw):
        if state.is_world_process_zero and logs and "loss" in logs:
            extra = f" reward {float(logs['reward']):.4g}" if "reward" in logs else ""
            print(
                f"step {state.global_step}/{state.max_steps} loss {float(logs['loss']):.4g}{extra}",
                file=sys.stderr,
                flush=True,
            )
