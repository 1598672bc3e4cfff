#!/bin/bash
# An OpenRLHF 0.11.2 DPO run on 8 GPUs (written for memplan's tests in the form of OpenRLHF's examples/scripts/train_dpo
# commands, with its dotted flags)
set -x
deepspeed --num_gpus 8 --module openrlhf.cli.train_dpo \
   --ckpt.output_dir ./checkpoint/llama3-8b-dpo \
   --ckpt.save_steps -1 \
   --logger.logging_steps 1 \
   --eval.steps -1 \
   --train.batch_size 256 \
   --train.micro_batch_size 1 \
   --model.model_name_or_path meta-llama/Llama-3.1-8B-Instruct \
   --ds.param_dtype bf16 \
   --train.max_epochs 1 \
   --data.max_len 8192 \
   --ds.zero_stage 3 \
   --model.beta 0.1 \
   --data.dataset OpenRLHF/preference_dataset_mixture2_and_safe_pku \
   --data.apply_chat_template \
   --data.chosen_key chosen \
   --data.rejected_key rejected \
   --model.gradient_checkpointing_enable
