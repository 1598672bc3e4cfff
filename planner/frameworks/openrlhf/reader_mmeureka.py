"""MM-Eureka's train_ppo_ray (planner.frameworks.openrlhf.mmeureka) beyond OpenRLHF 0.6.1's flags, read after them
(reader.py): the actor's frozen modules (--freeze_prefix) and the images its rollouts and trainings take.

- --freeze_prefix visual (its scripts' value) leaves Qwen2.5-VL's `visual.*` (the tower and its merger) without
  gradients (trainer/ray/ppo_actor.py:318-329, before DeepSpeed wraps the actor): frozen vision+projector; any other
  prefix is a line.
- Each image within --max_pixels / --min_pixels (cli/train_ppo_ray.py:348-349, 640 x 28 x 28 and 4 x 28 x 28), set on
  the processor (models/lmm_kits/utils.py:16-18) and on vLLM's (trainer/ppo_utils/experience_maker.py:904-909).
- Prompts are not cut: vLLM takes the whole chat text and its images (experience_maker.py:897-911) and the actor's
  rows are vLLM's prompt_token_ids and the completion (:940-962); the processor's cut at --prompt_max_len (:971)
  sizes the pixel inputs only (input_ids dropped, :972). --prompt_max_len is read as the text's length, one image
  (at the rule's worst case within --max_pixels) on top, as VLM-R1's (planner.frameworks.trl.reader_vlmr1)."""

from __future__ import annotations

from planner.frameworks.openrlhf.mmeureka import PIXELS, WHO
from planner.frameworks.trl import reader_vlmr1 as vlmr1
from planner.intake import modelconfig
from planner.intake.collect import Collector, as_int, default, one
from planner.intake.flags import Flag
from planner.model import families

EXPERIENCE = "openrlhf/trainer/ppo_utils/experience_maker.py"
FORK = vlmr1.Fork(
    "MM-Eureka",
    WHO,
    {k: (v, f"openrlhf/cli/train_ppo_ray.py:{line}") for k, (v, line) in PIXELS.items()},
    (1024, "openrlhf/cli/train_ppo_ray.py:301 --prompt_max_len"),
    f"MM-Eureka's vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:897-911, 940-962",
    "one image a row, in its row's message (models/lmm_kits/base/data_processor.py:30-46)",
)
FREEZE = "trainer/ray/ppo_actor.py:318-329: requires_grad False before DeepSpeed wraps the actor"


def read(c: Collector, flags: dict[str, Flag], where: str) -> None:
    """MM-Eureka's own flags over the OpenRLHF 0.6.1 reading: frozen modules, then the images (`where`: the launch)."""
    _freeze(c, flags)
    text = flags.get("prompt_max_len")
    vlmr1.read_images(c, {**flags, **({"max_prompt_length": text} if text else {})}, where, FORK)
    _rows(c, flags)


def _rows(c: Collector, flags: dict[str, Flag]) -> None:
    """The experience passes' rows (--micro_rollout_batch_size of them, v0.6.1's default 8 at :299) are vLLM's whole
    prompts and completions (experience_maker.py:940-962), not --prompt_max_len + --generate_max_len: the prompt read above,
    image included, and the completion."""
    prompt, new = c.get("workload.max_prompt_length"), c.get("workload.max_completion_length")
    if not isinstance(prompt, int) or not isinstance(new, int):
        return
    f = flags.get("micro_rollout_batch_size")
    rows = as_int(one(f.value)) if f is not None else 8
    src = (
        f.source if f is not None else default(WHO, "openrlhf/cli/train_ppo_ray.py:299", "--micro_rollout_batch_size 8")
    )
    c.number(
        "workload.roles.logprob_max_tokens_per_gpu",
        (rows or 8) * (prompt + new),
        f"{src} x (the prompt, its image included, and the completion: {EXPERIENCE}:940-962)",
        "--micro_rollout_batch_size",
    )


def _freeze(c: Collector, flags: dict[str, Flag]) -> None:
    f = flags.get("freeze_prefix")
    if f is None:
        return
    prefixes = {str(p) for p in (f.value if isinstance(f.value, list) else [f.value])}
    if _names_the_tower(c, prefixes):
        why = f"{f.source} (the model's tower and projector, under {', '.join(sorted(prefixes))}, take no gradient: {WHO} {FREEZE})"
        c.set("frozen", "vision+projector", why, "--freeze_prefix")
        return
    c.note(f"{f.source} (not planned: MM-Eureka freezes the parameters named {', '.join(sorted(prefixes))}, {FREEZE})")


def _names_the_tower(c: Collector, prefixes: set[str]) -> bool:
    """Whether the prefixes name the model's whole tower and projector (Qwen-VL's `visual`: its ModelSpec's
    tower_modules and projector_modules), nothing of the language model."""
    if c.model is None or not modelconfig.has_vision(c.model.config):
        return False
    v = families.from_config(c.model.config, "the reading's model").vision
    mods = v.tower_modules + v.projector_modules if v is not None else ()
    return bool(mods) and {m.split(".")[0] for m in mods} == prefixes
