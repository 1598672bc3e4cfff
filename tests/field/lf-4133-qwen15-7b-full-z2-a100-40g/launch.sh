CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8 torchrun \
    --nproc_per_node 8 \
    --nnodes 1 \
    --node_rank 0 \
    --master_addr 127.0.0.1 \
    --master_port 29500 \
    src/train.py examples/qwen2_full_sft_ds_tool.yaml
