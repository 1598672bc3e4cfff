"""Llama-3.2-Vision (model_type mllama), counted exactly from config.json as transformers 5.23 builds
MllamaForConditionalGeneration (models/mllama/modeling_mllama.py; each count equals the meta-device model's:
tests/planner/model/test_vlm_families.py):

- the tower (vision_model): a patch convolution without bias, a class embedding, a gated position embedding with a
  tile table of (aspect ratios + 1) x (tiles x patches x width) (73.8M of Llama-3.2-11B-Vision's 864M), gated pre-
  and post-tile embeddings, two LayerNorms, `num_hidden_layers` local layers and `num_global_layers` gated ones
  (unbiased q, k, v, o; a biased two-linear MLP; two LayerNorms);
- the projector: one biased Linear from vision_output_dim (the last layer and the intermediate layers concatenated)
  to the text width;
- the language model: a llama decoder whose layers at `cross_attention_layers` attend to the image instead of the
  text (the same four projections with q and k norms over the head and two scalar gates), an embedding of
  vocab_size + 8 rows, an lm_head of vocab_size that is never tied (_tied_weights_keys is commented out), and a
  head size that is always hidden / heads (MllamaTextConfig has no head_dim).

An image is always max_num_tiles tiles (absent tiles are zero and masked) of (image_size / patch)^2 + 1 patches,
padded to a multiple of 8 inside the tower: 6,432 encoder tokens for one text token (<|image|>), and 6,404 keys and
values in each cross-attention layer (planner.estimate.activations.cross_attention_bytes, pinned by the tensors a
tiny Mllama saves: tests/probes/test_mllama.py). The tower's layers do not checkpoint under gradient checkpointing
(only the decoder layers do).
"""

from __future__ import annotations

from planner.model.shapes import Tensors
from planner.model.shapes import linear as _linear

VISION_DEFAULTS = {  # MllamaVisionConfig (configuration_mllama.py:61-95)
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_hidden_layers": 32,
    "num_global_layers": 8,
    "attention_heads": 16,
    "num_channels": 3,
    "image_size": 448,
    "patch_size": 14,
    "max_num_tiles": 4,
    "vision_output_dim": 7680,
    "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
}
TEXT_DEFAULTS = {  # MllamaTextConfig (configuration_mllama.py:124-145)
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
}
EXTRA_EMBEDDINGS = 8  # embed_tokens has vocab_size + 8 rows, the image token among them (modeling_mllama.py:1021)
TOWER, PROJECTOR = ("vision_model.",), ("multi_modal_projector.",)
TOWER_UNITS = ("MllamaVisionEncoderLayer",)
TEXT_UNITS = ("MllamaSelfAttentionDecoderLayer", "MllamaCrossAttentionDecoderLayer")


def resolve(cfg: dict) -> tuple[dict, dict]:
    """(vision fields, text fields) as transformers fills them; a vision config's num_attention_heads is its alias."""
    v_in = dict(cfg.get("vision_config") or {})
    if "num_attention_heads" in v_in and "attention_heads" not in v_in:
        v_in["attention_heads"] = v_in.pop("num_attention_heads")
    t_in = {k: v for k, v in (cfg.get("text_config") or {}).items() if k != "head_dim"}
    text = {**TEXT_DEFAULTS, **t_in, "model_type": "mllama_text_model", "tie_word_embeddings": False}
    return {**VISION_DEFAULTS, **v_in}, text


def patches_per_tile(v: dict) -> int:
    """(image_size / patch_size)^2 patches and the class token (modeling_mllama.py:825)."""
    return (v["image_size"] // v["patch_size"]) ** 2 + 1


def encoder_tokens_per_image(v: dict) -> int:
    """The tower's sequence for one image: every tile, each padded to a multiple of 8 (6,432 for 4 tiles of 1601)."""
    p = patches_per_tile(v)
    return v["max_num_tiles"] * (p + (-p) % 8)


def cross_tokens_per_image(v: dict) -> int:
    """Keys and values one image gives each cross-attention layer: every tile's patches, unpadded (6,404)."""
    return v["max_num_tiles"] * patches_per_tile(v)


def cross_layers(text: dict) -> int:
    """Decoder layers that attend to the image: the indices of cross_attention_layers below num_hidden_layers."""
    return len({i for i in text["cross_attention_layers"] if 0 <= i < text["num_hidden_layers"]})


def first_cross_layer(text: dict) -> int:
    """The lowest decoder layer that attends to the image (0 when none does)."""
    return min((i for i in text["cross_attention_layers"] if 0 <= i < text["num_hidden_layers"]), default=0)


def _vision_layers(h: int, i: int, n: int) -> list[Tensors]:
    out = _linear("vision", h, h, 4 * n, False) + _linear("vision", i, h, n, True) + _linear("vision", h, i, n, True)
    return out + [Tensors("vision", (h,), 4 * n)]


def vision_tensors(v: dict, text_hidden: int) -> list[Tensors]:
    """The tower (modeling_mllama.py:825-849) and the projector (:1274-1278)."""
    h, p, c = v["hidden_size"], v["patch_size"], v["num_channels"]
    tiles, ratios, per_tile = v["max_num_tiles"], len(v["supported_aspect_ratios"]), patches_per_tile(v)
    t = [Tensors("vision", (h, c, p, p)), Tensors("vision", (h,)), Tensors("vision", (1,))]
    t += [Tensors("vision", (per_tile, h)), Tensors("vision", (ratios + 1, tiles * per_tile * h))]
    t += [Tensors("vision", (ratios + 1, tiles * h), 2), Tensors("vision", (1,), 2), Tensors("vision", (h,), 4)]
    n_local, n_global = v["num_hidden_layers"], v["num_global_layers"]
    t += _vision_layers(h, v["intermediate_size"], n_local + n_global) + [Tensors("vision", (1,), 2 * n_global)]
    return t + _linear("projector", text_hidden, v["vision_output_dim"], 1, True)


def text_tensors(text: dict, t: list[Tensors], head_dim: int) -> list[Tensors]:
    """decoders' llama tensors made Mllama's: the 8 extra embedding rows, and in each cross-attention layer the q
    and k norms over the head and the two gates (modeling_mllama.py:662-675)."""
    out = [Tensors("embed", (x.shape[0] + EXTRA_EMBEDDINGS, x.shape[1])) if x.role == "embed" else x for x in t]
    n = cross_layers(text)
    return out + ([Tensors("layer", (head_dim,), 2 * n), Tensors("layer", (1,), 2 * n)] if n else [])


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors], tuple[str, ...]]:
    """(the language model's config for decoders' llama reader, its VisionSpec, the tower's and projector's tensors,
    the FSDP units), as planner.model.vlm.read gives them for the other families."""
    v, text = resolve(cfg)
    n = v["num_hidden_layers"] + v["num_global_layers"]
    spec = vision_spec(
        n,
        v["hidden_size"],
        v["intermediate_size"],
        v["attention_heads"],
        False,
        encoder_tokens_per_image(v),
        TOWER,
        PROJECTOR,
        checkpointed=False,
        cross_tokens_per_token=cross_tokens_per_image(v),
        projector_input=v["vision_output_dim"],
        block="plain",
        gated_layers=v["num_global_layers"],
        attention_tokens=encoder_tokens_per_image(v),  # all of an image's tiles in one attention call
        # MllamaVisionModel.get_input_embeddings: patch_embedding (4.46.1 modeling_mllama.py:1356, 4.57.1 :984);
        # MllamaVisionEncoder checkpoints its layers at 4.48.3 and 4.52.4 (modeling_mllama.py:381-382, :390-391)
        # and 4.53.0 (:391), not at 4.55.4 or 4.57.1 (:353-357: a plain loop over nn.Module layers)
        input_embeddings=True,
        checkpointed_until=(4, 55, 4),
    )
    return text, spec, vision_tensors(v, text["hidden_size"]), TOWER_UNITS + TEXT_UNITS
