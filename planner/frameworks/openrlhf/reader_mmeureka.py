"""MM-Eureka's and LMM-R1's train_ppo_ray (planner.frameworks.openrlhf.mmeureka, .lmmr1) beyond the OpenRLHF flags
their copies froze (0.6.1's, 0.7.3's), read after them (reader.py): the actor's frozen modules (--freeze_prefix) and
the images its rollouts and trainings take. LMM-R1 is MM-Eureka's parent and runs the same code for these (each cited
below, MM-Eureka's first, LMM-R1's in LINES).

- --freeze_prefix visual (their scripts' value) leaves Qwen2.5-VL's `visual.*` (the tower and its merger) without
  gradients (trainer/ray/ppo_actor.py:318-329, before DeepSpeed wraps the actor): frozen vision+projector; any other
  prefix is a line.
- Each image within --max_pixels / --min_pixels (cli/train_ppo_ray.py:348-349, 640 x 28 x 28 and 4 x 28 x 28; LMM-R1:
  --processor_kwargs' keys, 16384 x 28 x 28 and 4 x 28 x 28), set on the processor (models/lmm_kits/utils.py:16-18)
  and on vLLM's (trainer/ppo_utils/experience_maker.py:904-909).
- Prompts are not cut: vLLM takes the whole chat text and its images (experience_maker.py:897-911) and the actor's
  rows are vLLM's prompt_token_ids and the completion (:940-962); the processor's cut at --prompt_max_len (:971)
  sizes the pixel inputs only (input_ids dropped, :972). --prompt_max_len is read as the text's length, one image
  (at the rule's worst case within --max_pixels) on top, as VLM-R1's (planner.frameworks.trl.reader_vlmr1)."""

from __future__ import annotations

import json
from typing import NamedTuple

from planner.errors import BadInput
from planner.frameworks.openrlhf import lmmr1
from planner.frameworks.openrlhf import mmeureka_internvl as internvl
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


class Line(NamedTuple):
    """One fork's copy of these: its name and commit, its images (vlmr1.Fork), where its experience rows are built,
    the default of --micro_rollout_batch_size and where its actor freezes."""

    who: str
    fork: vlmr1.Fork
    rows: str
    rollout: str
    freeze: str
    max_len: str


LMM = "openrlhf/trainer/ppo_utils/experience_maker.py"
LINES = {
    "mm-eureka": Line(
        WHO,
        FORK,
        f"{EXPERIENCE}:940-962",
        "openrlhf/cli/train_ppo_ray.py:299",
        FREEZE,
        "cli/train_ppo_ray.py:75, trainer/ray/vllm_engine.py:173",
    ),
    "lmm-r1": Line(
        lmmr1.WHO,
        vlmr1.Fork(
            "LMM-R1",
            lmmr1.WHO,
            {k: (v, f"openrlhf/cli/train_ppo_ray.py:{line}") for k, (v, line) in lmmr1.PIXELS.items()},
            (1024, "openrlhf/cli/train_ppo_ray.py:295 --prompt_max_len"),
            f"LMM-R1's vLLM rollout takes the whole prompt and its images, {LMM}:676-691, 709-728",
            "one image a row, as its scripts' data (models/lmm_kits/base/data_processor.py)",
        ),
        f"{LMM}:709-728",
        "openrlhf/cli/train_ppo_ray.py:292",
        "trainer/ray/ppo_actor.py:431-440: requires_grad False before DeepSpeed wraps the actor",
        "cli/train_ppo_ray.py:41, trainer/ray/vllm_engine.py:167",
    ),
    "mm-eureka-internvl": Line(
        internvl.WHO,
        vlmr1.Fork(
            "MM-Eureka (internvl branch)",
            internvl.WHO,
            {},
            (1024, "openrlhf/cli/train_ppo_ray.py:303 --prompt_max_len"),
            f"its vLLM rollout takes the whole prompt and its images, {EXPERIENCE}:878-884, 927-963",
            "one image a row, as its data's image_urls (experience_maker.py:878-884)",
        ),
        f"{EXPERIENCE}:927-963",
        "openrlhf/cli/train_ppo_ray.py:301",
        internvl.FREEZE,
        "cli/train_ppo_ray.py:73, trainer/ray/vllm_engine.py:186",
    ),
}


# the model types a fork's actor loads (LMM-R1 loads any: an unknown type falls to its `llm` kit, lmm_kits/utils.py:14-18)
LOADS = {
    "mm-eureka": (
        ("qwen2_5_vl",),
        "openrlhf/models/lmm_kits/utils.py:10, 33 imports the model_type's kit: qwen2_5_vl's alone",
    ),
    # OpenGVLab's checkpoints are internvl_chat; memplan's catalog holds their transformers-native config, internvl
    "mm-eureka-internvl": (("internvl_chat", "internvl"), "openrlhf/models/actor.py:79-86 loads InternVLChatModel"),
}
OTHER = {
    "mm-eureka": "openrlhf@mm-eureka-internvl for InternVL",
    "mm-eureka-internvl": "openrlhf@mm-eureka for Qwen2.5-VL",
}


def _loads(c: Collector, release: str) -> None:
    """A model the fork's actor does not load is refused in one line (the value, what it loads, the other branch)."""
    if release not in LOADS or c.model is None:
        return
    types, cite = LOADS[release]
    got = str(c.model.config.get("model_type", ""))
    if got not in types:
        who = LINES[release].who
        raise BadInput(
            f"--pretrain {c.model.ref} (model_type {got!r}): {who} runs {', '.join(types)} alone ({cite}); give "
            f"--framework {OTHER[release]}",
            "model",
        )


def read(c: Collector, flags: dict[str, Flag], where: str, release: str = "mm-eureka") -> None:
    """The fork's own flags over the OpenRLHF reading of the flags it froze: frozen modules, then the images (`where`:
    the launch; `release`: mm-eureka or lmm-r1, LINES)."""
    line = LINES[release]
    _loads(c, release)
    if release == "mm-eureka-internvl":  # its actor freezes InternVL's tower itself, the projector trains
        c.set("frozen", "vision", default(line.who, line.freeze, "the vision tower frozen"), "frozen")
    else:
        _freeze(c, flags, line)
    text = flags.get("prompt_max_len")
    pixels = pixel_flags(c, flags) if release == "lmm-r1" else {}
    vlmr1.read_images(c, {**flags, **pixels, **({"max_prompt_length": text} if text else {})}, where, line.fork)
    if release == "lmm-r1" and "limit_mm_per_prompt" in flags:
        c.note(
            f"{flags['limit_mm_per_prompt'].source} (vLLM's images a prompt, {lmmr1.CLI}:492-497; the "
            "rows are planned with one image: give --images N for rows with more)"
        )
    _rows(c, flags, line)
    _model_len(c, flags, line)


def _rows(c: Collector, flags: dict[str, Flag], line: Line) -> None:
    """The experience passes' rows (--micro_rollout_batch_size of them, default 8: v0.6.1's :299, LMM-R1's :292) are
    vLLM's whole prompts and completions (experience_maker.py:940-962), not --prompt_max_len + --generate_max_len: the
    prompt read above, image included, and the completion."""
    prompt, new = c.get("workload.max_prompt_length"), c.get("workload.max_completion_length")
    if not isinstance(prompt, int) or not isinstance(new, int):
        return
    f = flags.get("micro_rollout_batch_size")
    rows = as_int(one(f.value)) if f is not None else 8
    src = f.source if f is not None else default(line.who, line.rollout, "--micro_rollout_batch_size 8")
    c.number(
        "workload.roles.logprob_max_tokens_per_gpu",
        (rows or 8) * (prompt + new),
        f"{src} x (the prompt, its image included, and the completion: {line.rows})",
        "--micro_rollout_batch_size",
    )


def _model_len(c: Collector, flags: dict[str, Flag], line: Line) -> None:
    """vLLM's max_model_len is --prompt_max_len + --generate_max_len (`line.max_len`): it refuses a longer prompt,
    image tokens included, and stops a completion there; the plan keeps the image on top of the text (a line)."""
    p, g = flags.get("prompt_max_len"), flags.get("generate_max_len")
    if p is None or g is None or as_int(one(p.value)) is None or as_int(one(g.value)) is None:
        return
    total = as_int(one(p.value)) + as_int(one(g.value))
    c.note(
        f"{p.source}, {g.source} (vLLM's max_model_len {total:,}, {line.who} {line.max_len}, bounds a "
        "row's prompt, its image's tokens included, and completion; memplan plans the image on top of the text)"
    )


def _freeze(c: Collector, flags: dict[str, Flag], line: Line) -> None:
    f = flags.get("freeze_prefix")
    if f is None:
        return
    prefixes = {str(p) for p in (f.value if isinstance(f.value, list) else [f.value])}
    if _names_the_tower(c, prefixes):
        why = f"{f.source} (the model's tower and projector, under {', '.join(sorted(prefixes))}, take no gradient: {line.who} {line.freeze})"
        c.set("frozen", "vision+projector", why, "--freeze_prefix")
        return
    names = ", ".join(sorted(prefixes))
    c.note(f"{f.source} (not planned: {line.fork.name} freezes the parameters named {names}, {line.freeze})")


def _names_the_tower(c: Collector, prefixes: set[str]) -> bool:
    """Whether the prefixes name the model's whole tower and projector (Qwen-VL's `visual`: its ModelSpec's
    tower_modules and projector_modules), nothing of the language model."""
    if c.model is None or not modelconfig.has_vision(c.model.config):
        return False
    v = families.from_config(c.model.config, "the reading's model").vision
    mods = v.tower_modules + v.projector_modules if v is not None else ()
    return bool(mods) and {m.split(".")[0] for m in mods} == prefixes


def pixel_flags(c: Collector, flags: dict[str, Flag]) -> dict[str, Flag]:
    """--processor_kwargs' min_pixels / max_pixels as the flags the image reading takes (its source theirs); a value
    that is no JSON object of whole numbers is a line, and LMM-R1's defaults are planned."""
    f = flags.get("processor_kwargs")
    if f is None:
        return {}
    try:
        given = json.loads(str(f.value))
    except ValueError:
        given = None
    if not isinstance(given, dict):
        c.note(
            f"{f.source} (not a JSON object memplan can read: planned at LMM-R1's pixel defaults, {lmmr1.CLI}:487-490)"
        )
        return {}
    out = {k: Flag(k, given[k], f"{f.source} ({k})", f.raw) for k in PIXELS if isinstance(given.get(k), int)}
    for k in sorted(set(given) - set(out)):
        c.note(f"{f.source} (not planned: the processor's {k} {given[k]!r})")
    return out
