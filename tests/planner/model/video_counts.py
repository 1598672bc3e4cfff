"""Run by tests/planner/model/test_video_rules.py in a Python with torchvision (MEMPLAN_VIDEO_PYTHON): the real
Qwen2VLVideoProcessor's token count (video_grid_thw's product over the 2 x 2 merge) for each case read as JSON on
stdin, printed as a JSON list. Frames are blank arrays of the case's size; the processor samples and resizes them."""

import json
import sys

import numpy as np
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.video_utils import VideoMetadata


def tokens(case: dict) -> int:
    frames = int(case["seconds"] * case["native_fps"])
    video = np.zeros((frames, case["height"], case["width"], 3), dtype=np.uint8)
    meta = VideoMetadata(total_num_frames=frames, fps=case["native_fps"], duration=case["seconds"])
    proc = Qwen2VLVideoProcessor(
        size={"shortest_edge": case["min_pixels"], "longest_edge": case["max_pixels"]},
        max_frames=case["max_frames"],
        cap_pixels_per_frame=case["cap"],
    )
    out = proc(videos=[video], video_metadata=[meta], do_sample_frames=True, fps=case["fps"], return_tensors="np")
    return int(np.prod(out["video_grid_thw"][0])) // 4


print(json.dumps([tokens(c) for c in json.loads(sys.stdin.read())]))
