"""How a LLaMA-Factory configuration is told from its content (Framework.signs, planner.intake.configs.kind): its
0.9 YAML by the keys only it writes; its Megatron-Core backend (USE_MCA=1), known and refused. Its experimental v1
schema (USE_V1=1) is its v1 trainer's, read by planner/frameworks/llamafactory_v1."""

from planner.frameworks.tool import Signs

KEYS = {"stage", "finetuning_type", "cutoff_len", "lora_target", "template", "dataset_dir", "pure_bf16"}
# its Megatron-Core backend: with USE_MCA=1 its TrainingArguments are mcore_adapter's Seq2SeqTrainingArguments (v0.9.5
# src/llamafactory/hparams/training_args.py:26-35), whose Megatron keys its classic parser refuses (none is in
# planner/intake/presets/keys_llamafactory.txt); v0.9.5's examples/megatron/qwen2_vl_full.yaml and qwen3_moe_full.yaml
# each set tensor_model_parallel_size and pipeline_model_parallel_size; its Megatron-Bridge backend after 0.9.5
# (USE_MEGATRON_BRIDGE=1) takes the same keys (ff6d4d12e src/llamafactory/hparams/megatron_bridge_args.py:32-109)
MCA_KEYS = {
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "use_distributed_optimizer",
    "recompute_granularity",
}
MCA = (
    "LLaMA-Factory's Megatron-Core backend (mcore_adapter with USE_MCA=1, or Megatron-Bridge; its keys: "
    + ", ".join(sorted(MCA_KEYS))
    + ") is not read, nor planned as its classic trainer"
)
SIGNS = (
    Signs("lf-mca", lambda k, d: bool(k & KEYS) and "model" not in k and bool(k & MCA_KEYS), 55, refused=MCA),
    Signs("llamafactory", lambda k, d: bool(k & KEYS) and "model" not in k, 60),
)
