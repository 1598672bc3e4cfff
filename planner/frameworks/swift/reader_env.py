"""ms-swift's launch environment (planner/frameworks/swift/reader.py hands it here): the processes NPROC_PER_NODE x
NNODES start under torchrun, the GPUs each spreads the model over where CUDA_VISIBLE_DEVICES shows more (its MP:
device_map), DeepSpeed's refusal of that, a Ray `swift sft`'s workers (use_ray, device_groups), and
CELOSS_PARALLEL_SIZE's chunked loss. Cited in the 4.6.0 wheel (swift/...) and at the older tags named."""

from __future__ import annotations

import json
import re

from planner.errors import BadInput
from planner.intake import models
from planner.intake.collect import Collector, as_bool, as_int, count_devices, processes_fit_devices, show
from planner.intake.flags import Flag
from planner.model import catalog


def chunked_loss(c: Collector, env: dict[str, str], where: str) -> None:
    """CELOSS_PARALLEL_SIZE: ms-swift chunks its sequence-parallel loss by that many tokens (swift/trainers/utils.py:
    178-182) -> --loss chunked, planned at ms-swift's examples' 2,048 (planner.estimate.recipe_terms.SWIFT_CE_CHUNK)."""
    n = as_int(env.get("CELOSS_PARALLEL_SIZE", "0"))
    if not n or n <= 0:
        return
    source = f"{where} CELOSS_PARALLEL_SIZE={env['CELOSS_PARALLEL_SIZE']}"
    c.set("loss", "chunked", f"{source} (ms-swift's chunked loss under sequence parallel)", "CELOSS_PARALLEL_SIZE")
    if n != 2048:
        c.note(f"{source} (planned with chunks of 2048 tokens, a chunk's fp32 log-softmax and gradient)")


# The published checkpoints whose config.json has enable_audio_output true, by their thinker's catalog name: the
# catalog's whole config of each (the talker's and vocoder's shapes with the thinker's). Qwen3-Omni's -Thinking and
# -Captioner checkpoints are thinkers alone. Every catalog thinker with an audio tower is named here
# (tests/planner/frameworks/swift/test_reader.py).
WITH_TALKER = {
    "qwen2.5-omni-3b": "qwen2.5-omni-3b-with-talker",
    "qwen2.5-omni-7b": "qwen2.5-omni-7b-with-talker",
    "qwen3-omni-30b-a3b": "qwen3-omni-30b-a3b-with-talker",
}
THINKER_ONLY_IDS = ("-thinking", "-captioner")


def omni_talker(c: Collector, env: dict[str, str], where: str) -> None:
    """Qwen2.5-Omni and Qwen3-Omni (the catalog models with an audio tower): ms-swift 4.5.2 loads
    Qwen2_5OmniForConditionalGeneration whole (swift/model/models/qwen.py:1583-1586), Qwen3OmniMoeForConditional
    Generation too (:1790), with config.json's enable_audio_output unless ENABLE_AUDIO_OUTPUT overrides it (:1576-1580,
    :1784-1786): the talker and vocoder (Qwen2.5's fp32 token2wav, Qwen3's code2wav) resident and frozen. A published
    checkpoint read as its thinker is planned as its whole config (WITH_TALKER); ENABLE_AUDIO_OUTPUT=0 keeps the
    thinker; what cannot be planned so is refused in one line."""
    ref = c.get("model")
    try:
        spec = catalog.load_model(ref) if isinstance(ref, str) else None
    except BadInput:
        return
    if spec is None or not any(t.role == "audio" for t in spec.tensors):
        return
    value = env.get("ENABLE_AUDIO_OUTPUT", "").strip().lower()
    source = (
        f"{where} ENABLE_AUDIO_OUTPUT={show(env['ENABLE_AUDIO_OUTPUT'])}"
        if value
        else f"{where} no ENABLE_AUDIO_OUTPUT"
    )
    resident = spec.resident_params() > 0
    if value in ("0", "false"):
        if resident:
            raise BadInput(
                f"{source}: ms-swift drops the talker that {ref}'s config.json builds (enable_audio_output true, "
                "swift/model/models/qwen.py:1576-1580): set enable_audio_output false there to plan the thinker",
                "model",
            )
        return
    model_id = str(c.facts.get("model_id", ("",))[0]).lower()
    if resident or model_id.endswith(THINKER_ONLY_IDS) or ref not in catalog.model_names():
        return  # config.json says what is built (a folder's own), or a thinker-only checkpoint
    if models.given_model() is None:
        c.model = models.lookup(WITH_TALKER[ref])
        c.set(
            "model",
            WITH_TALKER[ref],
            f"{source}: ms-swift builds {ref}'s talker and vocoder beside the thinker, frozen and resident "
            "(swift/model/models/qwen.py:1576-1586; transformers enable_talker)",
            "ENABLE_AUDIO_OUTPUT",
        )


# ms-swift refuses --deepspeed where a process spreads the model over several GPUs (is_mp): "DeepSpeed is not
# compatible with MP" at every 2.x release (v2.0.0 swift/llm/utils/argument.py:423, v2.6.1 :1111-1115), "with
# `device_map`" in 3.x (v3.4.0 swift/llm/argument/train_args.py:181-182) and 4.6.0 (swift/arguments/sft_args.py:255)
DS_NOT_MP = "v2.6.1 swift/llm/utils/argument.py:1111-1115; v3.4.0 swift/llm/argument/train_args.py:181-182"


def world(c: Collector, env: dict[str, str], where: str, ds: Flag | None = None, *, mp: bool = True) -> int:
    """Processes: NPROC_PER_NODE x NNODES under torchrun (swift/cli/main.py:30-35), else one; with more visible GPUs
    than processes each process spreads the model over its share (device_map), except under --deepspeed (`ds`),
    which ms-swift refuses there (DS_NOT_MP): a DeepSpeed run that ran had one process a visible GPU, NPROC_PER_NODE
    from the shell that launched it, and is planned so, said in a line. `mp` False: no device_map (3.x GRPO with an
    engine, reader_3x.fast_inference)."""
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if "NPROC_PER_NODE" not in env and ds is not None and visible and visible >= 2:
        source = (
            f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} with {ds.source} and no NPROC_PER_NODE: "
            f"ms-swift refuses DeepSpeed over one process's several GPUs ({DS_NOT_MP}), so a run that ran had one "
            "process a GPU"
        )
        c.set("gpus_per_node", visible, source, "NPROC_PER_NODE")
        c.note(
            f"{where} no NPROC_PER_NODE in the file: planned with NPROC_PER_NODE={visible} from the launching shell "
            f"(without it ms-swift stops at start: DeepSpeed is not compatible with MP, {DS_NOT_MP})"
        )
        n = visible
    elif "NPROC_PER_NODE" in env:
        source = f"{where} NPROC_PER_NODE={show(env['NPROC_PER_NODE'])}"
        n = c.number("gpus_per_node", env["NPROC_PER_NODE"], source, "NPROC_PER_NODE") or 1
        processes_fit_devices(n, env, source, c)
    else:
        c.set("gpus_per_node", 1, f"{where} no NPROC_PER_NODE (one process: swift/cli/main.py:30-35)", "NPROC_PER_NODE")
        n = 1
    n *= device_map(c, env, where, n) if mp else 1
    nodes = (
        c.number("nodes", env["NNODES"], f"{where} NNODES={show(env['NNODES'])}", "NNODES") if "NNODES" in env else 1
    )
    return n * (nodes or 1)


def device_map(c: Collector, env: dict[str, str], where: str, processes: int) -> int:
    """ms-swift's MP: where a node's visible GPUs are at least twice its processes, each process loads the model
    with device_map "auto" over visible // processes GPUs (is_mp, swift/utils/env.py:64-75; get_default_device_map,
    swift/model/utils.py:229-246), and with several processes runs DDP over those groups (is_mp_ddp, env.py:78-84)."""
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if not visible or visible // processes < 2 or visible % processes:
        return 1
    per = visible // processes
    source = (
        f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} with {processes} process(es) a node (ms-swift's "
        f"device_map over {per} GPUs a process: swift/utils/env.py:64-75)"
    )
    c.set("device_map", per, source, "CUDA_VISIBLE_DEVICES")
    c.set("gpus_per_node", visible, source, "CUDA_VISIBLE_DEVICES")
    return per


# a Ray group's ranks: a count, a list, or the Python text ms-swift evaluates (swift/ray_utils/resource_manager.py:38-46)
RANGE = re.compile(r"^\s*(?:list\()?\s*range\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*\)?\s*$")


def ray_world(c: Collector, f: dict[str, Flag], sub: str) -> int | None:
    """`swift sft` with --use_ray true: swift/cli/sft.py:17-18 starts one Ray worker a rank of the device group whose
    workers hold `default` (SwiftSft, swift/pipelines/train/sft.py:21), WORLD_SIZE the group's ranks, one GPU each
    (swift/ray_utils/base.py:274-293), nodes ceil(ranks / nproc_per_node) (resource_manager.py:26, 51); None where the
    run is not one (other subcommands take no Ray: only sft.py and sample.py call try_init_ray)."""
    ray = f.get("use_ray")
    if sub != "sft" or ray is None or not as_bool(ray.value) or "device_groups" not in f:
        return None
    flag = f["device_groups"]
    groups = flag.value
    if isinstance(groups, str):
        try:
            groups = json.loads(groups)
        except ValueError:
            groups = None
    group = next(
        (g for g in (groups or {}).values() if isinstance(g, dict) and "default" in (g.get("workers") or ())), None
    )
    per = as_int((groups or {}).get("nproc_per_node"))
    ranks = _ranks(group.get("ranks")) if group else None
    if not ranks or not per or ranks % min(per, ranks):
        c.note(
            f"{flag.source} (the Ray group running SwiftSft is not read: planned as the processes NPROC_PER_NODE starts)"
        )
        return None
    source = (
        f"{ray.source}; {flag.source} (Ray: one worker a rank of the `default` group, swift/ray_utils/base.py:274-293)"
    )
    c.set("gpus_per_node", min(per, ranks), source, "device_groups")
    c.set("nodes", ranks // min(per, ranks), source, "device_groups")
    return ranks


def _ranks(value: object) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple)):
        return len(value)
    m = RANGE.match(str(value))
    return max(0, int(m.group(2)) - int(m.group(1))) if m else None


def sp_padded(c: Collector) -> None:
    """--sequence_parallel_size N with a max_length not a multiple of N: ms-swift pads each row's tokens to a multiple
    of N before splitting it (v4.5.2 swift/sequence_parallel/sequence_parallel.py:385-396), so its longest row is
    max_length rounded up to one (sequence_parallel_qwen3_5.sh's 65535 under 4 ranks runs 65536-token rows)."""
    sp = c.get("sequence_parallel")
    field = next((f for f in ("seq_len", "workload.max_length") if c.setting(f) is not None), None)
    if (
        not isinstance(sp, int)
        or sp < 2
        or field is None
        or not isinstance(c.get(field), int)
        or c.get(field) % sp == 0
    ):
        return
    s = c.setting(field)
    up = -(-s.value // sp) * sp
    c.set(
        field,
        up,
        f"{s.source} (each row padded to a multiple of sequence_parallel_size {sp}: {up}, "
        "swift/sequence_parallel/sequence_parallel.py:385-396)",
        s.key,
    )
