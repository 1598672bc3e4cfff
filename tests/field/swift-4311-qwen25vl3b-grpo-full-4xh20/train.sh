nproc_per_node=4

SIZE_FACTOR=8 MAX_PIXELS=602112 CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=$nproc_per_node \
swift rlhf \
    --rlhf_type grpo \
    --model_type qwen2_5_vl \
    --model /mnt/workspace/qwen2.5-vl/SFT/aigc_select/Qwen2.5VL-3B_internvl38b_cot_sft_full_aigc_select_v1/v0-20250521-203218/checkpoint-320 \
    --load_args False \
    --external_plugins /mnt/workspace/internvl3/ms-swift/examples/train/grpo/plugin/plugin.py \
    --reward_funcs external_math_acc external_math_format \
    --train_type full \
    --freeze_llm False \
    --freeze_vit False \
    --freeze_aligner False \
    --torch_dtype bfloat16 \
    --dataset /mnt/workspace/multimodal_database/aigc_select/train/train_grpo_merge.json \
    --max_completion_length 1024 \
    --num_train_epochs 5 \
    --per_device_train_batch_size 8 \
    --per_device_eval_batch_size 8 \
    --learning_rate 1e-5 \
    --gradient_accumulation_steps $(expr 16 / $nproc_per_node) \
    --eval_steps 10 \
    --save_steps 10 \
    --save_total_limit 2 \
    --logging_steps 10 \
    --max_length 2048 \
    --output_dir /mnt/workspace/qwen2.5-vl/GRPO/aigc_select/Qwen2.5VL-3B_grpo_full_v3 \
    --warmup_ratio 0.05 \
    --dataloader_num_workers 4 \
    --dataset_num_proc 4 \
    --num_generations 8 \
    --top_k 3 \
    --top_p 0.8 \
    --temperature 1 \
    --deepspeed zero3
