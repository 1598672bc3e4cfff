"""verl's SFT trainers' key tables (planner.frameworks.keys), read by reader_sft.py: memplan field (or verl's own name
where memplan has none) <-> the Hydra key, with verl v0.7.0's default and where it stands. FSDP: `-m
verl.trainer.fsdp_sft_trainer` over trainer/config/sft_trainer.yaml (v0.2 .. v0.7.0; gone from 0.9.1); ENGINE: `-m
verl.trainer.sft_trainer` over sft_trainer_engine.yaml with model/hf_model.yaml under model.*, engine/fsdp.yaml under
engine.* and optim/fsdp.yaml under optim.* (v0.6.0 on: what writer.py writes). Paths under verl/trainer/config/ at
v0.7.0 unless said."""

from planner.frameworks.keys import Key, Table

FSDP_ENTRY = "verl.trainer.fsdp_sft_trainer"
ENGINE_ENTRY = "verl.trainer.sft_trainer"
OPTIM = (  # optim@optim: fsdp in both configs (sft_trainer.yaml:2, sft_trainer_engine.yaml:12)
    Key("optimizer", "optim.optimizer", "AdamW", "optim/fsdp.yaml:5"),
    Key("optimizer_impl", "optim.optimizer_impl", "torch.optim", "optim/fsdp.yaml:9"),
    Key("optimizer_kwargs", "optim.override_optimizer_config", None, "optim/fsdp.yaml:50"),
)
DATA = (
    Key("micro_batch", "data.micro_batch_size_per_gpu", 4, "sft_trainer.yaml:8"),
    Key("global_batch", "data.train_batch_size", 256, "sft_trainer.yaml:6"),
    Key("seq_len", "data.max_length", 1024, "sft_trainer.yaml:24"),
)

FSDP = Table(
    *DATA,
    Key("model", "model.partial_pretrain"),
    Key("model_dtype", "model.fsdp_config.model_dtype", "fp32", "sft_trainer.yaml:37"),
    Key("cpu_offload", "model.fsdp_config.cpu_offload", False, "sft_trainer.yaml:40"),
    Key("offload_params", "model.fsdp_config.offload_params", False, "sft_trainer.yaml:41"),
    Key("checkpointing", "model.enable_gradient_checkpointing", True, "sft_trainer.yaml:43"),
    Key("lora_rank", "model.lora_rank", 0, "sft_trainer.yaml:45"),
    Key("lora_targets", "model.target_modules", "all-linear", "sft_trainer.yaml:47"),
    Key("use_liger", "model.use_liger", False, "sft_trainer.yaml:48"),
    Key("strategy", "model.strategy", "fsdp2", "sft_trainer.yaml:49"),
    Key("sequence_parallel", "ulysses_sequence_parallel_size", 1, "sft_trainer.yaml:57"),
    Key("remove_padding", "use_remove_padding", False, "sft_trainer.yaml:58"),
    *OPTIM,
)

ENGINE = Table(
    Key("micro_batch", "data.micro_batch_size_per_gpu", 4, "sft_trainer_engine.yaml:18"),
    Key("global_batch", "data.train_batch_size", 256, "sft_trainer_engine.yaml:17"),
    Key("max_tokens_per_gpu", "data.max_token_len_per_gpu", 8192, "sft_trainer_engine.yaml:19"),
    Key("dynamic_batch", "data.use_dynamic_bsz", True, "sft_trainer_engine.yaml:20"),
    Key("seq_len", "data.max_length", 1024, "sft_trainer_engine.yaml:31"),
    Key("model", "model.path"),
    Key("checkpointing", "model.enable_gradient_checkpointing", True, "model/hf_model.yaml:34"),
    Key("remove_padding", "model.use_remove_padding", True, "model/hf_model.yaml:40"),
    Key("lora_rank", "model.lora_rank", 0, "model/hf_model.yaml:43"),
    Key("lora_targets", "model.target_modules", "all-linear", "model/hf_model.yaml:49"),
    Key("use_liger", "model.use_liger", False, "model/hf_model.yaml:58"),
    Key("offload", "engine.offload_policy", False, "engine/fsdp.yaml:19"),
    Key("fsdp", "engine.reshard_after_forward", True, "engine/fsdp.yaml:23"),
    Key("model_dtype", "engine.model_dtype", "fp32", "engine/fsdp.yaml:33"),
    Key("sequence_parallel", "engine.ulysses_sequence_parallel_size", 1, "engine/fsdp.yaml:45"),
    Key("strategy", "engine.strategy", "fsdp", "engine/fsdp.yaml:60"),
    *OPTIM,
)
TABLES = {FSDP_ENTRY: FSDP, ENGINE_ENTRY: ENGINE}
