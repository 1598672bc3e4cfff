"""Estimates of one configuration: every memory term as one function in bytes (state_terms, activation_terms,
temp_terms, activations, recipe_terms, lora, moe, fsdp; rl for GRPO/DPO phases), the peak per phase (memory), and the
step time (speed, calibration)."""
