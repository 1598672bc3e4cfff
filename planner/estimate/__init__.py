"""Estimates of one configuration: every memory term as one function in bytes (memory, activations,
recipe_terms, lora, moe, fsdp; rl for GRPO/DPO phases), per phase, and the step time (speed, calibration)."""
