"""Two PPO updates of TRL's own PPOTrainer (trl 0.29.1, the release ms-swift 4.6.0 runs: trl/experimental/ppo/
ppo_trainer.py) on CPU, in fp32 and in bf16 weights (ms-swift's --torch_dtype bfloat16), tiny Llamas built from config: the policy, its reference copy, and a one-label sequence
classifier as value model and as reward model. Every allocation is counted by probes.tracker.LiveBytes from the
second update's start (the AdamW states live, as memplan plans a step): the rollout's peak (generation, the
reference, value and reward forwards) and the training step's (PolicyAndValueWrapper's one forward and backward per
micro-batch). Prints one JSON line. Run by tests/probes/test_trl_ppo.py in ms-swift's venv (MEMPLAN_SWIFT_PYTHON),
whose TRL carries the PPOTrainer (TRL 1.16 dropped it).

    python tests/probes/trl_ppo_step.py CONFIG_JSON PROMPT RESPONSE MICRO ACCUM DTYPE[,DTYPE...] [MINI_BATCHES]
"""

import json
import sys

import torch

from probes.tracker import LiveBytes


def tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"<pad>": 0, "<eos>": 1, "a": 2}, unk_token="a"))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="a", padding_side="left"
    )


def models(cfg_in: dict):
    import transformers

    cfg = transformers.LlamaConfig(**cfg_in, pad_token_id=0, eos_token_id=1, bos_token_id=1, num_labels=1)
    torch.manual_seed(0)
    build = {"attn_implementation": "sdpa"}
    policy = transformers.AutoModelForCausalLM.from_config(cfg, **build)
    ref = transformers.AutoModelForCausalLM.from_config(cfg, **build)
    value = transformers.AutoModelForSequenceClassification.from_config(cfg, **build)
    reward = transformers.AutoModelForSequenceClassification.from_config(cfg, **build)
    return policy, ref, value, reward


def main(cfg_in: dict, prompt: int, response: int, micro: int, accum: int, dtype: str, mini: int = 1) -> dict[str, int]:
    from datasets import Dataset
    from trl.experimental.ppo import PPOConfig, PPOTrainer
    from trl.experimental.ppo import ppo_trainer as mod

    policy, ref, value, reward = (m.to(getattr(torch, dtype)) for m in models(cfg_in))
    rows = micro * accum
    ids = torch.randint(2, cfg_in["vocab_size"], (4 * rows, prompt), generator=torch.Generator().manual_seed(1))
    args = PPOConfig(
        output_dir="/tmp/memplan-trl-ppo",
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accum,
        num_ppo_epochs=1,
        num_mini_batches=mini,
        total_episodes=2 * rows,  # two updates
        local_rollout_forward_batch_size=micro,
        response_length=response,
        stop_token_id=None,  # no stop: every row generates the whole response
        num_sample_generations=0,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = PPOTrainer(
        args=args,
        processing_class=tokenizer(),
        model=policy,
        ref_model=ref,
        reward_model=reward,
        value_model=value,
        train_dataset=Dataset.from_dict({"input_ids": ids.tolist()}),
    )
    t, calls = LiveBytes(), {"generation": 0}
    generate, wrapped_forward = mod.batch_generation, mod.PolicyAndValueWrapper.forward

    def batch_generation(*a, **k):
        calls["generation"] += 1
        if calls["generation"] == 2:  # the second update: optimizer states exist
            t.reset_peaks()
        t.set_segment("rollout")
        return generate(*a, **k)

    def forward(self, **k):
        t.set_segment("train")
        return wrapped_forward(self, **k)

    mod.batch_generation, mod.PolicyAndValueWrapper.forward = batch_generation, forward
    t.add_existing([p for m in (policy, ref, value, reward) for p in (*m.parameters(), *m.buffers())], "params")
    try:
        with t:
            trainer.train()
    finally:
        mod.batch_generation, mod.PolicyAndValueWrapper.forward = generate, wrapped_forward
    return {k: v[0] for k, v in t.segments.items()}


if __name__ == "__main__":
    torch.set_num_threads(1)
    cfg, sizes = json.loads(sys.argv[1]), [int(a) for a in sys.argv[2:6]]
    mini = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    print(json.dumps({d: main(cfg, *sizes, d, mini) for d in sys.argv[6].split(",")}))
