tune run full_finetune_single_device --config recipes/configs/llama2/7B_full_low_memory.yaml batch_size=4
