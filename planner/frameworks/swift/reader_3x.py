"""ms-swift 3.x's own words that 4.x dropped, planned through 4.x's fields: GRPO's rollout placement before --vllm_mode
(v3.1.1 .. v3.4.x: --vllm_device, --num_infer_workers, --use_lmdeploy and its --lmdeploy_* flags) and 3.0-3.2's
--use_liger (3.3's --use_liger_kernel is 4.x's name, planner.frameworks.swift.keys).

GRPO before v3.5.0 (v3.4.1 cited; v3.2.2 the same lines less 3.3's external server): with --use_vllm or --use_lmdeploy
ms-swift sets USE_FAST_INFERENCE (swift/llm/argument/rlhf_args.py:134-135), which turns its device_map MP off
(swift/utils/env.py:67-68), and picks the mode from the node's GPUs (rlhf_args.py:221-254 _check_grpo): colocate where
--num_infer_workers (1 by default, swift/trainers/arguments.py:147) equals the visible GPUs (== NPROC_PER_NODE), an
engine on each training GPU; else async, the visible GPUs NPROC_PER_NODE training ones plus num_infer_workers of the
engines' own (:246-248; --vllm_device auto: the last num_infer_workers GPUs, one GPU alone shared,
trainers/rlhf_trainer/grpo_trainer.py:260-267). The engine is vLLM's, or LMDeploy's TurboMind (:289-309), built on
--vllm_device's GPUs: --lmdeploy_device is read only where vllm_device is empty (:260), and its default ['auto']
(arguments.py:149) never is. v3.1.x: one engine on GPU NPROC_PER_NODE (v3.1.1 grpo_trainer.py:113-119), the same
placement for the training GPUs. From v3.5.0 --vllm_mode says it (colocate by default, v3.5.0 arguments.py:180) and
vllm_device is ignored (v3.5.0 rlhf_args.py:283-284); 3.6 drops it.
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.frameworks.swift import reader_keys as swift_keys
from planner.intake.collect import Collector, accepted, as_bool, as_int, count_devices, one, show
from planner.intake.flags import Flag

# the flags only 3.1.1-3.4.x's GRPO takes (presets/keys_swift_lines.json: lines 3 and 3.4 "only")
OLD_ROLLOUT = (
    "vllm_device",
    "num_infer_workers",
    "use_lmdeploy",
    "lmdeploy_device",
    "lmdeploy_session_len",
    "lmdeploy_cache_max_entry_count",
)
CHECK = "v3.4.1 swift/llm/argument/rlhf_args.py:221-254"
TRAIN_TYPE = "train_type"  # ms-swift 3's name of --tuner_type
# 3.5.0-3.6.x, the rest of the 3.4 line: --vllm_mode colocate by default, reset to colocate without
# --vllm_server_host; num_infer_workers and vllm_device deprecated at 3.5 (v3.5.0 swift/trainers/arguments.py:178-182,
# llm/argument/rlhf_args.py:160-169, 283-296), gone at 3.6 (v3.6.0 trainers/arguments.py:159)
NOT_34 = "3.5-3.6 colocate it (--vllm_mode colocate by default, v3.5.0 swift/trainers/arguments.py:180)"
# LMDeploy's KV pool: cache_max_entry_count (0.8, v3.4.1 swift/trainers/arguments.py:173) of the FREE memory when
# TurboMind starts (TurbomindEngineConfig, lmdeploy/messages.py, from lmdeploy 0.2.1; ms-swift passes it through,
# v3.4.1 swift/llm/infer/infer_engine/lmdeploy_engine.py:78, 111-113), after the trainer's model is on the card
LMDEPLOY_SHARED = (
    "LMDeploy's engine on the training GPUs (num_infer_workers = the GPUs, {check}): its "
    "KV pool is lmdeploy_cache_max_entry_count of the memory free when it starts, which memplan does not plan; "
    "accepted: --use_vllm true (vLLM's share, vllm_gpu_memory_utilization), or LMDeploy on GPUs of its own"
)
# ms-swift 3.0-3.2's --use_liger: apply_liger(model_type) before the tuner (v3.2.2 swift/llm/train/tuner.py:338-340),
# Liger's apply_liger_kernel_to_<arch>() with its defaults, fused_linear_cross_entropy among them (the class forward
# swapped for the fused head and loss), for these architectures only; any other raises (tuner.py:18-45). Matched
# by the config's model_type (ms-swift matches its own names: a qwen2 checkpoint it names otherwise, QwQ's, raises)
LIGER_ARCHS = ("llama", "mistral", "mixtral", "gemma", "gemma2", "qwen2", "phi3", "mllama", "qwen2_vl")
LIGER_CITE = "v3.2.2 swift/llm/train/tuner.py:18-45, 338-340"


def lines_taking(f: dict[str, Flag], lines: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """Of release lines `lines`, those taking every flag given that some of them take and others do not
    (presets/keys_swift_lines.json for the 3.x lines, 4.x's keys at the 4 line): 3.1.1-3.4.x's OLD_ROLLOUT, 3.0-3.2's
    --use_liger, 3.5's --vllm_mode ...; and the flags that narrowed them. A flag no line takes narrows nothing, and
    flags no one line takes all of leave `lines` as they are (the reading's notes name them)."""

    def takes(line: str, k: str) -> bool:  # the 4 line: 4.0.x keeps --train_type as an alias (keys.TRAIN_TYPE_LINES)
        return swift_keys.takes(line, k) if line in swift_keys.LINES_HELD else k in accepted("swift") or k == TRAIN_TYPE

    own = [k for k in f if len({takes(line, k) for line in lines}) == 2]
    kept = tuple(line for line in lines if all(takes(line, k) for k in own))
    return (kept, ", ".join(f"--{k}" for k in own)) if kept else (lines, "")


def applies(f: dict[str, Flag], line: str) -> bool:
    """Whether GRPO's rollout is read in 3.1.1-3.4.x's words: at the 3 line always (no --vllm_mode before v3.5.0);
    at the 3.4 line (3.4-3.6, read at 3.4.1, its release of tools/fwenv_old.sh) where --vllm_mode is not given, a bare
    --use_vllm true too: 3.4.x places it by num_infer_workers (CHECK); 3.5-3.6 colocate it (NOT_34)."""
    return line == "3" or (line == "3.4" and "vllm_mode" not in f)


def engine(f: dict[str, Flag]) -> str:
    """'vllm', 'lmdeploy' (use_vllm first: v3.4.1 grpo_trainer.py:280, 289) or '' (ms-swift's own PtEngine)."""
    for key, name in (("use_vllm", "vllm"), ("use_lmdeploy", "lmdeploy")):
        if key in f and as_bool(one(f[key].value)):
            return name
    return ""


def fast_inference(f: dict[str, Flag], line: str) -> bool:
    """ms-swift 3.x's USE_FAST_INFERENCE: a 3.1.1-3.4.x GRPO run with an engine, whose processes are never spread
    over several GPUs by device_map (v3.4.1 swift/utils/env.py:67-68)."""
    rlhf = str(one(f["rlhf_type"].value)) if "rlhf_type" in f else ""
    return rlhf == "grpo" and applies(f, line) and bool(engine(f))


def placement(c: Collector, f: dict[str, Flag], env: dict[str, str], line: str = "3") -> str:
    """'colocate' or 'server' (the engines on GPUs of their own) for a 3.1.1-3.4.x run with an engine, read at release
    line `line`; what ms-swift refuses or memplan cannot plan is one line."""
    name = engine(f)
    src = f[f"use_{name}"].source
    if "vllm_server_host" in f:  # an external `swift deploy` (v3.4.1 rlhf_args.py:186-192)
        return "server"
    procs = int(c.get("gpus_per_node", 1))
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", "")) or None
    nw = f.get("num_infer_workers")
    workers = as_int(one(nw.value)) if nw is not None else 1
    if workers is None or workers < 1:
        raise BadInput(f"{nw.source}: num_infer_workers must be a whole number of GPUs, 1 or more", "gpus_per_node")
    shared = workers == procs and visible in (None, procs)
    if shared and name == "lmdeploy":
        raise BadInput(f"{src}: {LMDEPLOY_SHARED.format(check=CHECK)}", "workload")
    if not shared and visible is not None and visible != procs + workers:
        raise BadInput(
            f"{src} with NPROC_PER_NODE={procs}, CUDA_VISIBLE_DEVICES={show(env['CUDA_VISIBLE_DEVICES'])} and "
            f"num_infer_workers {workers}: ms-swift asserts the GPUs are the training ones plus the engines' "
            f"({CHECK}): accepted: {procs + workers} visible GPUs, or NPROC_PER_NODE = num_infer_workers = the GPUs "
            "(colocated), or --vllm_mode colocate (ms-swift 3.5-3.6)",
            "gpus_per_node",
        )
    if not any(k in f for k in ("vllm_device", "num_infer_workers", "vllm_server_host")):
        how = "colocated" if shared else "on a GPU of its own"
        later = f"; {NOT_34}" if line == "3.4" else ""
        c.note(f"{src} (no --num_infer_workers: 1, the engine {how} as 3.x places it, {CHECK}{later})")
    if not shared:
        _own_devices(f, procs)
        if visible is None:
            c.note(
                f"{src} (no CUDA_VISIBLE_DEVICES: the node taken to have the {procs + workers} GPUs ms-swift asserts, "
                f"{procs} training and {workers} for the engines, {CHECK})"
            )
    return "colocate" if shared else "server"


def _own_devices(f: dict[str, Flag], procs: int) -> None:
    """--vllm_device in async mode: auto, or GPUs past the NPROC_PER_NODE training ones (cuda:N, N >= procs)."""
    if "vllm_device" not in f:
        return
    value = f["vllm_device"].value
    devices = [str(d) for d in (value if isinstance(value, list) else [value])]
    if devices == ["auto"]:
        return
    index = [as_int(d.rpartition(":")[2]) for d in devices]
    if any(i is None or i < procs for i in index):
        raise BadInput(
            f"{f['vllm_device'].source}: an engine on a training GPU beside engines of their own is not planned; "
            f"accepted: auto, or GPUs from cuda:{procs} (past the {procs} training ranks)",
            "workload",
        )


def set_placement(c: Collector, f: dict[str, Flag], mode: str) -> None:
    """workload.generation for the placement read, with what the 3.x engine is said in its source."""
    name = engine(f)
    src = f[f"use_{name}"].source
    how = {
        "colocate": "an engine on each training GPU (num_infer_workers = the GPUs)",
        "server": "the engine on GPUs of its own, the training world NPROC_PER_NODE",
    }[mode]
    if name == "lmdeploy":
        how += (
            "; LMDeploy's TurboMind there: the training GPUs hold none of it, as of a vLLM server; its GPUs not planned"
        )
    c.set("workload.generation", f"vllm-{mode}", f"{src} (ms-swift {CHECK}: {how})", f"--use_{name}")
    if mode == "server" and "vllm_server_host" not in f:
        c.note(
            f"{src} (ms-swift 3.x loads each parameter group into its in-process engine, load_weights, v3.4.1 "
            "grpo_trainer.py:571-626: planned with 4.x's 512 MiB send bucket on rank 0, a bound)"
        )
    if "lmdeploy_device" in f:
        c.note(f"{f['lmdeploy_device'].source} (ignored: the engine goes on --vllm_device's GPUs, auto by default)")
    for key in ("lmdeploy_session_len", "lmdeploy_cache_max_entry_count"):
        if key in f:
            why = "the LMDeploy engine's own GPU: not planned" if name == "lmdeploy" else "no LMDeploy engine: unused"
            c.note(f"{f[key].source} ({why})")


def liger(c: Collector, flag: Flag) -> None:
    """3.0-3.2's --use_liger (the key table reads it as --use_liger_kernel): the model's architecture must be one
    apply_liger patches (LIGER_ARCHS), else ms-swift raises and so does memplan, in one line."""
    if not as_bool(one(flag.value)) or c.model is None:
        return
    arch = str(c.model.config.get("model_type", ""))
    if arch not in LIGER_ARCHS:
        raise BadInput(
            f"{flag.source}: ms-swift 3.0-3.2's apply_liger takes {', '.join(LIGER_ARCHS)} models, not {arch} "
            f"({LIGER_CITE}: ValueError)",
            "loss",
        )
