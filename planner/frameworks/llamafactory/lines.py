"""What LLaMA-Factory's older release lines have no key or word for: a plan's setting whose YAML key (SPANS) not every
version of a line takes becomes a rule of that line (Release.adapter), so `suggest` never ranks what the line's YAML
cannot say and writer.py refuses it in one line naming the release; a plan the line runs and reads but writer.py
writes no file of the line for (a vision model's frozen parts, FSDP before accelerate's FSDP2, an attention whose
flash_attn value not every version spells: keys.py OLD_FLASH_ATTN) becomes a rule of scope "written" (unwritten): the
search never ranks it, a reading of a user's file plans it."""

from __future__ import annotations

from dataclasses import replace

from planner.frameworks.base import Release, Rule
from planner.frameworks.llamafactory.keys import KEYS

# the settings writer.py writes a key for only when a plan has them: (KEYS field, the setting as its flag, the test)
NEEDS = (
    ("loss", "--loss fused", lambda k: k.get("loss") == "fused"),
    ("checkpointing_offload", "--checkpointing offload-inputs", lambda k: k.get("checkpointing") == "offload-inputs"),
    ("pure_bf16", "--precision bf16-pure", lambda k: k.get("precision") == "bf16-pure"),
    ("lora_variant", "--lora-variant dora", lambda k: bool(k.get("lora_rank")) and k.get("lora_variant") == "dora"),
    ("oft_block_size", "--lora-variant oft", lambda k: bool(k.get("lora_rank")) and k.get("lora_variant") == "oft"),
)


# the frozen-part keys writer.py writes for a vision model (KEYS fields): every one under full fine-tuning (LF's
# default freezes the tower and the projector), freeze_vision_tower false beside --lora-vision
FROZEN = ("frozen_vision", "frozen_projector", "frozen_language")
# accelerate's FSDP2 (fsdp_version 2, the accelerate config writer.py writes: planner/export/configs.py) came with
# huggingface/accelerate#3394 (merged 2025-02, after 1.3.0); the lines before v0.9.3 ran the accelerate of their time:
# <=0.33.0 at v0.9.0, <=1.0.1 at v0.9.1, <=1.2.1 at v0.9.2 (requirements.txt:3-4 at each tag), >=0.27.2 (v0.5-v0.7.1)
# and >=0.30.1 (v0.8) beside the transformers <=4.45 those lines planned with (llamafactory/__init__.py)
FSDP2_FROM = (0, 9, 3)


def _frozen_keys(knobs: dict, where) -> tuple[str, ...]:
    """The KEYS fields writer.py writes for the frozen parts of `where`'s model (none for a text model)."""
    model = getattr(where, "model", None)
    if model is None or getattr(model, "vision", None) is None:
        return ()
    if knobs.get("lora_rank"):
        return ("frozen_vision",) if knobs.get("lora_vision") else ()
    return FROZEN


def unwritten(line: str, first: tuple | None, takes) -> tuple[Rule, ...]:
    """The rules of scope "written" of release line `line` (its first version `first`): plans the line runs and its
    users' files are read for, but writer.py writes no file of the line for, so `suggest` never ranks them: a vision
    model's frozen parts where the line has no key for one (freeze_multi_modal_projector and freeze_language_model
    from v0.9.2, freeze_vision_tower from v0.8.0: SPANS), FSDP before accelerate's FSDP2 (FSDP2_FROM), and an
    attention flash_attn has no one value for at every version of the line (keys.py OLD_FLASH_ATTN)."""
    out = []
    missing = tuple(f for f in FROZEN if not takes(KEYS.key(f, line), line))
    if missing:
        keys = ", ".join(KEYS.key(f, line) for f in missing)
        out.append(
            Rule(
                "frozen",
                f"release {line}'s YAML has no key for a vision model's frozen parts as written ({keys}): give "
                "--lora-rank or a later release",
                lambda k, w, m=missing: bool(set(_frozen_keys(k, w)) & set(m)),
                "written",
            )
        )
    if first is not None and first < FSDP2_FROM:
        why = (
            f"release {line} runs an accelerate before fsdp_version 2 (huggingface/accelerate#3394), and the FSDP "
            "file written is FSDP2's: give --zero N or a later release"
        )
        out.append(Rule("fsdp", why, lambda k, w: k.get("fsdp", "off") != "off", "written"))
    spelled = KEYS["attention"].values.get(line)
    if spelled is not None and set(spelled) != set(KEYS["attention"].to_value):  # a reading may hold any (v0.7.0 auto)
        why = f"release {line}'s flash_attn spells --attention {', '.join(spelled)} only (keys.py OLD_FLASH_ATTN)"
        out.append(
            Rule("attention", why, lambda k, w, s=tuple(spelled): k.get("attention", "sdpa") not in s, "written")
        )
    return tuple(out)


def _shown(version: tuple) -> str:
    return "v" + ".".join(map(str, version))


def unwritable(line: str, takes, spans: dict) -> tuple[Rule, ...]:
    """The rules of release line `line`: a plan's setting whose key (NEEDS) not every version of the line takes is
    refused in one line, so `suggest` never ranks what the line's YAML cannot say."""
    out = []
    for name, setting, test in NEEDS:
        key = KEYS.key(name, line)
        if not takes(key, line):
            since = f"{key} from {_shown(spans[key][0])}"
            out.append(
                Rule(name, f"release {line}'s YAML has no key for {setting} ({since}): give a later release", test)
            )
    return tuple(out)


def with_rules(releases: tuple[Release, ...], rules: tuple[Rule, ...], takes, spans: dict) -> tuple[Release, ...]:
    """`releases` with each line's rules (unwritable) after the framework's `rules`; `takes(key, line)`: whether
    every version of the line takes the key (planner.frameworks.llamafactory.releases.takes, by `spans`: SPANS)."""
    return tuple(
        replace(
            r,
            adapter={**r.adapter, "rules": rules + unwritable(r.name, takes, spans)},
            rules=r.rules + unwritten(r.name, r.first, takes),
        )
        for r in releases
    )
