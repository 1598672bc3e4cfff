#!/usr/bin/env bash
# A launch script as people write them (written for memplan's tests, never run): comments, variables set earlier,
# defaults from the environment, arithmetic, a path computed from the script's own folder, an env prefix,
# `\` continuations ending at a blank line, an array and a commented-out older run.
set -euo pipefail

export WANDB_PROJECT=memplan        # a trailing comment
MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}
GPUS_PER_NODE=4
NNODES=${SLURM_NNODES:-1}
GLOBAL_BATCH=64
MICRO=2
GRAD_ACC=$(( GLOBAL_BATCH / (MICRO * GPUS_PER_NODE * NNODES) ))
SEQ=4096
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DS_CONFIG="${HERE}/ds_zero2_offload.json"
EXTRA_ARGS=(--report_to none --logging_steps 10)

# CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 old_train.py --per_device_train_batch_size 16

CUDA_VISIBLE_DEVICES=0,1,2,3 OMP_NUM_THREADS=8 \
torchrun --nproc_per_node=$GPUS_PER_NODE --nnodes "$NNODES" \
    train_sft.py \
    --model_name_or_path "$MODEL" \
    --per_device_train_batch_size ${MICRO} \
    --gradient_accumulation_steps $GRAD_ACC \
    --max_length $SEQ \
    --bf16 true \
    --gradient_checkpointing \
    --use_peft --lora_r 64 --lora_target_modules q_proj k_proj v_proj o_proj \
    --deepspeed $DS_CONFIG \
    --use_liger_kernel True \
    "${EXTRA_ARGS[@]}" \

echo "finished $(date)"
