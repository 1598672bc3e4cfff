#!/bin/bash
# An OpenRLHF PPO run written with the flat flag names of 0.10.1 and before (written for memplan's tests): actor, ref,
# critic and reward model each on their own GPUs, vLLM engines on two more
python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 --ref_num_gpus_per_node 2 \
   --reward_num_nodes 1 --reward_num_gpus_per_node 2 \
   --critic_num_nodes 1 --critic_num_gpus_per_node 2 \
   --actor_num_nodes 1 --actor_num_gpus_per_node 2 \
   --vllm_num_engines 2 --vllm_tensor_parallel_size 1 \
   --advantage_estimator gae \
   --pretrain meta-llama/Llama-3.2-1B-Instruct \
   --reward_pretrain meta-llama/Llama-3.2-1B-Instruct \
   --micro_train_batch_size 8 --train_batch_size 128 \
   --micro_rollout_batch_size 16 --rollout_batch_size 1024 \
   --max_len 2048 --max_new_tokens 1024 \
   --zero_stage 2 --param_dtype bf16 --init_kl_coef 0.01 \
   --gradient_checkpointing
