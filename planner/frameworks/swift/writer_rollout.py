"""GRPO's vLLM placement as each ms-swift line takes it (writer.py asks): --vllm_mode from v3.5.0 (v3.5.0
swift/trainers/arguments.py:180; 4.x rlhf_trainers/args_mixin.py:170), and at the 3.4 line (written for 3.4.x, the line's
release of tools/fwenv_old.sh: 3.4.1) the words 3.4.x places the engine by (reader_3x.CHECK, v3.4.1
swift/llm/argument/rlhf_args.py:221-254): colocated, --num_infer_workers = the GPUs, which NPROC_PER_NODE is; on a GPU
of its own, --vllm_device auto with --num_infer_workers 1, the training GPUs NPROC_PER_NODE and one more visible (the
last, grpo_trainer.py:260-267). 3.4.x takes vLLM's tensor parallel size as --tensor_parallel_size (v3.4.1
swift/trainers/arguments.py:176; --vllm_tensor_parallel_size from v3.5.0, :189)."""

from __future__ import annotations

from planner.frameworks.swift.keys import KEYS

CHECK = "swift/llm/argument/rlhf_args.py:221-254"  # v3.4.1 (reader_3x.CHECK)
OLD_WORDS = ("3.4",)  # the written lines with no --vllm_mode at the release they are written for
# --vllm_mode server needs --vllm_server_host (`swift rollout`'s): without it 3.5-3.11 reset the mode to colocate
# (v3.5.0 swift/llm/argument/rlhf_args.py:160-169; v3.7.0 :211-220) and 4.x asserts (v4.5.2 swift/arguments/
# rlhf_args.py:451-452); the user's host, as --dataset is theirs
HOST = "YOUR_ROLLOUT_HOST"


def placement_flags(plan, procs: int) -> list[tuple[str, object]]:
    """The flags saying where vLLM runs, for a plan with `procs` training processes a node."""
    mode = plan.workload.generation.removeprefix("vllm-")
    if plan.knobs.release not in OLD_WORDS:  # server: the host, without which 3.5-3.11 colocate (HOST)
        return [KEYS.pair("workload.generation", mode), *([("vllm_server_host", HOST)] if mode == "server" else [])]
    if mode == "colocate":
        return [("num_infer_workers", procs)]
    return [("vllm_device", "auto"), ("num_infer_workers", 1)]


def tp_key(plan) -> str:
    """vLLM's tensor parallel size flag at the plan's line."""
    return "tensor_parallel_size" if plan.knobs.release in OLD_WORDS else KEYS.key("workload.roles.rollout_tp")


def engine_gpus(plan) -> int:
    """GPUs a node shows past the training ones: 3.4.x's own engine GPU (server at an old-words line), else 0."""
    own = plan.workload.kind == "grpo" and plan.workload.generation == "vllm-server"
    return int(own and plan.knobs.release in OLD_WORDS)


def pin_before(plan) -> tuple[int, ...] | None:
    """The release a plan in 3.4.x's words runs before (launch.pinned): 3.5.0, which colocates vLLM whatever they
    say (reader_3x.NOT_34) and whose 3.6 refuses them; None for any other plan."""
    uses = plan.workload.kind == "grpo" and plan.workload.generation != "hf"
    return (3, 5) if uses and plan.knobs.release in OLD_WORDS else None


def header(plan, procs: int) -> list[str]:
    """The script's comment on vLLM's placement: 3.4.x's words, or the rollout server's host to give."""
    if plan.workload.kind != "grpo" or plan.workload.generation == "hf":
        return []
    if plan.knobs.release not in OLD_WORDS:
        own = plan.workload.generation == "vllm-server"
        return ["# --vllm_server_host: where `swift rollout` serves the model, on GPUs of its own"] if own else []
    out = [f"# vLLM placed in ms-swift 3.4.x's words ({CHECK}); 3.5.x warns them deprecated and colocates, 3.6 refuses"]
    if engine_gpus(plan):
        out.append(f"# vLLM on GPU {procs}, past the {procs} training GPUs: each node shows {procs + 1}")
    return out
