#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
DIR=`pwd`

export CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7

GPUS_PER_NODE=7
NNODES=1
NODE_RANK=0
MASTER_ADDR=localhost
MASTER_PORT=6001

DISTRIBUTED_ARGS="
    --nproc_per_node $GPUS_PER_NODE \
    --nnodes $NNODES \
    --node_rank $NODE_RANK \
    --master_addr $MASTER_ADDR \
    --master_port $MASTER_PORT
"

swift sft \
    --model_type internlm-xcomposer2-7b-chat \
    --model_id_or_path /base/internlm-xcomposer2d5 \
    --output_dir /IXC2/swift/adapter/le_0722_b2d5 \
    --dataset /IXC2/data/train_data_0718/data.json \
    --gradient_checkpointing true \
    --num_train_epochs 1 \
    --sft_type lora \
    --use_flash_attn true \
    --batch_size 1 \
    --evaluation_strategy 'no'
