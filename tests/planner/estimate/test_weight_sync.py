"""planner.estimate.weight_sync against the frameworks' own code where a rank need not run: ms-swift 4.6.0's
split_batches (the parameter groups its sync gathers, --move_model_batches) over Qwen2.5-7B built on the meta device,
and vLLM 0.29.0's packed broadcast (what rank 0 holds for a server) run on CPU tensors with every allocation traced
(probes.tracker). Both are read from the frameworks' venvs (MEMPLAN_SWIFT_PYTHON, MEMPLAN_OPENRLHF_PYTHON: `make
fwenv`), the function's own source executed here; each is exact (no tolerance: sizes are whole 512-byte blocks).
The ranks' gathers are measured in tests/probes/test_sync.py; here the phase as a plan carries it."""

import ast
import importlib.util
import os
import re
import sys
from contextlib import nullcontext
from math import ceil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from planner.config.roles import Roles
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import rl, rollout, weight_sync
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config

GIB = 2**30


def framework_file(env: str, relative: str) -> Path:
    """A file of the package in the venv whose python `env` names (skipped where it is not set)."""
    python = os.environ.get(env)
    if not python:
        pytest.skip(f"{env} is not set: the python of the framework's venv (make fwenv) holds the code checked here")
    found = sorted(Path(python).absolute().parents[1].glob(f"lib/python3*/site-packages/{relative}"))
    if not found:
        pytest.skip(f"{relative} is not in {env}'s venv")
    return found[0]


def method_source(path: Path, name: str) -> str:
    """One function's source out of a file, dedented to module level."""
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = ast.get_source_segment(path.read_text(), node, padded=True).splitlines()
    indent = len(lines[0]) - len(lines[0].lstrip())
    return "\n".join(line[indent:] for line in lines)


def swift_setup(batches: int | None, model=None) -> Setup:
    w = Workload(kind="grpo", generation="vllm-colocate", roles=Roles(move_model_batches=batches))
    knobs = Knobs(framework="swift", zero_stage=3, lora_rank=0, precision="bf16", workload=w)
    return Setup(model or load_model("qwen2.5-7b"), knobs, 1, 1, w.seq_len(), 8, 1)


def _tiny_llama4(step: int) -> dict:
    from probes.fsdp1 import TINY

    return {"model_type": "llama4_text", "interleave_moe_layer_step": step, **TINY, "num_hidden_layers": 6}


# (the model's config, move_model_batches): Qwen2.5-7B; a tiny Llama-4 text model of 6 layers whose routed and dense
# layers alternate (step 2: routed 1, 3, 5) or are all routed (step 1)
CASES = [
    *((None, b) for b in (None, 1, 4, 8, 28)),
    *(("llama4-2", b) for b in (2, 3, 6)),
    ("llama4-1", 2),
]


@pytest.mark.parametrize(("tiny", "batches"), CASES)
def test_swift_groups_are_its_split_batches(tiny, batches):
    """The largest group ms-swift's split_batches makes (rollout_mixin.py:535-642), in elements: the whole model, or
    ceil(28 / N) layers, or the embeddings, final norm and head (1.09B elements: the largest from 8 batches on).
    Where routed and dense layers alternate a group holds ceil(n / 2) routed layers at most (weight_sync.
    layer_group_params): 3 groups of 2 layers hold one routed each, 2 of 3 layers one or two, not n routed ones."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from planner.model.families import from_config

    path = framework_file("MEMPLAN_SWIFT_PYTHON", "swift/rlhf_trainers/rollout_mixin.py")
    scope = {
        "ModuleList": torch.nn.ModuleList,
        "MultiModelKeys": type("MultiModelKeys", (), {}),
        "ceil": ceil,
        "re": re,
    }
    exec(method_source(path, "split_batches"), scope)  # noqa: S102 - ms-swift's own function, its venv cannot import it
    config = _tiny_llama4(int(tiny[-1])) if tiny else model_config("qwen2.5-7b")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config))
    model.model_meta = SimpleNamespace(model_arch=None)  # a text model: no tower to set apart
    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        model=model,
        args=SimpleNamespace(move_model_batches=batches),
        rollout_enable_lora=False,
    )
    groups, _ = scope["split_batches"](trainer)
    numel = {n: p.numel() for n, p in model.named_parameters()}
    largest = max(sum(numel[n] for n in g) for g in groups)
    s = swift_setup(batches, from_config(config, "probe") if tiny else None)
    assert weight_sync.swift_group_bytes(s) == 2 * largest
    assert weight_sync.sync_gather_bytes(s) == 2 * largest  # ZeRO-3 on 8 ranks: the group's full copy


class _Torch:
    """torch as vLLM's producer sees it, with CUDA's streams as no-ops (the CPU has none)."""

    cuda = SimpleNamespace(stream=lambda _s: nullcontext())
    accelerator = SimpleNamespace(current_device_index=lambda: 0)

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.mark.parametrize("tensors,limit", [(16, 3), (2, 3), (7, 2)])
def test_vllm_packed_broadcast_holds_what_the_send_term_says(tensors, limit):
    """vLLM's packed_nccl_broadcast_producer over `tensors` gathered copies of 64 KiB each, its chunk `limit` of
    them: the peak is the packing list and its torch.cat beside the previous chunk in flight, plus the gather held."""
    from probes.tracker import LiveBytes

    path = framework_file("MEMPLAN_OPENRLHF_PYTHON", "vllm/distributed/weight_transfer/packed_tensor.py")
    spec = importlib.util.spec_from_file_location("vllm_packed_tensor", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    mod.torch = _Torch()
    mod._get_streams = lambda _device, n: tuple(SimpleNamespace(synchronize=lambda: None) for _ in range(n))
    size = 64 << 10

    def gathered():  # as TRL's sync yields them: a fresh copy per parameter, let go when the next is asked for
        for i in range(tensors):
            t = torch.ones(size // 2, dtype=torch.bfloat16)
            yield f"p{i}", t
            del t

    group = SimpleNamespace(broadcast=lambda tensor, src: None)
    with LiveBytes() as t:
        mod.packed_nccl_broadcast_producer(gathered(), group, 0, lambda item: item[1], buffer_size_bytes=limit * size)
    term = weight_sync.packed_send_bytes(tensors * size, size, limit * size, copies=True)
    assert t.peak == term + size  # + the parameter the gather holds (sync_gather_bytes)


def test_the_sync_phase_of_a_colocated_7b():
    """Qwen2.5-7B, ZeRO-3 on 8 GPUs, TRL's colocated vLLM: the weight-sync phase holds what generation holds, with the
    largest parameter (the head, 152064 x 3584 in bf16) gathered; asleep (level 1) the engine holds its weights woken
    and its graphs; under LoRA the whole model is gathered."""
    model, cap = load_model("qwen2.5-7b"), 80 * GIB

    def phases(sleep=None, lora=0, generation="vllm-colocate"):
        w = Workload(kind="grpo", generation=generation, roles=Roles(sleep_level=sleep))
        s = Setup(model, Knobs(zero_stage=3, lora_rank=lora, workload=w), 2, 4, w.seq_len(), 8, 1)
        return s, rl.phase_terms(s, cap, rl.mem.breakdown(s, cap))

    s, p = phases()
    sync = p["weight-sync"]
    assert sync["sync_gather_bytes"] == 152064 * 3584 * 2
    assert sync["vllm_reserved_bytes"] == p["generation"]["vllm_reserved_bytes"] == int(0.3 * cap)
    assert sync["sync_merge_bytes"] == sync["sync_send_bytes"] == 0
    s, p = phases(sleep=1)
    woken = rollout.weights_bytes(model, s.knobs.workload.roles) + rollout.GRAPH_POOL_BYTES
    assert p["weight-sync"]["vllm_reserved_bytes"] == woken == model.params * 2 + GIB
    s, p = phases(lora=16)
    assert p["weight-sync"]["sync_gather_bytes"] == weight_sync.whole_model_bytes(s) > model.params * 2
    s, p = phases(generation="vllm-server")
    assert p["weight-sync"]["vllm_reserved_bytes"] == 0 < p["weight-sync"]["sync_send_bytes"]


def test_the_sync_knobs_out_of_place_are_one_line_errors():
    """--move-model-batches is ms-swift's and splits a sync to vLLM; a colocated engine's tensor-parallel group must
    divide the GPUs (TRL raises at start, vllm_generation.py:313-318)."""
    from planner import advise
    from planner.errors import BadInput

    batched = Workload(kind="grpo", generation="vllm-colocate", roles=Roles(move_model_batches=4))
    with pytest.raises(ValueError, match="give --framework swift"):  # pydantic's error, from BadInput
        Knobs(framework="trl", workload=batched)
    with pytest.raises(ValueError, match="needs --generation vllm-colocate or vllm-server"):
        Workload(kind="grpo", roles=Roles(move_model_batches=4))
    body = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 6, "framework": "trl", "zero": 3, "micro_batch": 1}
    body["workload"] = {"kind": "grpo", "num_generations": 6, "generation": "vllm-colocate", "roles": {"rollout_tp": 4}}
    with pytest.raises(BadInput, match="does not divide the 6 GPUs"):
        advise.check(advise.parse(advise.CheckRequest, body))


def test_a_plan_that_the_sync_breaks_says_so():
    """Qwen2.5-7B with LoRA under ZeRO-3 on 8 H100s, vLLM colocated at 0.7: training fits (71.3 GiB), the sync's
    whole-model gather beside the engine does not; the line names the gathered weights, not activations."""
    from planner import advise

    body = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 8, "framework": "trl", "zero": 3, "micro_batch": 1}
    body |= {"grad_accum": 16, "lora_rank": 16, "workload": {"kind": "grpo", "max_prompt_length": 512}}
    body["workload"] |= {
        "max_completion_length": 1024,
        "generation": "vllm-colocate",
        "vllm_gpu_memory_utilization": 0.7,
    }
    plan = advise.check(advise.parse(advise.CheckRequest, body)).plan
    m = plan.memory
    assert m.peak_phase == "weight-sync" and m.phases["weight-sync"] > m.phases["training: backward"]
    assert not plan.fits and "the weights gathered for the sync to vLLM" in plan.reason
