CUDA_VISIBLE_DEVICES=0,1 llamafactory-cli train /opt/github/LLaMA-Factory/examples/lora_single_gpu/llama3_lora_sft.yaml
