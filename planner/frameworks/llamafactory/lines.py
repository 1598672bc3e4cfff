"""What LLaMA-Factory's older release lines have no key or word for: a plan's setting whose YAML key (SPANS) or value
(keys.py OLD_FLASH_ATTN) not every version of a line takes becomes a rule of that line (Release.adapter), so `suggest`
never ranks what the line's YAML cannot say and writer.py refuses it in one line naming the release."""

from __future__ import annotations

from dataclasses import replace

from planner.frameworks.base import Release, Rule
from planner.frameworks.llamafactory.keys import KEYS

# the settings writer.py writes a key for only when a plan has them: (KEYS field, the setting as its flag, the test)
NEEDS = (
    ("loss", "--loss fused", lambda k: k.get("loss") == "fused"),
    ("checkpointing_offload", "--checkpointing offload", lambda k: k.get("checkpointing") == "offload"),
    ("pure_bf16", "--precision bf16-pure", lambda k: k.get("precision") == "bf16-pure"),
    ("lora_variant", "--lora-variant dora", lambda k: bool(k.get("lora_rank")) and k.get("lora_variant") == "dora"),
)


def _shown(version: tuple) -> str:
    return "v" + ".".join(map(str, version))


def unwritable(line: str, takes, spans: dict) -> tuple[Rule, ...]:
    """The rules of release line `line`: a plan's setting whose key (NEEDS) or value (keys.py OLD_FLASH_ATTN) not every
    version of the line takes is refused in one line, so `suggest` never ranks what the line's YAML cannot say."""
    out = []
    for name, setting, test in NEEDS:
        key = KEYS.key(name, line)
        if not takes(key, line):
            since = f"{key} from {_shown(spans[key][0])}"
            out.append(
                Rule(name, f"release {line}'s YAML has no key for {setting} ({since}): give a later release", test)
            )
    spelled = KEYS["attention"].values.get(line)
    if spelled is not None and set(spelled) != set(KEYS["attention"].to_value):
        words = ", ".join(spelled)
        why = f"release {line}'s flash_attn spells --attention {words} only (keys.py OLD_FLASH_ATTN)"
        out.append(Rule("attention", why, lambda k, s=tuple(spelled): k.get("attention", "sdpa") not in s))
    return tuple(out)


def with_rules(releases: tuple[Release, ...], rules: tuple[Rule, ...], takes, spans: dict) -> tuple[Release, ...]:
    """`releases` with each line's rules (unwritable) after the framework's `rules`; `takes(key, line)`: whether
    every version of the line takes the key (planner.frameworks.llamafactory.takes, by `spans`: SPANS)."""
    return tuple(replace(r, adapter={**r.adapter, "rules": rules + unwritable(r.name, takes, spans)}) for r in releases)
