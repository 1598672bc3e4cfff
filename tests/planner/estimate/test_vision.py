"""planner.estimate.vision's rules, torch-free (the bytes themselves are pinned to the sim in
tests/probes/test_vision_terms.py)."""

from dataclasses import replace

from planner.config.spec import GIB, Knobs
from planner.estimate import activation_terms, nograd, state_terms
from planner.estimate import memory as mem
from planner.estimate.setup import Setup
from planner.estimate.vision import (
    frozen_tower_checkpoint_bytes,
    frozen_tower_graph_bytes,
    gated_bytes,
    masked_tower_bytes,
    projector_input_bytes,
    tile_embedding_bytes,
    tile_mask_bytes,
    tile_norm_inputs_bytes,
    vision_activations_bytes,
    vision_block_bytes,
)
from planner.model.catalog import load_model


def test_layers_past_the_feature_layer_save_nothing():
    v = load_model("llava-1.5-7b").vision  # vision_feature_layer -2
    assert v.unused_layers == 1 and v.block == "quick-gelu"
    block = vision_block_bytes(v, 576, "half")
    assert vision_activations_bytes(v, 1, 576, "half", "off", True) == (v.layers - 1) * block


def test_gated_layers_keep_two_more_tensors_and_a_frozen_tower_keeps_none():
    v = load_model("llama-3.2-11b-vision").vision
    assert v.gated_layers == 8 and v.block == "plain"
    p = v.patches_per_token
    plain = replace(v, gated_layers=0)
    assert vision_activations_bytes(v, 1, 1, "half", "off", True) - vision_activations_bytes(
        plain, 1, 1, "half", "off", True
    ) == 8 * gated_bytes(p, v.hidden, "half")
    assert vision_activations_bytes(v, 1, 1, "half", "off", False) == 0


def test_torch_amp_casts_a_norms_output_for_each_linear_reading_it():
    """CLIP's q, k and v each cast the first norm's output under AMP (two copies more than one fused qkv reads)."""
    clip, qwen3 = load_model("llava-1.5-7b").vision, load_model("qwen3-vl-8b").vision
    for v, extra in ((clip, 2), (qwen3, 0)):
        half_like = vision_block_bytes(v, 100, "amp") - 2 * 2 * 100 * v.hidden  # residual: fp32 under AMP
        assert half_like - vision_block_bytes(v, 100, "half") == extra * 2 * 100 * v.hidden


def _qwen2_vl_run(release: str, attention: str = "sdpa", lora_vision: bool = True, image_tokens: int = 8192):
    """Qwen2-VL-7B, LoRA (on the tower too unless lora_vision False), checkpointed, one 8,192-token image and 2,048
    text tokens a row, ms-swift `release`."""
    knobs = Knobs(
        precision="bf16",
        checkpointing="full",
        lora_rank=8,
        lora_vision=lora_vision,
        attention=attention,
        framework="swift",
        release=release,
    )
    return Setup(load_model("qwen2-vl-7b"), knobs, 1, 1, image_tokens + 2048, 8, 1, image_tokens=image_tokens)


def test_ms_swift_2s_transformers_run_every_heads_scores_over_the_calls_patches():
    """ms-swift 2.x runs transformers 4.45-4.47, whose Qwen2-VL tower computes heads x N x N scores under SDPA
    (masked_tower_bytes, pinned to torch in tests/probes/test_masked_tower.py): a trained tower's backward holds
    three of them, 96 bytes a pair of patches in bf16; the 4.x line's transformers split the call per image."""
    n = 8192 * 4  # patches: 4 a token (2 x 2 merge)
    old, new = _qwen2_vl_run("2"), _qwen2_vl_run("")
    assert nograd.masked_tower(old) and not nograd.masked_tower(new)
    assert masked_tower_bytes(old.model.vision, n, "amp", True) == 96 * n * n
    b = mem.breakdown(old, 80 * GIB)
    tower = mem.masked_tower_phase(old, 0, state_terms.gradients_bytes(old), state_terms.optimizer_bytes(old))
    assert b.peak_phase == "backward" and b.peak_allocated_bytes == b.params_bytes + b.grads_bytes + sum(tower[1:])
    assert b.peak_allocated_bytes - mem.breakdown(new, 80 * GIB).peak_allocated_bytes > 96 * n * n // 2


def test_a_frozen_tower_runs_it_in_its_forward_and_flash_attention_not_at_all():
    frozen = _qwen2_vl_run("2", lora_vision=False)
    n = 8192 * 4
    b = mem.breakdown(frozen, 80 * GIB)
    assert b.peak_phase == "forward" and b.temp_bytes >= 67 * n * n  # both masks, the scores and their softmax
    assert not nograd.masked_tower(_qwen2_vl_run("2", attention="flash"))  # VisionFlashAttention2: varlen, no mask
    assert not nograd.masked_tower(_qwen2_vl_run("2", image_tokens=0))


def test_without_checkpointing_each_trained_block_keeps_its_softmax_for_the_backward():
    ckpt = _qwen2_vl_run("2")
    off = Setup(
        ckpt.model, ckpt.knobs.model_copy(update={"checkpointing": "off"}), 1, 1, 10240, 8, 1, image_tokens=8192
    )
    new = Setup(off.model, off.knobs.model_copy(update={"release": ""}), 1, 1, 10240, 8, 1, image_tokens=8192)
    n, v = 8192 * 4, off.model.vision
    assert (
        activation_terms.activations_bytes(off) - activation_terms.activations_bytes(new)
        == (v.layers - v.unused_layers) * 16 * 2 * n * n
    )


def test_the_3x_and_3_4_lines_run_it_too_and_3_7_does_not():
    """ms-swift 3.0-3.2 pin transformers <4.51, whose Qwen2-VL and Qwen2.5-VL towers still pass SDPA 3-D tensors;
    3.3.x and the 3.4 line (3.4.0-3.6.4) allow the same >=4.33,<4.53 (requirements/framework.txt), 4.49-4.50
    among them, and are read the hungrier way; 3.7's line is not."""
    assert nograd.masked_tower(_qwen2_vl_run("3")) and nograd.masked_tower(_qwen2_vl_run("3.4"))
    assert not nograd.masked_tower(_qwen2_vl_run("3.7"))
    s = _qwen2_vl_run("3")
    qwen25 = Setup(load_model("qwen2.5-vl-7b"), s.knobs, 1, 1, 10240, 8, 1, image_tokens=8192)
    assert nograd.masked_tower(qwen25) and qwen25.model.vision.heads == 16
    assert not nograd.masked_tower(Setup(load_model("qwen3-vl-8b"), s.knobs, 1, 1, 10240, 8, 1, image_tokens=8192))


def _minicpm_v_run(release: str, checkpointing: str = "full", lora_vision: bool = False) -> Setup:
    """MiniCPM-V 2.6 int4, LoRA on the language model (its tower frozen), one image at the whole and 9 slices (640
    tokens, 10,240 patches) and 2,048 text tokens a row, ms-swift `release`."""
    knobs = Knobs(
        precision="bf16",
        checkpointing=checkpointing,
        lora_rank=8,
        lora_vision=lora_vision,
        quant="nf4",
        framework="swift",
        release=release,
    )
    return Setup(load_model("minicpm-v-2_6-int4"), knobs, 1, 1, 2688, 8, 1, image_tokens=640)


def test_ms_swift_2s_input_hook_keeps_a_frozen_minicpm_towers_block_inputs():
    """v2.5.2 swift/llm/sft.py:262-272 hooks the vision tower's input under checkpointing whatever its freezing: the
    frozen tower's 27 checkpointed blocks keep their inputs, 27 x 10,240 patches x 1,152 x 2 bytes (0.59 GiB; the
    mechanism measured in tests/probes/test_frozen_tower_grads.py), as every 3.x line does; the 4 line, read at
    4.6.0, does not (vit_gradient_checkpointing follows freeze_vit, v4.5.2 swift/trainers/mixin.py:945-955)."""
    old, new = _minicpm_v_run("2"), _minicpm_v_run("")
    v = old.model.vision
    assert v.input_embeddings and v.layers == 27 and activation_terms.frozen_tower_in_graph(old)
    assert not activation_terms.frozen_tower_in_graph(new)
    assert all(activation_terms.frozen_tower_in_graph(_minicpm_v_run(r)) for r in ("3", "3.4", "3.7", "3.9"))
    added = activation_terms.activations_bytes(old) - activation_terms.activations_bytes(new)
    assert added == frozen_tower_checkpoint_bytes(v, 10240, "half") == 27 * 10240 * 1152 * 2
    off = (_minicpm_v_run(r, checkpointing="off") for r in ("2", ""))  # not examined un-checkpointed: nothing added
    assert len({activation_terms.activations_bytes(s) for s in off}) == 1
    assert not activation_terms.frozen_tower_in_graph(_minicpm_v_run("2", lora_vision=True))  # trained: counted as such
    assert not load_model("qwen2-vl-7b").vision.input_embeddings  # its tower takes no hook (test_frozen_tower_hook.py)


def _lora_run(model: str, release: str, image_tokens: int) -> Setup:
    """`model` in bf16, LoRA on the language model (its tower frozen), one image of `image_tokens` LLM tokens and
    2,048 text tokens a row, ms-swift `release`, checkpointed."""
    knobs = Knobs(precision="bf16", checkpointing="full", lora_rank=8, framework="swift", release=release)
    return Setup(load_model(model), knobs, 1, 1, 2048 + image_tokens, 8, 1, image_tokens=image_tokens)


def test_the_3x_hook_keeps_a_frozen_internvl_towers_block_inputs_and_no_qwen_towers():
    """InternViT's class defines get_input_embeddings (transformers' InternVLVisionModel and the remote
    InternVisionModel alike), so the 3.x lines' hook takes: 12 tiles and the thumbnail (13 x 256 tokens, 13 x 1,024
    patches as vision.encoder_tokens counts them, each tile's CLS left out), 24 blocks x 1,024 wide x 2 bytes, 0.61
    GiB; Qwen2.5-VL's tower raises NotImplementedError, which ms-swift passes over: nothing
    (tests/probes/test_frozen_tower_hook.py measures both classes)."""
    internvl = {r: _lora_run("internvl3-8b", r, 13 * 256) for r in ("3", "")}
    assert activation_terms.frozen_tower_in_graph(internvl["3"]) and not activation_terms.frozen_tower_in_graph(
        internvl[""]
    )
    added = activation_terms.activations_bytes(internvl["3"]) - activation_terms.activations_bytes(internvl[""])
    assert (
        added == frozen_tower_checkpoint_bytes(internvl["3"].model.vision, 13 * 1024, "half") == 24 * 13 * 1024**2 * 2
    )
    qwen = {r: _lora_run("qwen2.5-vl-7b", r, 1024) for r in ("3", "")}
    assert not activation_terms.frozen_tower_in_graph(qwen["3"])


def test_the_hook_keeps_a_frozen_mllama_towers_block_inputs_up_to_3_4_and_its_whole_graph_from_3_7():
    """Mllama's encoder checkpoints its layers at the transformers ms-swift 2, 3 and 3.4 pin (<=4.52.4), not at 3.7's
    and 3.9's (4.56.2, 4.57.1; VisionSpec.checkpointed_until): one image of 4 tiles (6,432 tokens) keeps its 40
    blocks' inputs under the first, each block's input-gradient graph under the others, nothing under the 4 line
    (measured: tests/probes/test_frozen_tower_hook.py); beside either, the tower's edges: its 6,432 x 6,432 tile mask
    and its two LayerNorms' inputs (over the 6,404 keys and the 6,432 tokens) with their statistics."""
    runs = {r: _lora_run("llama-3.2-11b-vision", r, 1) for r in ("2", "3", "3.4", "3.7", "3.9", "")}
    v = runs[""].model.vision
    assert v.layers == 40 and not v.checkpointed and v.checkpointed_until == (4, 55, 4)
    base = activation_terms.activations_bytes(runs[""])
    added = {r: activation_terms.activations_bytes(s) - base for r, s in runs.items()}
    blocks = frozen_tower_checkpoint_bytes(v, 6432, "half")
    assert blocks == 40 * 6432 * 1280 * 2
    edges = tile_mask_bytes(v, 1, "half") + tile_norm_inputs_bytes(v, 1, "half", True)
    assert edges == 6432**2 * 2 + (6432 + 6404) * (1280 * 2 + 2 * 4)
    assert added["2"] == added["3"] == added["3.4"] == blocks + edges
    graph = frozen_tower_graph_bytes(v, 6432, "half")
    assert graph == 40 * 6432 * ((6 * 1280 + 5120) * 2 + (4 + 16) * 4)
    assert added["3.7"] == added["3.9"] == graph + edges and added[""] == 0


def test_a_trained_mllama_tower_keeps_its_tile_mask_norm_inputs_embedding_and_projector_input():
    """Llama-3.2-11B-Vision, one image a sample (4 tiles: 6,432 tower tokens, 6,404 keys), micro-batch 2, bf16-pure:
    beside its blocks the trained tower keeps its tile mask, its two LayerNorms' inputs and its tile embedding, and the
    trained projector its 7,680-wide input; a frozen tower leaves the projector's alone, LoRA neither (pinned to what
    the model saves: tests/probes/test_mllama.py on CPU, tests/probes/test_vision_terms.py in the sim)."""
    model = load_model("llama-3.2-11b-vision")
    v = model.vision

    def run(**kw) -> Setup:
        return Setup(model, Knobs(precision="bf16-pure", **kw), 2, 1, 2048, 8, 1, image_tokens=1)

    tower = tile_mask_bytes(v, 2, "half") + tile_norm_inputs_bytes(v, 2, "half", True)
    tower += tile_embedding_bytes(v, 2, "half")
    assert tower == 2 * (6432**2 * 2 + (6432 + 6404) * (1280 * 2 + 8) + 6404 * 1280 * 2)
    assert projector_input_bytes(v, 2, "half") == 2 * 6404 * 7680 * 2
    assert activation_terms.tiled_tower_bytes(run()) == tower + projector_input_bytes(v, 2, "half")
    assert activation_terms.tiled_tower_bytes(run(frozen="vision")) == projector_input_bytes(v, 2, "half")
    assert activation_terms.tiled_tower_bytes(run(lora_rank=8)) == 0
    assert activation_terms.tiled_tower_bytes(run(attention="eager")) == tower + projector_input_bytes(
        v, 2, "half"
    ) - tile_mask_bytes(v, 2, "half")
    assert tower // 2 == 132_098_336  # 0.123 GiB an image, and 0.092 GiB the projector's input
