"""A plan as torchtitan 0.3.0 runs it: `memplan_torchtitan.py`, a config module whose function returns
`Trainer.Config` (0.3.0 reads no TOML: config/manager.py:48-159 imports `--module` and calls `--config`), and the
launch line `torchrun ... -m torchtitan.train --module memplan_torchtitan --config memplan_plan`.

Names and defaults were read from the 0.3.0 wheel (paths under torchtitan/): config/configs.py:37 (training.local_batch_size,
rows per data-parallel rank and accumulation step), :43-47 (global_batch_size; trainer.py:415-433 derives the
accumulation, global / (local x data-parallel degree), and asserts it divides), :52 (seq_len), :61-64
(enable_cpu_offload), :78 (dtype float32; bfloat16: no fp32 copy), :85 (mixed_precision_param bfloat16), :93
(mixed_precision_reduce float32), :113 (data_parallel_replicate_degree), :124 (data_parallel_shard_degree, -1: the
rest), :136 (fsdp_reshard_after_forward default | always | never), :157-160 (tensor_parallel_degree,
enable_sequence_parallel True), :232-235 (context_parallel_degree, load balancer headtail); distributed/parallel_dims.py
:170-189 (replicate x shard x cp x tp x pp must be the world size); distributed/activation_checkpoint.py:330-335
(SelectiveAC | FullAC | None); components/loss.py:567 (ChunkedLossWrapper, 8 chunks); components/optimizer/optimizer.py
:109-111 (implementation fused), :378-399 (default_adamw); hf_datasets/text_datasets.py:645-663 (ChatDataLoader needs a
dataset_path); models/llama3/__init__.py:359-366 and models/qwen3/__init__.py:598-610 (the flavors), :371 / :615
(attn_backend flex). The module imitates models/qwen3/config_registry.py:449 (sft_qwen3_8b_math).
"""

from __future__ import annotations

from planner.config.spec import Goal, Hardware, Plan
from planner.frameworks import check_plan
from planner.frameworks.torchtitan import MODELS
from planner.model import catalog
from planner.model.modelspec import ModelSpec

VERSION = "torchtitan 0.3.0"
MODULE_NAME = "memplan_torchtitan"
CONFIG_FN = "memplan_plan"
CONFIG_NAME = f"{MODULE_NAME}.py"
AC = {"off": "None", "full": "FullAC.Config()", "selective-op": "SelectiveAC.Config()"}
RESHARD = {"full": "default", "hybrid": "default", "grad-op": "never", "off": "default"}
IMPLEMENTATION = {"adamw": "foreach", "adamw-fused": "fused"}


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """{file name: text}: the config module (launch.sh beside it is planner.export.launch's)."""
    check(plan, model, hw)
    return {CONFIG_NAME: module(plan, model, hw, seq_len)}


def command(plan: Plan, hw: Hardware) -> str:
    """torchrun over the nodes (torchtitan's run_train.sh does the same), the module found on the working directory."""
    a = ["torchrun", "--nnodes", str(hw.nodes), "--nproc_per_node", str(hw.gpus_per_node)]
    if hw.nodes > 1:
        a += ["--node_rank", "$NODE_RANK", "--master_addr", "$MASTER_ADDR", "--master_port", "$MASTER_PORT"]
    return " ".join([*a, "-m", "torchtitan.train", "--module", MODULE_NAME, "--config", CONFIG_FN])


def check(plan: Plan, model: ModelSpec, hw: Hardware) -> None:
    """ValueError for what torchtitan 0.3.0 cannot run as planned (its rules: planner/frameworks/torchtitan/__init__.py)."""
    check_plan("torchtitan", plan, model, hw)


def degrees(plan: Plan, hw: Hardware) -> dict[str, int]:
    """The mesh: replicate x shard x cp x tp = the world (parallel_dims.py:186-189)."""
    tp, cp = plan.tensor_parallel, plan.context_parallel
    dp = hw.world_size // (tp * cp)
    replicate, shard = {"off": (dp, 1), "hybrid": (hw.nodes, dp // hw.nodes)}.get(plan.fsdp, (1, dp))
    return {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "tensor_parallel_degree": tp,
        "context_parallel_degree": cp,
    }


def training(plan: Plan, seq_len: int) -> dict[str, object]:
    return {
        "local_batch_size": plan.micro_batch,
        "global_batch_size": plan.global_batch,
        "seq_len": seq_len,
        "steps": 1000,
        "dtype": "bfloat16" if plan.precision == "bf16-pure" else "float32",
        "mixed_precision_param": "float32" if plan.precision == "fp32" else "bfloat16",
        "mixed_precision_reduce": "float32",
        "enable_cpu_offload": plan.offload != "none",
    }


def header(plan: Plan, hw: Hardware) -> list[str]:
    return [
        (
            f'"""memplan plan for {VERSION}: micro {plan.micro_batch} x accum {plan.grad_accum} x {plan.data_parallel} '
            f"data-parallel ranks of {plan.world_size} GPUs ({hw.gpu.name}) = {plan.global_batch}, {plan.sharding}, "
            f"{plan.precision}, checkpointing {plan.checkpointing}; {plan.memory.device_total_bytes / 2**30:.1f} of "
            f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU."
        ),
        "",
        f"Run: {command(plan, hw)}",
        "hf_assets_path: the checkpoint's folder (config.json, tokenizer, safetensors); the dataset: your chat JSONL.",
        '"""',
        "",
    ]


IMPORTS = """from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.optimizer import default_adamw
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.hf_datasets.text_datasets import ChatDataLoader
from torchtitan.models.common.config_utils import decoder_vocab_size
from torchtitan.models.{package} import model_registry
from torchtitan.trainer import Trainer


def messages(sample):
    return sample["messages"]

"""


def module(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int) -> str:
    package, flavor = MODELS[model.name]
    ce = "CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec))"
    loss = f"ChunkedLossWrapper.Config(loss_fn={ce})" if plan.loss == "chunked" else ce
    par = {**degrees(plan, hw), "fsdp_reshard_after_forward": RESHARD[plan.fsdp], "enable_sequence_parallel": True}
    body = [
        f"def {CONFIG_FN}() -> Trainer.Config:",
        f'    model_spec = model_registry("{flavor}", attn_backend="flex")',
        f"    optimizer = default_adamw(lr={1e-5:g})",
        f'    optimizer.implementation = "{IMPLEMENTATION[plan.optimizer]}"',
        "    return Trainer.Config(",
        f"        loss={loss},",
        f'        hf_assets_path="./assets/hf/{(catalog.hf_id(model.name) or model.name).split("/")[-1]}",',
        "        model_spec=model_spec,",
        "        optimizer=optimizer,",
        f"        training=TrainingConfig({kwargs(training(plan, seq_len))}),",
        f"        parallelism=ParallelismConfig({kwargs(par)}),",
        f"        activation_checkpoint={AC[plan.checkpointing]},",
        (
            '        dataloader=ChatDataLoader.Config(dataset_path="json", load_dataset_kwargs={"data_files": '
            '"YOUR_DATA.jsonl", "split": "train"}, sample_processor=messages),'
        ),
        "        checkpoint=CheckpointManager.Config(enable=True, initial_load_in_hf=True),",
        "    )",
    ]
    return "\n".join([*header(plan, hw), IMPORTS.format(package=package), *body]) + "\n"


def kwargs(d: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in d.items())
