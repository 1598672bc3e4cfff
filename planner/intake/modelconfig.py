"""What the readers need from a model's config.json (found by planner.intake.models): its text config, its context
length as ms-swift reads it, whether it has a vision tower and that tower's pixels per image token, and the
framework freeze switches said as Knobs.frozen and lora_vision."""

from __future__ import annotations

from planner.intake.collect import Collector, as_bool


def text_config(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg.get("llm_config") or cfg


def context(cfg: dict) -> int | None:
    """The model's context as ms-swift reads it: the least of its length keys (swift/utils/hf_config.py:127-149)."""
    keys = (
        "seq_length",
        "max_position_embeddings",
        "n_positions",
        "model_max_length",
        "seq_len",
        "max_seq_len",
        "max_sequence_length",
        "max_seq_length",
    )
    found = [v for c in (cfg, text_config(cfg)) for k in keys if isinstance(v := c.get(k), int) and v > 0]
    return min(found) if found else None


def has_vision(cfg: dict) -> bool:
    return isinstance(cfg.get("vision_config"), dict)


def tower_known(c: Collector, f: dict, keys: tuple[str, ...]) -> bool:
    """Whether the reading's model is known to have a vision tower; where the model is not known, one line naming the
    vision settings the files give (each needs the model: its tower, its pixels a token), which are then not planned."""
    if c.model is not None:
        return has_vision(c.model.config)
    given = [f[k].source for k in keys if k in f]
    if given:
        c.note(
            f"{'; '.join(given)} (a VLM's settings, for a model not known here: not planned; pass --model with the "
            "model's id or its config.json)"
        )
    return False


def lora_tower(c: Collector, tower: object, source: str, key: str, why: str) -> None:
    """A framework's own all-linear LoRA keeps a VLM's tower out while its freeze switch is on (its default); switched
    off, the adapters reach the tower's linears too (memplan's lora_vision: the tower's and the projector's)."""
    s = c.setting("lora_targets")
    frozen = as_bool(tower)
    if frozen is None or s is None or s.value != "all-linear":
        return
    c.set("lora_vision", not frozen, f"{source} ({why})" if not frozen else source, key)


def pixels_per_token(cfg: dict) -> int | None:
    """Pixels per image token of a tower that merges patches spatially within a pixel budget (the Qwen-VL processors'
    max_pixels): (patch x spatial merge)^2, 28^2 with 14-pixel patches, 32^2 with 16; None for other towers, whose
    tokens do not follow the pixel budget."""
    v = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), dict) else {}
    patch, merge = v.get("patch_size") or v.get("spatial_patch_size"), v.get("spatial_merge_size")
    return (patch * merge) ** 2 if isinstance(patch, int) and isinstance(merge, int) else None


def frozen_value(tower: bool, projector: bool, language: bool) -> tuple[str, str | None]:
    """Knobs.frozen for a framework's three freeze switches, and a note where the plan cannot say them exactly."""
    if language:
        if projector:
            return (
                "language+vision",
                "a frozen projector beside a frozen language model is not planned; planned trained",
            )
        return ("language+vision" if tower else "language"), None
    if projector and not tower:
        return "none", "a frozen projector beside a trained tower is not planned; planned with both trained"
    return ("vision+projector" if projector else "vision") if tower else "none", None
