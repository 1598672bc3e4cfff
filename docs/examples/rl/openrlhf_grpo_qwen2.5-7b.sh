#!/bin/bash
# An OpenRLHF 0.11.2 GRPO run on one node of 8 GPUs, every role colocated (written for memplan's tests in the form of
# OpenRLHF's README "hybrid engine" commands: dotted flags, ray job submit)
set -x
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 --ref.num_gpus_per_node 8 \
   --actor.num_nodes 1 --actor.num_gpus_per_node 8 \
   --vllm.num_engines 8 --vllm.tensor_parallel_size 1 \
   --train.colocate_all \
   --vllm.gpu_memory_utilization 0.6 \
   --vllm.enable_sleep --ds.enable_sleep \
   --algo.advantage.estimator group_norm \
   --algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.init_coef 0.001 \
   --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct \
   --reward.remote_url examples/python/math_reward_func.py \
   --data.prompt_dataset zhuzilin/dapo-math-17k \
   --data.input_key prompt --data.label_key label --data.apply_chat_template \
   --rollout.batch_size 128 --rollout.n_samples_per_prompt 8 \
   --rollout.micro_batch_size 8 \
   --train.batch_size 1024 --train.micro_batch_size 2 \
   --data.max_len 8192 --rollout.max_new_tokens 6144 \
   --ds.zero_stage 3 --ds.param_dtype bf16 \
   --actor.gradient_checkpointing_enable \
   --actor.adam.lr 5e-7 \
   --ckpt.output_dir ./exp/qwen2.5-7b-grpo
