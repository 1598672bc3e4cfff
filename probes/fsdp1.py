"""The FSDP1 gather probe: which decoder layers torch's FullyShardedDataParallel (FSDP1) holds all-gathered at once,
measured on a real transformers model (a tiny Llama-4 text model whose routed and dense layers alternate,
interleave_moe_layer_step 2) wrapped as accelerate wraps it for axolotl's FSDP1 configs: every decoder layer a unit
(transformer_auto_wrap_policy), FULL_SHARD, bf16 MixedPrecision, use_orig_params False, limit_all_gathers, no
forward prefetch, and a backward prefetch (BACKWARD_PRE, torch's default; None, what HF's Trainer passes when
fsdp_config names none: transformers 4.53 training_args.py:2007-2008 "NO_PREFETCH").

A unit's gathered parameters are its FlatParameter's `_full_param_padded` storage (torch 2.13
fsdp/_flat_param.py: allocated in unshard, freed in reshard); they grow only in `FlatParamHandle.unshard`, so the
live set's peak is read right after each unshard: the sum of every decoder unit's allocated storage (the root unit,
never freed after forward under FULL_SHARD, apart).

CPU-only differences, none of which moves the set of gathered units: FSDP1 runs on CPU only with
device_id=cpu (torch 2.13 fsdp/_init_utils.py:389-392 refuses an accelerator-less default); sync_module_states
off (it requires GPU parameters, _init_utils.py:1176-1178; both ranks build the same seeded weights); no
CPUOffload (it pins the shard, _flat_param.py:1260, which needs an accelerator); on CPU a freed unit's memory is
free at once, where on a GPU the caching allocator waits for the unit's kernels (record_stream) and the rate
limiter allows two frees in flight.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.fsdp1 JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# a tiny Llama-4 text model (llama4_text), its routed layers at interleave_moe_layer_step
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "intermediate_size_mlp": 32,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_local_experts": 8,
    "num_experts_per_tok": 1,
    "vocab_size": 256,
}


def measure_gathers(config: dict, prefetch: str | None, world: int = 2, timeout_s: float = 300) -> list[dict]:
    """One training step of `config` (a llama4_text config.json) under FSDP1 on `world` gloo ranks with backward
    `prefetch` (a BackwardPrefetch name, or None); one result per rank (see _rank_main)."""
    from recipe.dist import free_port  # imports torch: here, so that TINY costs the default tier nothing

    with tempfile.TemporaryDirectory(prefix="memplan-fsdp1-") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"config": config, "prefetch": prefetch}))
        run = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world)]
        run += ["--master_addr", "127.0.0.1", "--master_port", str(free_port()), "-m", "probes.fsdp1", str(job), tmp]
        proc = subprocess.run(
            run,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            cwd=Path(__file__).resolve().parents[1],
        )
        if proc.returncode != 0:
            raise RuntimeError(f"torchrun exited {proc.returncode}: {proc.stderr[-2000:]}")
        return [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]


def _wrapped(config: dict, prefetch: str | None):
    import functools

    import torch
    from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import AutoConfig, Llama4ForCausalLM
    from transformers.models.llama4.modeling_llama4 import Llama4TextDecoderLayer

    torch.manual_seed(0)
    model = Llama4ForCausalLM(AutoConfig.for_model(**config))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # axolotl's
    bf16 = torch.bfloat16
    return model, FSDP(
        model,
        auto_wrap_policy=functools.partial(
            transformer_auto_wrap_policy, transformer_layer_cls={Llama4TextDecoderLayer}
        ),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16),
        backward_prefetch=BackwardPrefetch[prefetch] if prefetch else None,
        forward_prefetch=False,
        limit_all_gathers=True,
        use_orig_params=False,
        sync_module_states=False,
        device_id=torch.device("cpu"),
    )


def _rank_main(job_path: str, out_dir: str) -> None:
    """Per rank: each decoder unit's gathered bytes in execution order (`units`, with `routed` per unit), and the
    peak of the decoder units' gathered bytes live at once in forward and in backward."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp._flat_param import FlatParamHandle

    dist.init_process_group("gloo")
    job = json.loads(Path(job_path).read_text())
    model, wrapped = _wrapped(job["config"], job["prefetch"])
    layers = [FSDP.fsdp_modules(layer)[0]._handle for layer in wrapped.module.model.layers]
    peak, phase = {"forward": 0, "backward": 0}, ["forward"]

    def live() -> int:
        full = (h.flat_param._full_param_padded for h in layers)
        return sum(t.untyped_storage().nbytes() for t in full)

    unshard = FlatParamHandle.unshard

    def tracked(self):
        unshard(self)
        peak[phase[0]] = max(peak[phase[0]], live())

    FlatParamHandle.unshard = tracked
    ids = torch.randint(0, job["config"]["vocab_size"], (1, 32))
    loss = wrapped(input_ids=ids, labels=ids).loss
    phase[0] = "backward"
    loss.backward()
    units = [h.flat_param._full_param_padded.numel() * h.flat_param._full_param_padded.element_size() for h in layers]
    routed = [type(layer.feed_forward).__name__ == "Llama4TextMoe" for layer in model.model.layers]
    out = {"rank": dist.get_rank(), "units": units, "routed": routed, "peak": peak, "loss": loss.item()}
    Path(out_dir, f"rank{dist.get_rank()}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2])
