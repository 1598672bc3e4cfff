"""device_map placement (planner/estimate/devicemap.py) against accelerate's own get_balanced_memory and
infer_auto_device_map on the meta-device models transformers builds from the catalog configs: the layers, the
embeddings and the head on each GPU, exactly (accelerate 1.16.0, transformers 5.25)."""

import re

import pytest

from planner.errors import BadInput
from planner.estimate import devicemap
from planner.model import catalog

GiB = 2**30
MODELS = ["qwen2.5-7b", "qwen2.5-0.5b", "llama-3.1-8b", "mistral-7b", "gemma-2-2b", "phi-3-mini", "llama-3.2-1b"]
VLMS = ["qwen2.5-vl-7b", "qwen2.5-vl-72b"]  # the tower (model.visual) first, placed whole


def accelerate_placement(name: str, n: int, capacity: int) -> list[tuple[int, int, bool, bool]]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    cfg = catalog.model_config(name)
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    auto = transformers.AutoModelForImageTextToText if "vision_config" in cfg else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(conf, dtype=torch.bfloat16)
    kw = {"no_split_module_classes": model._no_split_modules, "dtype": torch.bfloat16}
    memory = get_balanced_memory(model, max_memory={i: capacity for i in range(n)}, **kw)
    placed = infer_auto_device_map(model, max_memory=memory, **kw)
    if "" in placed:  # clean_device_map: every module on one GPU (none fits under the others' caps)
        placed = {f"model.layers.{i}": placed[""] for i in range(cfg["num_hidden_layers"])} | {
            "model.embed_tokens": placed[""],  # (a text model's names: the VLM rows place more than fits one GPU)
            "lm_head": placed[""],
        }
    out = []
    for d in range(n):
        layers = sorted(
            int(m.group(1)) for k, v in placed.items() if v == d and (m := re.search(r"\blayers\.(\d+)$", k))
        )
        embed = any(v == d for k, v in placed.items() if k.endswith("embed_tokens"))
        out.append((layers[0] if layers else None, len(layers), embed, placed.get("lm_head") == d))
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("name", MODELS + VLMS)
def test_each_gpu_holds_what_accelerate_places_on_it(name, n):
    model = catalog.load_model(name)
    ours = devicemap.split(model, n, 2, 80 * GiB)
    want = accelerate_placement(name, n, 80 * GiB)
    got = [(d.first_layer if d.layers else None, d.layers, d.embed, d.head) for d in ours]
    assert got == want
    assert sum(d.weight_bytes for d in ours) == pytest.approx(model.params * 2, rel=1e-6)


def test_a_gpu_holds_its_layers_and_only_the_last_the_logits():
    model = catalog.load_model("qwen2.5-7b")
    first, last = devicemap.split(model, 2, 2, 80 * GiB)
    a, b = devicemap.device_model(model, first), devicemap.device_model(model, last)
    assert (a.text.layers, b.text.layers) == (12, 16) and (a.text.vocab, b.text.vocab) == (0, model.text.vocab)
    assert a.params + b.params == model.params


def test_an_moe_model_or_a_tower_over_gpus_is_refused_in_one_line():
    with pytest.raises(BadInput, match="layers differ in size"):
        devicemap.split(catalog.load_model("mixtral-8x7b"), 2, 2, 80 * GiB)
    with pytest.raises(BadInput, match="vision tower spans GPUs"):
        devicemap.split(catalog.load_model("qwen2.5-vl-7b"), 8, 2, GiB)


def plan(**kw):
    from planner import advise

    body = {"model": "qwen2.5-7b", "gpu": "rtx4090", "micro_batch": 1, "seq_len": 2048, "lora_rank": 8}
    body |= {"checkpointing": "full", "framework": "swift", **kw}
    return advise.check(advise.parse(advise.CheckRequest, body)).plan


def test_the_plan_is_the_fullest_gpus_and_runs_at_one_gpus_speed():
    """The GPU holding layers 12-27 and the head decides (16 of 28 layers, the logits); the GPUs work in turn, so the
    step takes what one GPU takes for the whole model, plus the hidden state's two hops."""
    from planner.estimate import memory, parallel
    from planner.estimate.setup import Setup

    one, two = plan(), plan(gpus_per_node=2, device_map=2)
    view = parallel.view(Setup(catalog.load_model("qwen2.5-7b"), two.knobs, 1, 1, 2048, 2, gpu="rtx4090"))
    cap = two.memory.capacity_bytes
    per_gpu = [memory._breakdown(s, cap, None) for s in devicemap.setups(view, cap)]  # each GPU's, on its own
    assert two.memory == max(per_gpu, key=lambda b: b.device_total_bytes) == per_gpu[1]
    layer = (one.memory.params_bytes - per_gpu[0].params_bytes - per_gpu[1].params_bytes) == 0
    # each layer's saved input on its GPU, the final norm's and the head's on the last: the GPUs' sum is one GPU's
    saved = [b.detail["saved_activations_bytes"] for b in [*per_gpu, one.memory]]
    assert layer and saved[0] + saved[1] == saved[2]
    assert two.memory.detail["logits_loss_bytes"] == one.memory.detail["logits_loss_bytes"] > 0
    assert per_gpu[0].detail["logits_loss_bytes"] == 0
    assert 0.95 < two.tokens_per_s / one.tokens_per_s < 1.0


def test_ddp_over_device_map_groups_and_the_refusals():
    four = plan(gpus_per_node=4, device_map=2)  # ms-swift's MP + DDP: two processes of two GPUs
    assert four.data_parallel == 2 and four.global_batch == 2
    with pytest.raises(BadInput, match="--device-map 2 with --zero 2"):
        plan(gpus_per_node=2, device_map=2, zero_stage=2)
    with pytest.raises(BadInput, match="must divide --gpus-per-node 3"):
        plan(gpus_per_node=3, device_map=2)
    with pytest.raises(BadInput, match="one process over the visible GPUs"):
        plan(gpus_per_node=4, device_map=2, framework="hf")
    with pytest.raises(BadInput, match="cannot run --device-map on: it runs off"):
        plan(gpus_per_node=2, device_map=2, framework="llamafactory")
