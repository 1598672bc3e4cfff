"""torch's nn.DataParallel (planner/estimate/dataparallel.py): GPU 0's gathered logits against torch's concatenation of
the replicas' logits, measured by size on the meta device (comm.gather's result: "a tensor located on destination
device, that is a result of concatenating tensors along dim"; its CUDA kernel is not in a CPU build), the plan's
GPU 0 against a DDP rank's, the logits' dtype by transformers release, and the refusals."""

import pytest

from planner import advise
from planner.errors import BadInput
from planner.estimate import dataparallel

GiB = 2**30
T, V = 2048, 151936  # qwen2.5-0.5b's vocabulary


@pytest.mark.parametrize(("replicas", "rows", "dtype"), [(2, 1, "float32"), (8, 1, "float32"), (4, 3, "bfloat16")])
def test_gathered_logits_are_every_replicas_logits_concatenated(replicas, rows, dtype):
    torch = pytest.importorskip("torch")
    kind = getattr(torch, dtype)
    logits = [torch.empty(rows, 8192, 128256, dtype=kind, device="meta") for _ in range(replicas)]
    gathered = torch.cat(logits, dim=0)  # DataParallel's dim 0 (data_parallel.py: gather(outputs, device, dim=0))
    assert dataparallel.gathered_logits_bytes(replicas, rows, 8192, 128256, kind.itemsize) == gathered.nbytes


def plan(alternatives=False, **kw):
    body = {"model": "qwen2.5-0.5b", "gpu": "a100-80gb", "micro_batch": 1, "seq_len": T, "gpus_per_node": 4}
    body |= {"checkpointing": "full", "framework": "hf", "precision": "bf16", "optimizer": "adamw", **kw}
    return advise.check(advise.parse(advise.CheckRequest, body), alternatives=alternatives).plan


def test_gpu0_holds_a_ddp_ranks_memory_and_every_replicas_logits_at_the_gather():
    ddp, dp = plan(), plan(dataparallel=True)
    grads = ddp.memory.detail["model_states_bytes"] - dp.memory.detail["model_states_bytes"]  # DDP's buckets
    assert grads > 0 and dp.memory.phases["optimizer-step"] == ddp.memory.phases["optimizer-step"] - grads
    assert dp.sharding == "DataParallel"
    # the forward phase grows by one replica's logits (bf16 under 5.x) a GPU added
    eight = plan(dataparallel=True, gpus_per_node=8)
    assert eight.memory.phases["forward"] - dp.memory.phases["forward"] == 4 * T * V * 2
    # transformers 4.x through 4.45 returns fp32 logits (the 4 line planned the hungrier way): replica 0's and the
    # gathered copy of each of the 4 replicas at 4 bytes, not 2
    old = plan(dataparallel=True, framework="hf@4")
    assert old.memory.phases["forward"] - dp.memory.phases["forward"] == (1 + 4) * 2 * T * V
    # the gradient sum: replica 0's gradients beside their sum (a second copy once .grad holds the earlier ones)
    once, twice = plan(dataparallel=True, grad_accum=1), plan(dataparallel=True, grad_accum=4)
    end = {n: p.memory.phases["end-of-backward"] for n, p in (("once", once), ("twice", twice), ("ddp", ddp))}
    assert end["twice"] - end["once"] == grads and end["once"] == end["ddp"]  # DDP: its buckets, DP: replica 0's


def test_a_lf_07_run_plans_it_and_later_lines_and_other_splits_are_refused_in_one_line():
    ddp = plan(framework="llamafactory@0.7.1", lora_rank=8)
    lf = plan(True, dataparallel=True, framework="llamafactory@0.7.1", lora_rank=8)  # with its launch
    buckets = ddp.memory.detail["model_states_bytes"] - lf.memory.detail["model_states_bytes"]
    # at the gather, in place of the backward start's 12 bytes a logit (activations.logits_loss_bytes): replica 0's
    # fp32 logits and saved log-softmax (4 + 4), and the four replicas' fp32 logits gathered (4 x 4)
    gathered = lf.memory.phases["forward"] - ddp.memory.phases["backward"]
    assert gathered == (4 + 4 + 4 * 4 - 12) * T * V - buckets and lf.memory.peak_phase == "forward"
    assert lf.launch.command.startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 llamafactory-cli train")
    cases = [
        ({"zero_stage": 2}, "--dataparallel with --zero 2"),
        ({"nodes": 2}, "one process on one node"),
        ({"framework": "llamafactory", "lora_rank": 8}, "before v0.8.0 only"),
        ({"framework": "swift"}, "cannot run --dataparallel on"),  # ms-swift places a device_map instead
        ({"framework": "accelerate"}, "cannot run --dataparallel on"),  # the launchers: a process a GPU
        ({"framework": "deepspeed"}, "cannot run --dataparallel on"),
    ]
    for extra, message in cases:
        with pytest.raises(BadInput, match=message) as e:
            plan(dataparallel=True, **extra)
        assert "\n" not in str(e.value)


def test_evaluation_gathers_every_replicas_logits_too():
    """HF's prediction_step runs the wrapped model, which gathers the replicas' logits as in training (beside the
    no-grad forward's transient a DDP rank holds, planner.estimate.nograd)."""
    quiet, evaluating = plan(lora_rank=8), plan(lora_rank=8, eval_batch=2)
    dp_quiet, dp_eval = plan(lora_rank=8, dataparallel=True), plan(lora_rank=8, eval_batch=2, dataparallel=True)
    ddp_more = evaluating.memory.phases["evaluation"] - quiet.memory.phases["load"]
    dp_more = dp_eval.memory.phases["evaluation"] - dp_quiet.memory.phases["load"]
    assert dp_more - ddp_more == 4 * 2 * T * V * 2  # four replicas' two rows of bf16 logits (transformers 5)
