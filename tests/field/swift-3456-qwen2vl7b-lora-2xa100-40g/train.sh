nproc_per_node=2

CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
NPROC_PER_NODE=$nproc_per_node \
swift sft \
    --model Qwen2-VL-7B-Instruct \
    --train_type lora \
    --dataset 'VQA_dataset.json' \
    --max_memory '{0: "30GB", 1: "30GB", 2: "30GB", 3: "30GB", 4: "30GB", 5: "30GB", 6: "30GB", 7: "30GB"}' \
    --torch_dtype bfloat16 \
    --num_train_epochs 1 \
    --dataloader_num_workers 4 \
    --dataloader_persistent_workers True \
    --per_device_train_batch_size 1 \
    --per_device_eval_batch_size 1 \
    --learning_rate 1e-4 \
    --lora_rank 8 \
    --lora_alpha 32 \
    --target_modules all-linear \
    --gradient_accumulation_steps $(expr 16 / $nproc_per_node) \
    --eval_steps 100 \
    --save_steps 100 \
    --save_total_limit 2 \
    --logging_steps 5 \
    --max_length 2048 \
    --output_dir output \
    --warmup_ratio 0.05 \
    --model_author swift \
    --model_name swift-robot \

