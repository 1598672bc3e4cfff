"""LMM-R1 (github.com/TideDra/lmm-r1, main at f917f18, 2025-04-29), the multimodal fork of OpenRLHF that MM-Eureka
came from: its own `openrlhf/` package (version.txt 0.7.3a; requirements.txt transformers==4.51.3, deepspeed==0.16.7),
launched as `python -m openrlhf.cli.train_ppo_ray` (examples/scripts/lmm_r1/*.sh). Its cli/train_ppo_ray.py is
OpenRLHF v0.7.3's line for line (`diff` against the v0.7.3 tag: 35 lines, all below) but for its own flags:
- --freeze_prefix (:342-344): parameters whose names start with a prefix take no gradient
  (trainer/ray/ppo_actor.py:431-440); MM-Eureka's copy takes it too, OpenRLHF none;
- --processor_kwargs (:345), a JSON object whose min_pixels / max_pixels bound each image, 4 x 28 x 28 and
  16384 x 28 x 28 where it names none (:481-490), on its processor (models/lmm_kits/base/data_processor.py:82-83, 100-117)
  and on vLLM's (trainer/ppo_utils/experience_maker.py:684-688);
- --limit_mm_per_prompt (:235, a JSON object parsed at :492-497 and handed to vLLM's engines at :64): the images a
  row may hold (image_limit); --exclude_modules (:284, LoRA's, no PPO reader takes it), --max_global_steps (:290), --store_extra_buffers (:293), --custom_experience_filter (:380): which
  samples train, no memory of their own; --eval_split (:391; OpenRLHF's from v0.7.4).
Its defaults are v0.7.3's, the flat 0.8 line's values (--micro_train_batch_size 4, --bf16 and --flash_attn off),
cited here at LMM-R1's own file. The flags only it takes (SIGNS), or a script that starts its reward servers
(`python -m openrlhf.models.remote_rm.math_verifier`: MODULE, files no OpenRLHF release and no MM-Eureka branch
ships; OpenRLHF-M ships math_verifier too, openrlhfm), name it (planner.frameworks.openrlhf.reader_flags)."""

from __future__ import annotations

from planner.frameworks import mmlimit
from planner.frameworks.base import Release
from planner.frameworks.openrlhf.mmeureka import FLAT, fork_release, read_only

WHO = "lmm-r1 f917f18"
CLI = f"{WHO} openrlhf/cli/train_ppo_ray.py"
# flags no OpenRLHF release (v0.5.0 .. 0.11.2 cli/train_ppo_ray.py) and no MM-Eureka branch takes -> LMM-R1's line
SIGNS = {
    "limit_mm_per_prompt": 235,
    "exclude_modules": 284,
    "max_global_steps": 290,
    "store_extra_buffers": 293,
    "processor_kwargs": 345,
    "custom_experience_filter": 380,
}
# taken by LMM-R1 (:342) and MM-Eureka's qwen branch (its cli/train_ppo_ray.py:340), by no OpenRLHF release
SHARED = {"freeze_prefix": 342}
# its reward servers' modules (openrlhf/models/remote_rm/math_verifier.py, sokoban_verifier.py)
MODULE = "openrlhf.models.remote_rm."
# its pixel bounds where --processor_kwargs names none: key -> (default, line)
PIXELS = {"max_pixels": (16384 * 28 * 28, 488), "min_pixels": (4 * 28 * 28, 487)}
READ_ONLY = read_only("LMM-R1", "0.7.3")


def module_sign(commands) -> str | None:
    """`FILE:LINE python -m openrlhf.models.remote_rm.X` where a command of the launch script (`commands`:
    planner.intake.shell.Command) starts one of LMM-R1's reward servers, else None."""
    for cmd in commands:
        words = cmd.argv
        hit = next((w for w in words if w.startswith(MODULE)), None)
        if hit is not None and "-m" in words:
            return f"{cmd.path.name}:{cmd.line} python -m {hit}"
    return None


def image_limit(flags: dict) -> tuple[int, str] | None:
    """--limit_mm_per_prompt: (the images a row may hold, where read), None where not given (vLLM's limit, 1). A row's
    rollout takes every image of its messages (trainer/ppo_utils/experience_maker.py:683-688, models/lmm_kits/base/
    data_processor.py:151-156), so a row holds up to the limit (planner.frameworks.mmlimit); other modalities are
    not passed (`flags`: planner.intake.flags.Flag by name)."""
    f = flags.get("limit_mm_per_prompt")
    if f is None:
        return None
    value = f.value[-1] if isinstance(f.value, list) else f.value  # the last where given twice
    n = mmlimit.image_limit(value, f.source, "a JSON object such as '{\"image\": 4}' (vLLM's limit_mm_per_prompt)")
    rows = f"{WHO} openrlhf/trainer/ppo_utils/experience_maker.py:683-688, every image of a row's messages"
    return n, f"{f.source} (up to {n} image{'s' if n != 1 else ''} a row: vLLM refuses more, {CLI}:64; {rows})"


# LMM-R1 hands vLLM a row's images only: {"image": imgs} (f917f18 openrlhf/trainer/ppo_utils/experience_maker.py:683-686;
# dev@2e98315 the same at :686-689), the videos process_vision_info returns dropped (models/lmm_kits/base/
# data_processor.py:151-156, both), so a limit's other keys bound nothing it passes
IMAGES_ONLY = (
    f"{WHO} passes vLLM a row's images only, openrlhf/trainer/ppo_utils/experience_maker.py:683-686, "
    "models/lmm_kits/base/data_processor.py:151-156 dropping the videos"
)


def limit_note(c, flags: dict) -> None:
    """A line naming --limit_mm_per_prompt's keys other than "image" (video, audio), which LMM-R1's rollout never
    fills (IMAGES_ONLY; `c`: planner.intake.collect.Collector)."""
    f = flags.get("limit_mm_per_prompt")
    if f is not None:
        mmlimit.note_others(c, f.value[-1] if isinstance(f.value, list) else f.value, f.source, IMAGES_ONLY)


def lmm_r1(keys: dict[str, str], rules: tuple, runs: dict) -> Release:
    """LMM-R1's release: OpenRLHF's flat `keys` and the 0.8 line's `rules` (0.7.3's flags are that line's), its
    adapter running OpenRLHF's `runs` with the vision tower and merger frozen too (--freeze_prefix visual)."""
    return fork_release(
        "lmm-r1",
        CLI,
        "OpenRLHF v0.7.3's with multimodal rollouts and its own flags: :235, :284-293, :342-345, :380",
        dict(zip(FLAT, (306, 263, 256, 292, 295, 296))),
        "LMM-R1: OpenRLHF 0.7.3's flat flags, images within --processor_kwargs (16384 x 28 x 28 pixels)",
        READ_ONLY,
        (keys, rules, runs),
    )
