"""LMM-R1's `dev` branch (github.com/TideDra/lmm-r1 at 2e98315, 2025-05-02): its main (planner.frameworks.openrlhf.lmmr1,
f917f18) with OpenRLHF's main at c438a86 merged in, OpenRLHF v0.7.4.post2 and three commits (`git describe`:
v0.7.4.post2-3-gc438a86a; version.txt 0.7.4a.post2; requirements.txt transformers==4.51.3, deepspeed==0.16.7). Its
cli/train_ppo_ray.py is that commit's (v0.7.4.post2's: the same file) line for line (`diff`: 42 lines) but for
LMM-R1's own flags, the ones its main takes (lmmr1.SIGNS, --freeze_prefix :343, --processor_kwargs :346), one line
down from --ds_tensor_parallel_size (:275, OpenRLHF's from v0.7.4: DeepSpeed AutoTP over the actor's ranks,
utils/deepspeed/deepspeed_utils.py's tensor_parallel.autotp_size), which memplan does not plan for OpenRLHF: a size
above 1 is refused (SIGN, reader_mmeureka). Against its main, memory moves in one place: the rollout's rows are padded
per --micro_rollout_batch_size group (trainer/ppo_utils/experience_maker.py:707-752), not over the whole rollout batch
(main :709-728): the same worst-case row. --eval_split's default "train" (:392, main "test") reads no memory. Its
examples/scripts/lmm_r1/*.sh are main's byte for byte (the same git blobs): a script names dev only by
--ds_tensor_parallel_size beside an LMM-R1 sign (planner.frameworks.openrlhf.reader_flags); else main is read and
the reading names this release."""

from __future__ import annotations

from planner.frameworks.base import Release
from planner.frameworks.openrlhf.mmeureka import FLAT, fork_release, read_only

WHO = "lmm-r1 dev@2e98315"
CLI = f"{WHO} openrlhf/cli/train_ppo_ray.py"
# OpenRLHF's (v0.7.4 on) and dev's, not LMM-R1 main's: with an LMM-R1 sign it names dev
SIGN = {"ds_tensor_parallel_size": 275}
# its pixel bounds where --processor_kwargs names none: key -> (default, line)
PIXELS = {"max_pixels": (16384 * 28 * 28, 489), "min_pixels": (4 * 28 * 28, 488)}
# --limit_mm_per_prompt's JSON read (vLLM's images a prompt)
LIMIT_MM = "493-498"
READ_ONLY = read_only("LMM-R1 dev", "0.7.4.post2")


def lmm_r1_dev(keys: dict[str, str], rules: tuple, runs: dict) -> Release:
    """LMM-R1 dev's release: OpenRLHF's flat `keys` and the 0.8 line's `rules` (0.7.4.post2's flags are that
    line's), its adapter running OpenRLHF's `runs` with the vision tower and merger frozen too (--freeze_prefix)."""
    return fork_release(
        "lmm-r1-dev",
        CLI,
        "OpenRLHF v0.7.4.post2's with multimodal rollouts and LMM-R1's own flags: :235, :285-294, :343-346, :381",
        dict(zip(FLAT, (307, 263, 256, 293, 296, 297))),
        "LMM-R1 dev: OpenRLHF 0.7.4.post2's flat flags, images within --processor_kwargs (16384 x 28 x 28 pixels)",
        READ_ONLY,
        (keys, rules, runs),
    )
