# accelerate launch with its options and a config file (written for memplan's tests)
accelerate launch --config_file ../scripts/trl/examples/accelerate_configs/fsdp2.yaml --num_processes 4 \
    --mixed_precision bf16 \
    sft_llama.py --model_name_or_path meta-llama/Llama-3.1-8B-Instruct --dtype bfloat16 \
    --per_device_train_batch_size 1 --gradient_accumulation_steps 8 --max_length 8192
