"""Each VLM family's catalog config cut to a tiny model that runs real steps on a CPU in seconds: a 64-wide text
model and a 32-wide tower of two layers each, with the family's image geometry (patch, tile and merge sizes) kept, so
that its processor's image shapes and token counts are the real ones. The vocabulary is cut to 2,048 entries, its
special token ids (image, vision start and end, BOS/EOS, ...) moved to its top rows: a real CPU step's logits over
Gemma-3's 262,208 or Qwen's 151,936 entries took most of each step's time."""

from planner.model import catalog

TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "num_attention_heads": 2, "attention_heads": 2}
# what each family's tower needs beyond the widths (indices of its special layers, the width it hands the projector)
VISION_EXTRA = {
    "qwen2_5_vl": {"depth": 2, "fullatt_block_indexes": [1], "out_hidden_size": 64},
    "qwen3_vl": {"depth": 2, "deepstack_visual_indexes": [0], "out_hidden_size": 64},
    "mllama": {
        "num_hidden_layers": 2,
        "num_global_layers": 1,
        "intermediate_layers_indices": [0],
        "vision_output_dim": 64,
    },
}


# two image sizes per family for the tiny models, in LLM tokens a sample (whole tiles for the fixed-size families;
# Llama-3.2-Vision: images): tests/probes/test_vlm_sim.py and benchmarks/accuracy_vlm.py
TINY_SIZES = {
    "qwen2.5-vl-3b": (64, 150),
    "qwen3-vl-8b": (64, 150),
    "internvl2.5-8b": (256, 512),
    "llava-1.5-7b": (576, 1152),
    "llava-v1.6-mistral-7b": (1176, 2928),
    "gemma-3-4b": (256, 512),
    "smolvlm-instruct": (81, 243),
    "llama-3.2-11b-vision": (1, 2),
}


def tiny_seq(tokens: int) -> int:
    """Samples of 1,536 tokens, or 512 more than the images."""
    return max(1536, tokens + 512)


TINY_VOCAB = 2048


def _small_vocabulary(cfg: dict) -> None:
    """Cut the vocabulary to TINY_VOCAB in place, every special token id at or past it moved below it (distinct)."""
    parts = [cfg, *([cfg["text_config"]] if "text_config" in cfg else [])]

    def ids(v):
        return [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, int) and not isinstance(x, bool)]

    big = sorted({x for d in parts for k, v in d.items() if "token" in k for x in ids(v) if x >= TINY_VOCAB - 64})
    new = {old: TINY_VOCAB - 1 - i for i, old in enumerate(big)}
    for d in parts:
        for k, v in list(d.items()):
            if "token" in k and ids(v) and any(x in new for x in ids(v)):
                d[k] = [new.get(x, x) for x in v] if isinstance(v, list) else new.get(v, v)
        if "vocab_size" in d:
            d["vocab_size"] = TINY_VOCAB
    parts[-1]["vocab_size"] = TINY_VOCAB
    parts[-1].setdefault("pad_token_id", None)  # not a class default past the cut (MllamaTextConfig's 128004)


def tiny_vlm(name: str) -> dict:
    cfg = catalog.model_config(name)
    family = cfg["model_type"]
    text = {**TEXT, "num_hidden_layers": 2, "head_dim": 16}
    if family == "mllama":
        text["cross_attention_layers"] = [1]
    if family == "gemma3":
        text.update(sliding_window=64, layer_types=["sliding_attention", "full_attention"])
    vision = {k: v for k, v in VISION.items() if k in cfg["vision_config"]}
    vision.update(VISION_EXTRA.get(family, {"num_hidden_layers": 2}))
    out = {**cfg, "vision_config": {**cfg["vision_config"], **vision}}
    if "text_config" in cfg:
        out["text_config"] = {**cfg["text_config"], **text}
    else:  # Qwen2.5-VL's text keys sit at the top
        out.update(text)
    if "mrope_section" in out.get("rope_scaling", {}):  # M-RoPE's sections cover half the 16-wide heads
        out["rope_scaling"] = {**out["rope_scaling"], "mrope_section": [2, 3, 3]}
    _small_vocabulary(out)
    return out
