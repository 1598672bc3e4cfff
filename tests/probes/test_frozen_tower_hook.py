"""Which VLM families' frozen vision towers take ms-swift's `vision_tower.enable_input_require_grads()` (v2.5.2
swift/llm/sft.py:262-274, v3.0.0 swift/llm/train/sft.py:46-51, v3.12.6 swift/trainers/mixin.py:839-846, each
inside `except NotImplementedError: pass`): VisionSpec.input_embeddings of each catalog family against the tower
class transformers builds at the ms-swift 3.x lines' pins, measured in those lines' venvs (.fwenv-old/swift-*,
tools/fwenv_old.sh; MEMPLAN_FWENV_OLD) by tower_hook_probe.py. A real frozen, checkpointed forward after that call:
Qwen2-VL's tower records no graph and saves nothing; CLIP's (LLaVA's) keeps each block's input
(planner.estimate.vision.frozen_tower_checkpoint_bytes) beside its pre- and post-layernorm's inputs."""

import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest

from planner.estimate.vision import (
    frozen_tower_checkpoint_bytes,
    frozen_tower_graph_bytes,
    tile_mask_bytes,
    tile_norm_inputs_bytes,
)
from planner.model.catalog import load_model
from planner.model.modelspec import VisionSpec

ROOT = Path(os.environ.get("MEMPLAN_FWENV_OLD", Path(__file__).resolve().parents[2] / ".fwenv-old"))
PROBE = Path(__file__).parent / "tower_hook_probe.py"
# a catalog model of each family the probe builds the tower of
MODELS = {
    "qwen2_vl": "qwen2-vl-7b",
    "qwen2_5_vl": "qwen2.5-vl-7b",
    "qwen3_vl": "qwen3-vl-8b",
    "glm4v": "glm-4.1v-9b",
    "qwen2_5_omni_thinker": "qwen2.5-omni-7b",
    "qwen3_omni_moe_thinker": "qwen3-omni-30b-a3b",
    "llava": "llava-1.5-7b",
    "gemma3": "gemma-3-4b",
    "idefics3": "smolvlm-instruct",
    "internvl": "internvl3-8b",
    "mllama": "llama-3.2-11b-vision",
    "llama4": "llama-4-scout-17b-16e",
}
# the lines' venvs: 3.0.3 (transformers 4.48.3) and 3.12.6 (4.57.1), the ends of the 3.x lines that hook
VENVS = ("swift-3.0.3", "swift-3.12.6")


@cache
def _run(venv: str) -> dict | None:
    """The probe's JSON in `venv` (run once a session), or None where the venv is not built."""
    python = ROOT / venv / "bin" / "python"
    if not python.exists():
        return None
    run = subprocess.run([str(python), str(PROBE)], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def _probe(venv: str) -> dict:
    found = _run(venv)
    if found is None:
        pytest.skip(f"{ROOT / venv} is not built (tools/fwenv_old.sh {venv})")
    return found


def test_every_family_probed_is_a_catalog_vlm():
    """The table's models are the families' (cheap: no venv)."""
    for family, name in MODELS.items():
        m = load_model(name)
        assert m.vision is not None and m.model_type == family, (family, m.model_type)
    assert not load_model("internlm-xcomposer2d5-7b").vision.input_embeddings  # `vit` is an nn.Module (xcomposer.py)
    assert load_model("minicpm-v-2_6").vision.input_embeddings


@pytest.mark.sweep
@pytest.mark.parametrize("venv", VENVS)
def test_input_embeddings_is_whether_the_towers_class_takes_the_hook(venv):
    found = _probe(venv)
    hooks = {f: h for f, h in found["hooks"].items() if h is not None}  # a class the release has
    assert {"qwen2_vl", "llava", "idefics3", "mllama"} <= hooks.keys()
    for family, hooked in hooks.items():
        assert load_model(MODELS[family]).vision.input_embeddings == hooked, (found["transformers"], family)


@pytest.mark.sweep
def test_a_frozen_qwen2_vl_tower_saves_nothing_and_clips_keeps_its_block_inputs():
    forwards = _probe("swift-3.12.6")["forwards"]
    assert forwards["qwen2_vl"] == {"hooked": False, "recorded": False, "saved": 0, "patches": 64, "layers": 2}
    clip = forwards["llava"]
    assert clip["hooked"] and clip["recorded"]
    layers, hidden = clip["layers"], 32
    term = frozen_tower_checkpoint_bytes(VisionSpec(layers, hidden, 64, 2, False, 1), clip["patches"], "half")
    assert term == layers * clip["patches"] * hidden * 2
    # beside the blocks' inputs: pre_layrnorm's and post_layernorm's inputs and fp32 statistics, the weights' views
    assert term <= clip["saved"] <= term * (1 + 2 / layers) + 4096


@pytest.mark.sweep
def test_a_hooked_frozen_mllama_tower_keeps_its_block_inputs_at_4_48_and_its_whole_graph_at_4_57():
    """Mllama's encoder checkpoints its layers at 4.48.3 (modeling_mllama.py:381-382) and not at 4.57.1 (:353-357):
    after ms-swift's call the frozen tower (2 local layers, 1 global, 32 wide, MLP 64, 2 heads; 96 tokens) keeps its
    3 blocks' inputs, or its whole input-gradient graph, exact to the byte beside its edges (tile_mask_bytes, the 96 x
    96 bf16 attention mask; tile_norm_inputs_bytes, the pre-tile LayerNorm's input over 4 x 17 unpadded tokens and the
    post LayerNorm's over 96) and what the terms leave out: (un-checkpointed) the global layer's two bf16 tanh gates.
    The CPU keeps the LayerNorms' mean and rstd in bf16, which the terms count in fp32 as CUDA's layer_norm keeps them."""
    old, new = _probe("swift-3.0.3")["forwards"]["mllama"], _probe("swift-3.12.6")["forwards"]["mllama"]
    tokens, keys = 96, 4 * 17
    v = VisionSpec(3, 32, 64, 2, False, 1, gated_layers=1, cross_tokens_per_token=keys, attention_tokens=tokens)
    edge_stats = (keys + tokens) * 2 * (4 - 2)  # the two edge LayerNorms' mean and rstd, in bf16 on the CPU
    edges = tile_mask_bytes(v, 1, "half") + tile_norm_inputs_bytes(v, 1, "half", True) - edge_stats
    assert edges == keys * (32 * 2 + 2 * 2) + tokens * tokens * 2 + tokens * (32 * 2 + 2 * 2)
    assert all(f["hooked"] and f["recorded"] for f in (old["checkpointed"], new["checkpointed"], new["plain"]))
    assert old["checkpointed"]["saved"] == frozen_tower_checkpoint_bytes(v, tokens, "half") + edges == 48016
    cpu_stats = 3 * tokens * 2 * 2 * (4 - 2)  # 2 LayerNorms x mean and rstd, 2 bytes fewer each than fp32
    graph = frozen_tower_graph_bytes(v, tokens, "half") - cpu_stats + edges + 2 * 2
    assert new["checkpointed"]["saved"] == new["plain"]["saved"] == old["plain"]["saved"] == graph == 181652
