"""VLM-R1's GRPO scripts (github.com/om-ai-lab/VLM-R1 at 90052f4, src/open-r1-multimodal/src/open_r1/: grpo_jsonl.py,
grpo_rec.py) on TRL's names: what their own trainer (trainer/grpo_trainer.py, VLMGRPOTrainer) runs beyond TRL's GRPO.

- Log-probs from the whole logits, then a log_softmax per row (`workload.logprobs full`).
- One image a row: grpo_jsonl.py:967-977 takes a row's `image` as one path (a list is several images, for multi-image
  data); grpo_rec.py:177-185 opens the one `image` of each row. The REC data its run scripts train (RefCOCO/+/g) has
  one image a sample, so a row is planned with one image.
- Each image within the script's `--max_pixels` / `--min_pixels`, or VLM-R1's defaults, 12,845,056 and 3,136
  (GRPOScriptArguments, grpo_jsonl.py:89-96, grpo_rec.py:63-70), which the trainer sets on a Qwen-VL processor's
  image_processor (trainer/grpo_trainer.py:314-318 with vlm_modules/qwen_module.py:40-41); an InternVL model takes
  `--max_anyres_num` tiles instead (default 12: grpo_jsonl.py:97-100; vlm_modules/internvl_module.py:66-67,95).
- Prompts are not cut: the trainer sets max_prompt_length to None whatever the script says (trainer/grpo_trainer.py:
  366-369; the cut is commented out at 573-577). memplan's GRPO `max_prompt_length` is the longest prompt, image
  tokens included (planner/config/workload.py), so it is planned as the image tokens at the rule's worst case plus the
  text: the script's `--max_prompt_length` read as the text's length, or VLM-R1's GRPOConfig default 512
  (trainer/grpo_config.py:164-169).

R1-V's Qwen2VLGRPOTrainer (Deep-Agent/R1-V bbbbe3d src/r1-v/src/open_r1/; the same from v0.1.0, 60fe37b) is read the
same way, with its own settings: one image a row (grpo.py:150-166 puts one image in each prompt of a dataset with an
`image` column; trainer/grpo_trainer.py:361 passes each row's `image`), sized within `--max_pixels` / `--min_pixels` or
grpo.py's defaults, 12,845,056 and 3,136 (GRPOScriptArguments, grpo.py:43-50), which the trainer sets on the Qwen-VL
processor (trainer/grpo_trainer.py:235-237). Its cut of the prompt at max_prompt_length (:377-379) only sizes
`prompt_length`: generate takes the whole processed prompt (:383) and the policy's and the reference's log-prob
forwards take what generate returned, the whole prompt and its completion, with every image's pixels repeated per
generation (:400-409). The script's `--max_prompt_length` (trl 0.14.0's default 512, trl/trainer/grpo_config.py:
102-103) is read as the text's length, the image on top. Its vLLM trainer (`--use_vllm`,
vllm_grpo_trainer_modified.py) is not read so: its images stay a line.
"""

from __future__ import annotations

from typing import NamedTuple

from planner.intake import modelconfig
from planner.intake.collect import Collector, as_int, assumption, default, is_default, known, one
from planner.intake.flags import Flag
from planner.model import images

VLM_R1 = ("open-r1-multimodal", "grpo_jsonl.py", "grpo_rec.py", "VLM-R1")
WHO = "VLM-R1 90052f4"
PROMPT_TEXT = 512  # VLM-R1's GRPOConfig max_prompt_length default (trainer/grpo_config.py:164-169)
# GRPOScriptArguments' defaults: flag -> (value, its lines in grpo_jsonl.py, in grpo_rec.py)
DEFAULTS = {
    "max_pixels": (12845056, "89-92", "63-66"),
    "min_pixels": (3136, "93-96", "67-70"),
    "max_anyres_num": (12, "97-100", "71-74"),
}
NOT_CUT = "VLM-R1's trainer does not cut prompts, src/open_r1/trainer/grpo_trainer.py:366-369"
R1V = "Deep-Agent/R1-V bbbbe3d"


class Fork(NamedTuple):
    """What a GRPO fork's script and trainer set for its images: its name and release, each image setting's default
    (flag -> (value, the file and lines that give it)), the prompt text's default length and its cite, why the prompt
    is not cut, and where a row gets one image."""

    name: str
    who: str
    defaults: dict[str, tuple[int, str]]
    text: tuple[int, str]
    not_cut: str
    one_image: str


def vlm_r1(rec: bool) -> Fork:
    script, at = ("grpo_rec.py", 2) if rec else ("grpo_jsonl.py", 1)
    return Fork(
        "VLM-R1",
        WHO,
        {k: (v[0], f"src/open_r1/{script}:{v[at]}") for k, v in DEFAULTS.items()},
        (PROMPT_TEXT, "src/open_r1/trainer/grpo_config.py:164-169"),
        NOT_CUT,
        f"one image a row, as VLM-R1's REC data has: src/open_r1/{'grpo_rec.py:177-185' if rec else 'grpo_jsonl.py:967-977'}",
    )


R1_V = Fork(
    "R1-V",
    R1V,
    {
        "max_pixels": (12845056, "src/r1-v/src/open_r1/grpo.py:43-46"),
        "min_pixels": (3136, "src/r1-v/src/open_r1/grpo.py:47-50"),
    },
    (PROMPT_TEXT, "trl v0.14.0 trl/trainer/grpo_config.py:102-103"),
    "R1-V's trainer cuts prompt_ids only: generate and both log-prob forwards take the whole prompt, "
    "src/r1-v/src/open_r1/trainer/grpo_trainer.py:377-409",
    "one image a row, as R1-V's grpo.py builds each prompt of a dataset with an image column: "
    "src/r1-v/src/open_r1/grpo.py:150-166",
)


def is_vlm_r1(trainer: str, path: str) -> bool:
    """A GRPO run of one of VLM-R1's scripts (its path, or the folder it runs from, says so)."""
    return trainer == "grpo" and any(m in path for m in VLM_R1)


def read_run(c: Collector, run, flags: dict[str, Flag], trainer: str, *, flags_only: bool) -> None:
    """A launched run's forks (planner.frameworks.hf.reader.read_forks; `run`: planner.intake.launch.Run): a VLM-R1
    script's GRPO (read), R1-V's pixel caps, else a script's own pixel caps named as unplanned (`flags_only`: the
    flags are the whole configuration, no config file)."""
    vars = run.command.vars
    if is_vlm_r1(trainer, f"{vars.cwd or ''}/{run.target}"):
        read(c, flags, run.where, run.target)
    elif trainer == "grpo" and c.facts.get("release", ("",))[0] == "r1-v":
        if "use_vllm" not in flags and not set(flags) & {"temporal", "len_control"}:  # R1-V's own HF-generate trainer
            return read_images(c, flags, f"{run.where} {run.target}", R1_V)
        for key in sorted({"max_pixels", "min_pixels"} & set(flags)):
            c.note(
                f"{flags[key].source} (the images of R1-V's vLLM trainer and of Video-R1's copy are not planned yet: "
                "give --images with --max-pixels)"
            )
    elif flags_only and (caps := [flags[k].source for k in ("max_pixels", "min_pixels") if k in flags]):
        c.note(
            f"{'; '.join(caps)} (the script's own pixel caps on its processor: memplan reads them for VLM-R1's scripts "
            "only, so no image is planned from them: give --max-pixels with --images)"
        )


def read(c: Collector, flags: dict[str, Flag], where: str, target: str) -> None:
    """VLM-R1's trainer over TRL's GRPO reading: its log-probs, its images and its uncut prompts."""
    c.set(
        "workload.logprobs",
        "full",
        f"{where} {target} (VLM-R1's trainer computes each row's log-probs from the whole logits)",
        "trainer",
    )
    read_images(c, flags, f"{where} {target}", vlm_r1("grpo_rec.py" in target))
    lora = "the trainer's own LoRA targets leave the vision modules out, trainer/grpo_trainer.py find_all_linear_names"
    c.fact("freeze_vision", True, f"{where} {target} ({lora})", "trainer", weak=True)


def _setting(c: Collector, flags: dict[str, Flag], key: str, fork: Fork) -> tuple[int, str]:
    """(value, source) of one GRPOScriptArguments image setting: the script's, or the fork's default."""
    value, cite = fork.defaults[key]
    fallback = default(fork.who, cite, f"{key} {value}")
    f = flags.get(key)
    if f is None:
        return value, fallback
    n = as_int(f.value) if known(f.value) else None
    if n is None or n < 1:
        c.note(f"{f.source} (not a whole number known from the script: planned at {fork.name}'s default {value})")
        return value, fallback
    return n, f.source


def _rule(c: Collector, flags: dict[str, Flag], rule: str, fork: Fork) -> tuple[str, int | None, int | None]:
    """(the rule, min_pixels, max_pixels) of the fork's images, their settings read: the pixels on a Qwen-VL
    processor, the tiles on InternVL's (VLM-R1's only); a setting its model's processor does not take is a line."""
    low = high = None
    used: tuple[str, ...] = ()
    if rule in images.PIXEL_RULES:
        (low, low_src), (high, high_src) = (
            _setting(c, flags, "min_pixels", fork),
            _setting(c, flags, "max_pixels", fork),
        )
        c.set("min_pixels", low, low_src, "min_pixels")
        c.set("max_pixels", high, high_src, "max_pixels")
        used = ("min_pixels", "max_pixels")
    elif images.tiled(rule) and "max_anyres_num" in fork.defaults:
        tiles, tiles_src = _setting(c, flags, "max_anyres_num", fork)
        if tiles > 64:
            c.note(f"{tiles_src} (memplan's InternVL rule counts up to 64 tiles: planned at 64)")
        rule = images.tile_rule(min(tiles, 64))
        c.set("image_rule", rule, tiles_src, "max_anyres_num")
        used = ("max_anyres_num",)
    for key in sorted(k for k in set(fork.defaults) & set(flags) - set(used) if not is_default(flags[k].source)):
        c.note(f"{flags[key].source} ({fork.name} does not apply it to this model's processor: not planned)")
    return rule, low, high


def read_images(
    c: Collector, flags: dict[str, Flag], where: str, fork: Fork, count: tuple[int, str] | None = None
) -> int | None:
    """A fork's images (one a row, or `count`: (images, where read), within its pixel settings) and its uncut prompt:
    the text and the images' tokens; MM-Eureka's OpenRLHF reading takes it too (planner.frameworks.openrlhf.
    reader_mmeureka). Returns one image's tokens at the rule's worst case, None where no image is planned."""
    if c.model is None or not modelconfig.has_vision(c.model.config):
        for key in sorted(k for k in set(fork.defaults) & set(flags) if not is_default(flags[k].source)):
            what = "the model is not known from the script: pass --model" if c.model is None else "a text model"
            c.note(f"{flags[key].source} ({fork.name}'s images are not planned: {what})")
        if c.model is None:
            c.note(
                f"{where} ({fork.name}'s images, one a row, are not planned without the model: pass --model, --images)"
            )
        return None
    model_type = str(c.model.config.get("model_type", ""))
    rule = images.family_rule(model_type)
    if rule is None:
        c.note(
            f"{where} ({fork.name}'s images, one a row, are not planned: memplan has no image rule for model_type "
            f"{model_type!r}; give --images 1 with --tokens-per-image or --image-rule)"
        )
        return None
    rule, low, high = _rule(c, flags, rule, fork)
    if count is None:
        c.assume_media("images", 1, assumption(f"{fork.one_image}; give --images N for rows with more"), "image")
    else:
        c.set("images", count[0], count[1], "images")
    return _prompt(c, flags, rule, low, high, fork, count[0] if count else 1)


def _prompt(
    c: Collector, flags: dict[str, Flag], rule: str, low: int | None, high: int | None, fork: Fork, n: int
) -> int:
    """The longest prompt: `n` images at the rule's worst case and the text (the fork's model takes both uncut);
    returns one image's tokens."""
    tokens, _ = images.worst_case(rule, low, high)
    f = flags.get("max_prompt_length")
    text = as_int(one(f.value)) if f is not None and known(f.value) else None
    base, base_cite = fork.text

    def again(request: dict) -> int:  # the same prompt under the images a flag gives (check --config --max-pixels,
        # --image-tokens: a sample's image tokens; --tokens-per-image: each image's)
        prompt = text if text is not None and text >= 1 else base
        if request.get("image_tokens") is not None:
            return prompt + request["image_tokens"]
        r = request.get("image_rule") or rule
        each = request.get("tokens_per_image")
        if each is None:
            each = images.worst_case(r, request.get("min_pixels", low), request.get("max_pixels", high))[0]
        return prompt + request.get("images", n) * each

    inputs = ("images", "image_rule", "min_pixels", "max_pixels", "image_tokens", "tokens_per_image")
    c.derived["workload.max_prompt_length"] = (inputs, again)
    image = f"{n} image{'s' if n != 1 else ''} of {tokens:,} tokens at the {rule} rule's worst case"
    if text is not None and text >= 1:
        c.set(
            "workload.max_prompt_length",
            text + n * tokens,
            f"{f.source} ({fork.not_cut}: planned as {text} text tokens and {image})",
            f.raw,
        )
        return tokens
    c.set(
        "workload.max_prompt_length",
        base + n * tokens,
        assumption(f"{fork.not_cut}: {base} text tokens, the max_prompt_length default ({base_cite}), and {image}"),
        "max_prompt_length",
    )
    return tokens
