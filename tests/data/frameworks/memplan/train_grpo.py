"""A GRPO training script as people write it (written for memplan's tests; memplan reads its syntax tree and never
runs it)."""

import os

import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

MODEL_ID = "Qwen/Qwen2.5-3B-Instruct"
MAX_PROMPT = 512


def reward_len(completions, **kwargs):
    return [-abs(200 - len(c)) for c in completions]


def main():
    tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
    model = AutoModelForCausalLM.from_pretrained(
        MODEL_ID, torch_dtype=torch.bfloat16, attn_implementation="flash_attention_2"
    )
    args = GRPOConfig(
        output_dir="out",
        per_device_train_batch_size=4,
        gradient_accumulation_steps=4,
        num_generations=8,
        max_prompt_length=MAX_PROMPT,
        max_completion_length=1024,
        gradient_checkpointing=True,
        bf16=True,
        beta=0.04,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.35,
        learning_rate=float(os.environ.get("LR", "1e-6")),  # computed when it runs: not read
    )
    peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.05)
    trainer = GRPOTrainer(
        model=model, args=args, peft_config=peft_config, reward_funcs=reward_len, processing_class=tokenizer
    )
    trainer.train()


if __name__ == "__main__":
    main()
