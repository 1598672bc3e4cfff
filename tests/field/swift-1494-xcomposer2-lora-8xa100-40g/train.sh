NODE_RANK=0 \
MASTER_ADDR=localhost \
MASTER_PORT=7777 \
NPROC_PER_NODE=8 \
swift sft \
    --model_type internlm-xcomposer2-7b-chat \
    --model_id_or_path /data/rotate_712 \
    --output_dir /data/adapter/0725_new \
    --gradient_checkpointing true \
    --num_train_epochs 1 \
    --sft_type lora \
    --use_flash_attn true \
    --batch_size 1 \
    --evaluation_strategy 'epoch' \
    --custom_train_dataset_path /data/train_data_0725/0725.json \
    --train_dataset_sample -1 \
    --custom_val_dataset_path /data/test/val_data/data.json \
    --val_dataset_sample -1 \
    --deepspeed default-zero2 \
