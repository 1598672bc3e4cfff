"""The flags that say what is trained on what: the model and GPUs, the sequence length or the dataset (--data and its
cuts), VLMs' images and videos; add_target_args also adds the knob and workload flags and the margin, network and
host-RAM settings `suggest` and `check` share."""

from __future__ import annotations

import argparse

from planner.cli.argtypes import margin, nonneg_int, number, positive_int
from planner.cli.knobargs import add_knob_args
from planner.cli.workloadargs import add_workload_args
from planner.config.knobfields import FIXED
from planner.config.spec import DEFAULT_HOST_RAM_GIB, DEFAULT_INTER_NODE_GBPS, DEFAULT_MARGIN


def add_target_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    p.add_argument(
        "--model",
        required=model_required,
        help="catalog name (`planner models`), config.json path, folder, or Hugging Face id (Org/Name: found as "
        "--config finds it, in the local caches, else its config.json fetched from the Hub; MEMPLAN_HUB=0: never)"
        + ("" if model_required else " (with --config: read from the config unless given)"),
    )
    p.add_argument("--gpu", required=True, help="catalog GPU (`planner gpus`) or 'local' (NVML)")
    p.add_argument(
        "--gpus-per-node",
        type=positive_int("--gpus-per-node"),
        default=None,
        help="GPUs per node (default 1; with --gpu local, all local GPUs)",
    )
    p.add_argument("--nodes", type=positive_int("--nodes"), default=1)
    p.add_argument(
        "--seq-len",
        type=positive_int("--seq-len"),
        default=None,
        help="maximum sequence length in tokens (text + image tokens); or --data",
    )
    add_data_args(p)
    add_image_args(p)
    add_video_args(p)
    add_knob_args(p, [k for k in FIXED if k != "workload"])
    add_workload_args(p)
    p.add_argument(
        "--margin",
        type=margin,
        default=None,
        help=f"fraction of GPU memory kept free (default {DEFAULT_MARGIN}; wider for a model family "
        "counted approximately)",
    )
    p.add_argument(
        "--inter-node-gbps",
        type=number("--inter-node-gbps"),
        default=DEFAULT_INTER_NODE_GBPS,
        help="network bandwidth per node in Gb/s (default 200, HDR InfiniBand)",
    )
    p.add_argument(
        "--host-ram-gb",
        type=number("--host-ram-gb"),
        default=DEFAULT_HOST_RAM_GIB,
        help="host RAM per node for offload, GiB (default 512)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_data_args(p: argparse.ArgumentParser) -> None:
    """--data and what reads it: the tokenizer, the cut, the sampler's seed, token-budget micro-batches."""
    p.add_argument(
        "--data",
        default=None,
        help="plan for this dataset's longest row (.jsonl/.json/.csv/.parquet or a datasets folder; `planner scan`)",
    )
    p.add_argument("--tokenizer", default=None, help="with --data: a local tokenizer folder")
    p.add_argument(
        "--max-length",
        type=positive_int("--max-length"),
        default=None,
        help="with --data: cut rows to this many tokens (the plan says how many it cuts)",
    )
    p.add_argument(
        "--seed",
        type=nonneg_int("--seed"),
        default=0,
        help="with --data: the bundled trainer's sampler seed (names the step a too-long row is drawn)",
    )
    p.add_argument(
        "--max-tokens-per-micro-batch",
        type=positive_int("--max-tokens-per-micro-batch"),
        default=None,
        help="token-budget batching: micro-batches of samples x padded width <= this many tokens",
    )


def add_image_args(p: argparse.ArgumentParser) -> None:
    """VLMs' images: a count per sample and its tokens, or the image rule and the processor's pixel settings
    (planner.search.imagefit)."""
    p.add_argument(
        "--image-rule",
        default=None,
        help="image tokens per image with --data or --images alone: qwen2-vl, qwen3-vl, internvl[:N], llava, "
        "llava-next, llava-onevision, gemma3[:pan-and-scan], idefics3, mllama or fixed:N (default: the model family's)",
    )
    p.add_argument("--min-pixels", type=positive_int("--min-pixels"), default=None, help="the Qwen rules' min_pixels")
    p.add_argument("--max-pixels", type=positive_int("--max-pixels"), default=None, help="the Qwen rules' max_pixels")
    p.add_argument(
        "--image-tokens",
        type=nonneg_int("--image-tokens"),
        default=None,
        help="VLMs: LLM-side image tokens per sample (part of --seq-len)",
    )
    p.add_argument(
        "--images",
        type=nonneg_int("--images"),
        default=None,
        help="VLMs: images per sample; alone, each at the worst case of its image rule's settings",
    )
    p.add_argument(
        "--tokens-per-image",
        type=nonneg_int("--tokens-per-image"),
        default=None,
        help="VLMs: LLM tokens per image (with --images)",
    )
    p.add_argument(
        "--images-within-length",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--images alone: a row longer than --seq-len is deleted, so its images share that many tokens",
    )


def add_video_args(p: argparse.ArgumentParser) -> None:
    """Qwen2-VL / Qwen2.5-VL videos from the video processor's settings (planner.search.videofit)."""
    p.add_argument("--videos", type=nonneg_int("--videos"), default=None, help="Qwen-VL: videos per sample")
    p.add_argument("--video-seconds", type=number("--video-seconds"), default=None, help="the longest video (seconds)")
    p.add_argument("--fps", type=number("--fps"), default=None, help="video frames sampled a second (default 2)")
    p.add_argument("--max-frames", type=positive_int("--max-frames"), default=None, help="default 768")
    p.add_argument("--video-min-pixels", type=positive_int("--video-min-pixels"), default=None, help="per frame")
    p.add_argument("--video-max-pixels", type=positive_int("--video-max-pixels"), default=None, help="per frame")
    p.add_argument(
        "--video-pixel-cap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="frames share a 115,200-token pixel budget (qwen-vl-utils; cap_pixels_per_frame)",
    )
