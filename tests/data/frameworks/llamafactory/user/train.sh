#!/bin/bash
# llamafactory-cli on two nodes of 8 GPUs, with OmegaConf overrides (written for memplan's tests)
CONFIG=${CONFIG:-qwen2_5vl_full_sft.yaml}

FORCE_TORCHRUN=1 NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 NPROC_PER_NODE=8 \
    llamafactory-cli train "$CONFIG" \
    cutoff_len=8192 per_device_train_batch_size=2
