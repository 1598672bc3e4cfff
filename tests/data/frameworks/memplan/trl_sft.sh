# The TRL CLI with a config file and TRL's bundled accelerate config (written for memplan's tests)
trl sft --config sft_config.yaml \
  --accelerate_config zero3 \
  --gradient_checkpointing false  # the last word of the command, then a comment
