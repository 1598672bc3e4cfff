"""OpenRLHF-M (github.com/OpenRLHF/OpenRLHF-M, main at 2bf6337, 2025-03-10), OpenRLHF's multimodal fork, the code
LMM-R1 merged into (LMM-R1's README: "[2025/3/11] Our codebase is merged into OpenRLHF-M") and MM-Eureka's qwen
branch grew from: its own `openrlhf/` package (version.txt 0.6.1.post1; requirements.txt deepspeed==0.16.4,
transformers at git 2ab7bdc), launched as `python3 -m openrlhf.cli.train_ppo_ray`. Its cli/train_ppo_ray.py is
OpenRLHF v0.6.1.post1's line for line (`diff` against the tag: 14 lines, all below) but for
- --freeze_prefix (:340-342): parameters whose names start with a prefix take no gradient (trainer/ray/ppo_actor.py:
  319-327, before DeepSpeed wraps the actor);
- --max_pixels / --min_pixels (:344-345, 640 x 28 x 28 and 4 x 28 x 28): each image's bounds, on the processor
  (models/lmm_kits/utils.py:12-15, base/data_processor.py:28-46) and on vLLM's (experience_maker.py:840-844);
- --drop_maxlen (:343, no memory of its own), and --pretrain_data dropped with a warning (:446-448).
MM-Eureka's qwen branch (bccddd7) takes these four with the same defaults, and its own (mmeureka.SIGNS: the accuracy
filter, --use_dapo, --use_adora) on top; LMM-R1 main none of the three. Its actor loads a model through the kit of its
model_type (models/actor.py:77-79, lmm_kits/utils.py:5-10, 34-42): qwen2_5_vl's alone. Its defaults are v0.6.1.post1's,
the flat 0.8 line's values (--micro_train_batch_size 4, --bf16 and --flash_attn off), cited at its own file. A script
names it by one of the three flags beside the reward server only it and LMM-R1 ship (`python -m
openrlhf.models.remote_rm.math_verifier`; MM-Eureka ships none) (planner.frameworks.openrlhf.reader_flags)."""

from __future__ import annotations

from planner.frameworks.base import Release
from planner.frameworks.openrlhf.mmeureka import FLAT, fork_release, read_only

WHO = "OpenRLHF-M 2bf6337"
CLI = f"{WHO} openrlhf/cli/train_ppo_ray.py"
# the flags it shares with MM-Eureka's qwen branch alone (no OpenRLHF release, no LMM-R1 line takes them)
SIGNS = {"drop_maxlen": 343, "max_pixels": 344, "min_pixels": 345}
# the reward server of LMM-R1's it ships too (openrlhf/models/remote_rm/math_verifier.py; no sokoban_verifier)
SERVER = "openrlhf.models.remote_rm.math_verifier"
PIXELS = {"max_pixels": (640 * 28 * 28, 344), "min_pixels": (4 * 28 * 28, 345)}
READ_ONLY = read_only("OpenRLHF-M", "0.6.1.post1")


def openrlhf_m(keys: dict[str, str], rules: tuple, runs: dict) -> Release:
    """OpenRLHF-M's release: OpenRLHF's flat `keys` and the 0.8 line's `rules` (0.6.1.post1's flags are that
    line's), its adapter running OpenRLHF's `runs` with the vision tower and merger frozen too (--freeze_prefix)."""
    return fork_release(
        "openrlhf-m",
        CLI,
        "OpenRLHF v0.6.1.post1's with multimodal rollouts and its own flags: :340-345",
        dict(zip(FLAT, (312, 273, 267, 299, 301, 302))),
        "OpenRLHF-M: OpenRLHF 0.6.1.post1's flat flags, images within --max_pixels (640 x 28 x 28 pixels)",
        READ_ONLY,
        (keys, rules, runs),
    )
