"""LLaMA-Factory 0.9.3's LoRA + ZeRO-3 step on the stack a July 2025 install resolves to (transformers 4.52.4, PEFT
0.15.2, accelerate 1.7.0, DeepSpeed 0.16.9: LF 0.9.3 requirements.txt and setup.py's deepspeed<=0.16.9), on two CPU
ranks (gloo), recording DeepSpeed's gathered parameter elements at every fetch as probes/zero.py does on the current
stack. Written for field row lf-5070 (docs/benchmarks.md), whose run used this stack.

What it copies from LF 0.9.3: the model built under zero.Init without torch_dtype (model/patcher.py:142-144; zero.Init
casts every float tensor to the DeepSpeed config's bf16: DeepSpeed 0.16.9 partition_parameters.py:359-369, 594-602),
reentrant checkpointing through LF's own checkpointing function (model/model_utils/checkpointing.py:79-101, 165-173;
use_reentrant_gc True, hparams/model_args.py:122), LoRA on every linear but lm_head, no fp32 cast of the adapters
under ZeRO-3 (model/adapter.py:281-293), the bundled ds_z3_config.json with HF's "auto" fills. The model is a catalog
model narrowed in width (probes.zero.narrowed_case: every matrix 1/k^2, DeepSpeed's element limits too).

The stack is not one of tools/fwenv.sh's venvs (nothing in the suite runs this); to rerun:
    python3 -m venv --without-pip /tmp/lf093 && echo SHARED_TORCH_SITE_PACKAGES > /tmp/lf093/lib/python3.11/site-packages/t.pth
    uv pip install --python /tmp/lf093/bin/python transformers==4.52.4 peft==0.15.2 accelerate==1.7.0 \
        deepspeed==0.16.9 "numpy<2" tokenizers==0.21.1          (against pip's sources, torch==2.13.0 as a constraint)
    PYTHONPATH=. python -c "import probes.zero3_lf093 as p; p.write_job('job.json')"         (memplan's venv)
    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 /tmp/lf093/bin/python -m torch.distributed.run --nproc_per_node 2 \
        probes/zero3_lf093.py job.json OUT_DIR [reentrant|nonreentrant]

Measured 2026-12-06 (Qwen2.5-7B at 1/16, LoRA rank 16, 64 tokens, accumulation 2, both ranks, from the 2nd step on):
the largest gathered set 8,197,472 elements, 35% over zero3_gathered_param_elements (6,084,650): persistent 49,504 +
max live 3,906,250 + twice the embedding's 2,128,896 (8,213,546). The embedding's weight is gathered in backward and
left gathered after it; reset_step zeroes the live count (DeepSpeed 0.16.9 partitioned_param_coordinator.py:264)
while it stays gathered, and its release later in the step takes its elements off that count (:516-521), so the
prefetch limit (:381-383) lets one embedding more through. At the loss (after the forward) 6,172,512 are gathered:
1.4% over the term. Non-reentrant checkpointing fails on this stack at the first backward (torch's CheckpointError,
"Recomputed values ... have different metadata", the failure DeepSpeed#8130 and #8148 of 2026-07 address)."""

from __future__ import annotations

import json
import os
import sys
from functools import partial, wraps
from pathlib import Path

SEQ, ACCUM, STEPS = 64, 2, 2
BIG = 10**6  # parameters named at the peaks: the narrowed embedding and head (2.1M elements), not a layer's matrices


def write_job(path: str, model: str = "qwen2.5-7b", rank: int = 16, k: int = 16) -> None:
    """The narrowed case the ranks run and what planner.estimate.zero plans for it (run in memplan's venv)."""
    from planner.estimate import zero
    from probes.zero import narrowed_case, planned

    case, limits = narrowed_case(model, rank, k)
    s, z = planned(case, limits)
    job = {"config": case.config, "limits": limits, "hidden": s.model.text.hidden, "rank": rank}
    job |= {
        "planned_gathered": zero.zero3_gathered_param_elements(s, z),
        "persistent": zero.persistent_param_elements(s),
    }
    with open(path, "w") as f:
        json.dump(job, f)


def ds_config(job: dict, world: int) -> dict:
    """LF 0.9.3's examples/deepspeed/ds_z3_config.json with the values HF's Trainer puts for "auto"."""
    h = job["hidden"]
    zero = {"stage": 3, "overlap_comm": False, "contiguous_gradients": True, "sub_group_size": 1e9}
    zero |= {"reduce_bucket_size": h * h, "stage3_prefetch_bucket_size": int(0.9 * h * h)}
    zero |= {"stage3_param_persistence_threshold": 10 * h, "stage3_gather_16bit_weights_on_model_save": True}
    zero |= job["limits"]
    return {
        "train_batch_size": ACCUM * world,
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": ACCUM,
        "gradient_clipping": 1.0,
        "zero_allow_untested_optimizer": True,
        "fp16": {"enabled": False},
        "bf16": {"enabled": True},
        "zero_optimization": zero,
    }


def lf_checkpointing(reentrant: bool):
    """LF 0.9.3's custom_gradient_checkpointing_func over torch's checkpoint (checkpointing.py:79-101)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    inner = partial(checkpoint, use_reentrant=reentrant)

    @wraps(inner)
    def f(func, *args, **kwargs):
        module = func.func.__self__ if isinstance(func, partial) else func.__self__
        if not any(p.requires_grad for p in module.parameters()):
            return func(*args, **kwargs)
        for arg in args:
            if torch.is_tensor(arg) and torch.is_floating_point(arg):
                arg.requires_grad_(True)
                break
        return inner(func, *args, **kwargs)

    return f


def build(job: dict, ds: dict, reentrant: bool):
    """The model as LF 0.9.3 loads and adapts it under ZeRO-3."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(**{k: v for k, v in job["config"].items() if k != "architectures"})
    config.use_cache = False
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")  # under zero.Init (4.52.4)
    model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=lf_checkpointing(reentrant))
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = LoraConfig(r=job["rank"], lora_alpha=job["rank"], lora_dropout=0.05, target_modules=targets)
    return get_peft_model(model, lora), config.vocab_size


def watch(model, peak: dict, at_peak: dict):
    """Wrap DeepSpeed's fetch_sub_module: the largest gathered set per phase and the large parameters in it; returns
    a function giving the gathered elements now and the large parameters gathered."""
    import torch
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
    from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator as Coordinator

    named = list(model.named_parameters())
    fetch = Coordinator.fetch_sub_module

    def now():
        live = [(n, p.ds_numel) for n, p in named if p.ds_status != ZeroParamStatus.NOT_AVAILABLE]
        return sum(c for _, c in live), sorted(n for n, c in live if c >= BIG)

    def watched(self, module, forward):
        fetch(self, module, forward)
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        n, big = now()
        if n > peak[phase]:
            peak[phase], at_peak[phase] = n, [type(module).__name__, big]

    Coordinator.fetch_sub_module = watched
    return now


def main(job_path: str, out_dir: str, mode: str = "reentrant") -> None:
    import deepspeed
    import torch
    from transformers.integrations import HfDeepSpeedConfig

    job = json.loads(Path(job_path).read_text())
    deepspeed.init_distributed("gloo")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ds = ds_config(job, world)
    keep = HfDeepSpeedConfig(ds)  # what TrainingArguments(deepspeed=...) sets: is_deepspeed_zero3_enabled()
    model, vocab = build(job, ds, mode == "reentrant")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=ds)
    peak, at_peak = {}, {}
    now = watch(model, peak, at_peak)
    ids = torch.randint(0, vocab, (1, SEQ), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
    rows = []
    for step in range(STEPS + 1):
        peak.update(forward=0, backward=0)
        at_peak.clear()
        after_forward, after_backward = [], []
        for _ in range(ACCUM):
            loss = engine(**batch).loss
            after_forward.append(now())
            engine.backward(loss)
            after_backward.append(now())
            engine.step()
        rows.append(
            {"step": step, "peak": dict(peak), "at_peak": dict(at_peak), "after_forward": after_forward}
            | {"after_backward": after_backward}
        )
    out = {
        "rank": rank,
        "mode": mode,
        "versions": {m.__name__: m.__version__ for m in (torch, deepspeed)},
        "steps": rows,
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    del keep
    torch.distributed.barrier()


if __name__ == "__main__":
    main(*sys.argv[1:])
