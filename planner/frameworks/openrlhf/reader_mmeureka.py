"""The multimodal forks' train_ppo_ray (MM-Eureka's, LMM-R1's main and dev, OpenRLHF-M's: planner.frameworks.openrlhf
.mmeureka, .lmmr1, .lmmr1_dev, .openrlhfm) beyond the OpenRLHF flags their copies froze (0.6.1's, 0.7.3's,
0.7.4.post2's, 0.6.1.post1's), read after them (reader.py): the actor's frozen modules (--freeze_prefix) and the
images its rollouts and trainings take. They run the same code for these (each cited below at MM-Eureka's, the
others' in reader_forks.LINES); --ds_tensor_parallel_size above 1 is refused before
(reader_flags.refuse_parallel_groups).

- --freeze_prefix visual (their scripts' value) leaves Qwen2.5-VL's `visual.*` (the tower and its merger) without
  gradients (trainer/ray/ppo_actor.py:318-329, before DeepSpeed wraps the actor): frozen vision+projector; any other
  prefix is a line.
- Each image within --max_pixels / --min_pixels (cli/train_ppo_ray.py:348-349, 640 x 28 x 28 and 4 x 28 x 28; LMM-R1:
  --processor_kwargs' keys, 16384 x 28 x 28 and 4 x 28 x 28), set on the processor (models/lmm_kits/utils.py:16-18)
  and on vLLM's (trainer/ppo_utils/experience_maker.py:904-909).
- Prompts are not cut: vLLM takes the whole chat text and its images (experience_maker.py:897-911) and the actor's
  rows are vLLM's prompt_token_ids and the completion (:940-962); the processor's cut at --prompt_max_len (:971)
  sizes the pixel inputs only (input_ids dropped, :972). --prompt_max_len is read as the text's length, one image
  (at the rule's worst case within --max_pixels) on top, as VLM-R1's (planner.frameworks.trl.reader_vlmr1); LMM-R1's
  --limit_mm_per_prompt puts up to N images there (lmmr1.image_limit). Images past the planned prompt are planned
  at it (planner.frameworks.mmlimit.cap_row_images: vLLM refuses a longer prompt).
- vLLM's max_model_len (--max_len, else --prompt_max_len + --generate_max_len) bounds every row that runs: a longer
  prompt, image included, is refused (the run stops), a completion stops at it. The training passes take each row
  unpadded (the replay buffer's remove_padding_in_sequences): at most max_model_len tokens. The experience passes pad
  their rows to the longest prompt (at most max_model_len) and the longest completion of the batch (_lengths)."""

from __future__ import annotations

import json

from planner.errors import BadInput
from planner.frameworks import mmlimit
from planner.frameworks.openrlhf import lmmr1, lmmr1_dev
from planner.frameworks.openrlhf.reader_forks import LINES, LOADS, OTHER, Line
from planner.frameworks.trl import reader_vlmr1 as vlmr1
from planner.intake import modelconfig
from planner.intake.collect import Collector, as_int, default, one
from planner.intake.flags import Flag
from planner.model import families

# vLLM 0.7.2 / 0.7.3 (V0, MM-Eureka's) and 0.8.3 (V1, LMM-R1's) check the prompt against max_model_len in
# _validate_model_input before generating; LLM.generate raises, the actor's ray.get with it
REFUSES = (
    "vLLM refuses a longer prompt, image tokens included (_validate_model_input's ValueError 'The prompt (total "
    "length N) is too long to fit into the model', vllm-project/vllm#12165), and the run stops; a completion stops at it"
)
# LMM-R1's lines (main, dev): --processor_kwargs' pixels and --limit_mm_per_prompt, at each one's cli
LMM = {
    "lmm-r1": (lmmr1.CLI, "487-490", "492-497"),
    "lmm-r1-dev": (lmmr1_dev.CLI, "488-491", lmmr1_dev.LIMIT_MM),
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
    the launch; `release`: one of LINES)."""
    line = LINES[release]
    _loads(c, release)
    if release == "mm-eureka-internvl":  # its actor freezes InternVL's tower itself, the projector trains
        c.set("frozen", "vision", default(line.who, line.freeze, "the vision tower frozen"), "frozen")
    else:
        _freeze(c, flags, line)
    text = flags.get("prompt_max_len")
    pixels = pixel_flags(c, flags, LMM[release]) if release in LMM else {}
    given = {**flags, **pixels, **({"max_prompt_length": text} if text else {})}
    each = vlmr1.read_images(c, given, where, line.fork, lmmr1.image_limit(flags) if release in LMM else None)
    if release in LMM:
        lmmr1.limit_note(c, flags)
    _lengths(c, flags, line, release)
    if each is not None:  # vLLM refuses a prompt past max_model_len: the row's images are at most its prompt
        mmlimit.cap_row_images(c, each, f"vLLM's max_model_len ({line.who} {line.max_len}) caps the row")


def _lengths(c: Collector, flags: dict[str, Flag], line: Line, release: str) -> None:
    """The rows as vLLM's max_model_len bounds them (`line.max_len`: --max_len, else --prompt_max_len +
    --generate_max_len). vLLM refuses a prompt longer than it, image tokens included, and the run stops (REFUSES);
    a completion stops at it. The experience passes' rows (--micro_rollout_batch_size, default 8: v0.6.1's :299,
    LMM-R1's :292) are padded to the longest prompt and the longest completion (`line.pad`); the training passes take
    each row unpadded (`line.unpad`), at most max_model_len tokens: the prompt planned at max_model_len less the
    completion where the image on top of the text would go past it."""
    prompt, new = c.get("workload.max_prompt_length"), c.get("workload.max_completion_length")
    if not isinstance(prompt, int) or not isinstance(new, int):
        return
    cap, cap_src = model_len_tokens(flags, new, line)
    packed = bool(line.packed) and "packing_samples" in flags  # MM-Eureka's qwen branch and OpenRLHF-M pack, the
    f = flags.get("micro_rollout_batch_size")  # others pad (LMM-R1 has no packed path, internvl asserts none)
    rows = (as_int(one(f.value)) if f is not None else 8) or 8
    src = f.source if f is not None else default(line.who, line.rollout, "--micro_rollout_batch_size 8")
    width, how = experience_row_tokens(prompt, new, cap, packed)
    c.number(
        "workload.roles.logprob_max_tokens_per_gpu",
        rows * width,
        f"{src} x ({how}: {line.packed if packed else line.pad})",
        "--micro_rollout_batch_size",
    )
    text = as_int(one(flags["prompt_max_len"].value)) if "prompt_max_len" in flags else line.fork.text[0]
    if text is not None and prompt - text >= cap:
        c.note(
            f"{cap_src} ({_images_alone(c.get('images', 1), prompt - text)} longer than vLLM's max_model_len {cap:,}: "
            f"{REFUSES}; the rows are planned at max_model_len)"
        )
    done = new if new < cap else cap - 1
    if prompt + done <= cap:
        return
    kept = max(1, cap - done)
    unpad = line.packed if packed else line.unpad
    why = (
        f"{cap_src} (vLLM's max_model_len {cap:,}, {line.who} {line.max_len}: {REFUSES}; each trained row is at "
        f"most that, {unpad}"
    )
    c.set(
        "workload.max_prompt_length",
        kept,
        f"{why}: planned as a prompt of {kept:,} tokens and the completion, not {prompt:,} + {new:,})",
        "max_prompt_length",
    )
    if done != new:
        c.set(
            "workload.max_completion_length", done, f"{why}: the completion cut at {done:,})", "max_completion_length"
        )
    if "workload.max_prompt_length" in c.derived:
        inputs, again = c.derived["workload.max_prompt_length"]
        c.derived["workload.max_prompt_length"] = (inputs, lambda request: min(again(request), kept))


def _images_alone(n: int, tokens: int) -> str:
    return f"1 image of {tokens:,} tokens alone is" if n == 1 else f"{n} images, {tokens:,} tokens, alone are"


def model_len_tokens(flags: dict[str, Flag], new: int, line: Line) -> tuple[int, str]:
    """vLLM's max_model_len (its tokens and where read): --max_len where given, else --prompt_max_len (the fork's
    default where not given) + the completion `new` (line.max_len)."""
    given = flags.get("max_len")
    if given is not None and as_int(one(given.value)):
        return as_int(one(given.value)), given.source
    p = flags.get("prompt_max_len")
    text = as_int(one(p.value)) if p is not None else None
    text, where = (text, p.source) if text else (line.fork.text[0], default(line.who, line.fork.text[1], "1024"))
    g = flags.get("generate_max_len")
    return text + new, f"{where}, {g.source}" if g is not None else where


def experience_row_tokens(prompt: int, new: int, cap: int, packed: bool) -> tuple[int, str]:
    """One experience row's tokens and how: packed, each sample its own prompt and completion, within max_model_len
    `cap`; padded, the longest prompt (at most `cap`) and the longest completion (`new`), of two different samples."""
    if packed:
        return min(prompt + new, cap), "packed: a prompt, its image included, and its completion, within max_model_len"
    return min(
        prompt, cap
    ) + new, "padded to the longest prompt, its image included, within max_model_len, and the longest completion"


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


def pixel_flags(c: Collector, flags: dict[str, Flag], at: tuple[str, ...] = LMM["lmm-r1"]) -> dict[str, Flag]:
    """--processor_kwargs' min_pixels / max_pixels as the flags the image reading takes (its source theirs); a value
    that is no JSON object of whole numbers is a line, and LMM-R1's defaults are planned (`at`: its cli, LMM)."""
    f = flags.get("processor_kwargs")
    if f is None:
        return {}
    try:
        given = json.loads(str(f.value))
    except ValueError:
        given = None
    if not isinstance(given, dict):
        c.note(f"{f.source} (not a JSON object memplan can read: planned at LMM-R1's pixel defaults, {at[0]}:{at[1]})")
        return {}
    out = {k: Flag(k, given[k], f"{f.source} ({k})", f.raw) for k in lmmr1.PIXELS if isinstance(given.get(k), int)}
    for k in sorted(set(given) - set(out)):
        c.note(f"{f.source} (not planned: the processor's {k} {given[k]!r})")
    return out
