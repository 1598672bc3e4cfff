CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
VIDEO_MAX_PIXELS=19600  \
swift sft \
    --model Qwen/Qwen2.5-VL-7B-Instruct \
    --dataset 'LLaMA-Factory/data/video.json' \
    --val_dataset 'LLaMA-Factory/data/video_test.json' \
    --train_type full \
    --torch_dtype bfloat16 \
    --num_train_epochs 10 \
    --per_device_train_batch_size 1 \
    --per_device_eval_batch_size 1 \
    --learning_rate 1e-5 \
    --gradient_accumulation_steps 8 \
    --eval_steps 200 \
    --save_steps 200 \
    --save_total_limit 20 \
    --logging_steps 5 \
    --max_length 1024 \
    --output_dir /mnt/sh_flex_storage/projects/qwen_vl \
    --warmup_ratio 0.05 \
    --dataloader_num_workers 4 \
    --deepspeed zero3_offload \
    --warmup_ratio 0.05 \
