"""What every family reader shares: parameter tensor groups (`Tensors`) and the checked readers of sizes and
numbers in a config.json (a bad value is a one-line BadInput naming the key, never a traceback)."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from planner.errors import BadInput

ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "attn.c_attn", "attn.c_proj")
def module_name_matches(name: str, target: str) -> bool:
    """A linear's name against a --lora-targets entry, as PEFT matches target_modules: equal, or a dotted suffix."""
    return name == target or name.endswith("." + target) or target.endswith("." + name)


@dataclass(frozen=True)
class Tensors:
    """`count` parameter tensors of one shape. role: embed | layer | head | norm | vision | projector."""

    role: str
    shape: tuple[int, ...]
    count: int = 1
    lora: bool = False  # a decoder linear weight that LoRA ("all-linear") adapts
    name: str = ""      # a linear's module name in transformers (q_proj, ..., GPT-2's attn.c_proj): LoRA targets
    all_linear: int = 1  # PEFT's rank multiple under target_modules="all-linear" (0: not adapted; MoE: moespec)

    def adapted(self, targets: str) -> bool:
        """Whether LoRA with --lora-targets `targets` adapts this weight: all-linear, attention (q/k/v/o), or a
        comma list of module names matched as PEFT matches them (the name or its dotted suffix)."""
        if not self.lora:
            return False
        if targets == "all-linear":
            return self.all_linear > 0
        if self.experts:       # named stacked experts are PEFT's target_parameters
            return any(module_name_matches(self.name, n) for n in targets.split(",") if n.startswith("experts"))
        if self.name.startswith("router."):     # not an nn.Linear: adapted only by PEFT's all-linear (moespec)
            return False
        names = ATTENTION_LINEARS if targets == "attention" else targets.split(",")
        return any(module_name_matches(self.name, n) for n in names)

    def lora_rank_multiple(self, targets: str) -> int:
        return self.all_linear if targets == "all-linear" else 1

    @property
    def experts(self) -> bool:
        """Stacked expert weights (experts x out x in): one nn.Parameter in transformers, no nn.Linear."""
        return len(self.shape) == 3 and self.lora

    @property
    def numel(self) -> int:
        return prod(self.shape) * self.count


# Past these a config describes no trainable model (and the arithmetic stops meaning anything).
MAX_SIZE = {"hidden": 10**6, "layers": 10**4, "heads": 10**4, "vocab": 10**8, "intermediate": 10**7,
            "positions": 1 << 24, "other": 10**6}

def size_kind(key: str) -> str:
    for kind, words in (("layers", ("layer", "depth")), ("heads", ("head",)), ("vocab", ("vocab",)),
                        ("intermediate", ("intermediate", "inner")), ("positions", ("position",)),
                        ("hidden", ("hidden", "embd", "embed_dim", "head_dim"))):
        if any(w in key for w in words) and not (kind == "heads" and key == "head_dim"):
            return kind
    return "other"


def size(cfg: dict, key: str, *alts: str, default=None):
    """A size from a config: a positive integer (not a bool, float, NaN or string) within MAX_SIZE."""
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return checked_size(cfg, k, cfg[k])
    if default is not None:
        return default
    raise BadInput(f"config.json lacks '{key}' (needed for a {cfg.get('model_type', '?')} model)", "model")


def checked_size(cfg: dict, key: str, v):
    if isinstance(v, (list, tuple, dict)):
        return v        # shapes such as image_size [448, 448] are checked where they are read
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInput(f"config.json: {key} = {v!r} must be a positive integer", "model")
    limit = MAX_SIZE[size_kind(key)]
    if not 1 <= v <= limit:
        raise BadInput(f"config.json: {key} = {v} must be an integer from 1 to {limit}", "model")
    return v


def number(cfg: dict, key: str, default: float, low: float = 0.0, high: float = 1e6) -> float:
    """A real-valued setting (rates, ratios, caps): a finite number in [low, high]."""
    v = cfg.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high:
        raise BadInput(f"config.json: {key} = {v!r} must be a number from {low:g} to {high:g}", "model")
    return float(v)


def sub(cfg: dict, key: str, required: bool = True) -> dict:
    """A nested config (text_config, vision_config): a JSON object."""
    v = cfg.get(key)
    if v is None and not required:
        return {}
    if not isinstance(v, dict):
        raise BadInput(f"config.json: {key} must be a JSON object" + (" (missing)" if v is None else ""), "model")
    return v


def divides(whole: int, whole_key: str, part: int, part_key: str) -> None:
    if whole % part:
        raise BadInput(f"config.json: {part_key} = {part} does not divide {whole_key} = {whole}", "model")


def linear(role: str, d_out: int, d_in: int, n: int, bias: bool, lora: bool = False, name: str = "") -> list[Tensors]:
    out = [Tensors(role, (d_out, d_in), n, lora, name)]
    return out + [Tensors(role, (d_out,), n)] if bias else out


