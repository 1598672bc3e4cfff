"""Sequence, context and tensor parallelism in the HF family's launch material (HF Trainer, TRL, accelerate, a
DeepSpeed JSON), as accelerate 1.15.0, transformers 5.24.0 and DeepSpeed 0.19.8 read it:
- accelerate's `ParallelismConfig`: the `parallelism_config` section of an accelerate config file, whose keys
  `accelerate launch` copies onto its own `--parallelism_config_*` arguments and hands the ranks as
  PARALLELISM_CONFIG_* variables (accelerate commands/launch.py:1263-1283, utils/launch.py:403-427), and the same
  fields as TrainingArguments' `parallelism_config` takes them (transformers training_args.py:1314; the script
  builds `ParallelismConfig(**fields)`);
- Ulysses (`--sequence-parallel`) is accelerate's `sp_size` on DeepSpeed (ALST: accelerator.py:2394-2431), whose
  Ulysses mpu gives DeepSpeed the data-parallel groups. The JSON has no `sequence_parallel_size`: without an mpu, as
  under ZeRO-3's zero.Init, DeepSpeed would divide the world by it (runtime/config.py:466-469) and refuse the
  train_batch_size HF fills from every rank (transformers integrations/deepspeed.py:143);
- context parallel (`--context-parallel`) is accelerate's `cp_size` on FSDP2, FSDP sharding over dp_shard x cp;
- tensor parallel (`--tensor-parallel`) is DeepSpeed's AutoTP, `tensor_parallel.autotp_size` in the JSON
  (transformers integrations/deepspeed.py:659-667 calls deepspeed.tp_model_init with it).
Which framework runs which combination is the adapters' (planner/frameworks/hf/__init__.py HF_SPLIT_RULES)."""

from __future__ import annotations

from planner.config.spec import Hardware, Plan

# accelerate's TorchContextParallelConfig.cp_comm_strategy (utils/dataclasses.py): "alltoall" passes each rank's keys
# and values around the ring (torch's _RotateMethod.ALL_TO_ALL), "allgather" gathers all of them at once
CP_COMM = {"ring": "alltoall", "all-gather": "allgather"}
SP_ATTENTION = {"sdpa": "sdpa", "flash": "flash_attention_2"}  # ALST rejects eager (FRAMEWORKS.md, DeepSpeed row)


def parallelism_fields(plan: Plan, nodes: int) -> dict | None:
    """ParallelismConfig's fields for a sequence- or context-parallel plan (None otherwise): the sizes, the backend
    and the handler's fields (a nested dict: `sp_handler` / `cp_handler`)."""
    sp, cp = plan.sequence_parallel, plan.context_parallel
    if sp > 1:  # DeepSpeed builds the data-parallel groups itself; accelerate skips the size check (accelerator:369)
        return {
            # the data-parallel ranks: accelerate sets DeepSpeed's train_batch_size from dp_replicate x dp_shard
            # (accelerator.py:2358-2365), which DeepSpeed checks against its Ulysses groups' world / sp
            "dp_shard_size": plan.world_size // sp,
            "sp_size": sp,
            "sp_backend": "deepspeed",
            "sp_handler": {
                "sp_seq_length_is_variable": True,  # padded rows vary in length; ALST pads each to a multiple of sp
                "sp_attn_implementation": SP_ATTENTION[plan.attention],
            },
        }
    if cp > 1:
        replicate = nodes if plan.fsdp == "hybrid" else 1
        return {
            "dp_replicate_size": replicate,
            "dp_shard_size": plan.world_size // (cp * replicate),
            "cp_size": cp,
            "cp_backend": "torch",
            "cp_handler": {"cp_comm_strategy": CP_COMM[plan.cp_attention]},
        }
    if plan.fsdp == "hybrid":  # HSDP: FSDP2 over accelerate's dp_replicate x dp_shard mesh (hsdp_fields)
        return hsdp_fields(plan, nodes)
    return None


# FSDP2's hybrid shard is fully_shard over a 2-D mesh, which accelerate builds from ParallelismConfig alone: the
# Accelerator makes one from PARALLELISM_CONFIG_* where ACCELERATE_USE_PARALLELISM_CONFIG is true (1.10.1
# accelerator.py:454-476; none before 1.10.0), and fsdp2_prepare_model passes mesh[fsdp_dim_names], (dp_replicate,
# dp_shard_cp) (utils/fsdp_utils.py:624-631, parallelism_config.py:137-143); without one the mesh is None and every
# rank is one shard group (full shard over the world), whatever --fsdp says: HF's Trainer reads no sharding strategy
# under FSDP2 (transformers 4.56.2 training_args.py:1995-2008 sets FSDP_SHARDING_STRATEGY, which accelerate reads
# under FSDP1 alone: 1.10.1 utils/dataclasses.py:1782-1790), and builds no ParallelismConfig of its own (4.56.2
# trainer.py:5467-5473 passes TrainingArguments.parallelism_config, a field from 4.56 only; 5.23.0 the same)


def hsdp_fields(plan: Plan, nodes: int) -> dict:
    """ParallelismConfig's sizes of an HSDP plan: one replica a node, sharded over the node's GPUs."""
    return {"dp_replicate_size": nodes, "dp_shard_size": plan.world_size // nodes}


def accelerate_section(fields: dict) -> dict:
    """The accelerate config file's `parallelism_config` section: every field, the handler's too, as
    `parallelism_config_<name>` (the launcher's argument names)."""
    flat = {k: v for k, v in fields.items() if not k.endswith("_handler")}
    for k in ("sp_handler", "cp_handler"):
        flat.update(fields.get(k, {}))
    return {f"parallelism_config_{k}": v for k, v in flat.items()}


def deepspeed_keys(knobs) -> dict:
    """The DeepSpeed JSON's key for AutoTP (empty without tensor parallel; Ulysses has none: see above)."""
    return {"tensor_parallel": {"autotp_size": knobs.tensor_parallel}} if knobs.tensor_parallel > 1 else {}


def needs_accelerate_launch(plan: Plan) -> bool:
    """Ulysses, context parallel and HSDP's mesh reach the ranks only through `accelerate launch`
    (PARALLELISM_CONFIG_*) or the variables a Slurm script exports (parallelism_env)."""
    return plan.sequence_parallel > 1 or plan.context_parallel > 1 or plan.fsdp == "hybrid"


def deepspeed_accelerate_config(plan: Plan, hw: Hardware, ds_name: str) -> dict:
    """An accelerate config for a ZeRO plan with Ulysses: the DeepSpeed JSON by file, and the parallelism section."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {"deepspeed_config_file": ds_name, "deepspeed_multinode_launcher": "standard"},
        "num_machines": hw.nodes,
        "num_processes": hw.world_size,
        "machine_rank": 0,
        "main_training_function": "main",
        "use_cpu": False,
        "parallelism_config": accelerate_section(parallelism_fields(plan, hw.nodes)),
    }


def accelerate_command(hw: Hardware, args: str, config: str = "accelerate_config.yaml") -> str:
    """`accelerate launch` of the script with the config file; multi-node forms read the usual variables."""
    nodes = (
        f" --num_machines {hw.nodes} --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR "
        "--main_process_port $MASTER_PORT"
        if hw.nodes > 1
        else ""
    )
    return f"accelerate launch --config_file {config}{nodes} {args}"


def parallelism_env(plan: Plan, hw: Hardware) -> dict[str, str]:
    """The variables `accelerate launch` hands the ranks for the parallelism section (utils/launch.py:403-427), which
    the Accelerator HF's Trainer builds reads (accelerator.py:455-460): what a launcher other than accelerate's (the
    Slurm script's torchrun) must export itself."""
    fields = parallelism_fields(plan, hw.nodes)
    if fields is None:
        return {}
    out = {"ACCELERATE_USE_PARALLELISM_CONFIG": "true"}
    for k, v in accelerate_section(fields).items():
        out[k.upper()] = str(v)
    return out
