"""planner.search.advice: a candidate that does not fit is told the term that decides its peak and the knob that
shrinks it, in its framework's words: here the vision tower's call over every image of the micro-batch."""

import re

import pytest

from planner import advise
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate.nograd import nograd_vision_bytes
from planner.estimate.rl import generation_terms
from planner.estimate.setup import Setup
from planner.estimate.vision import PIXEL_CAP, TILES
from planner.model.catalog import load_model
from planner.search.advice import tower_fix

BIG_IMAGE = {"model": "qwen2.5-vl-7b", "gpu": "a100-80gb", "gpus_per_node": 1, "micro_batch": 1, "grad_accum": 1}
BIG_IMAGE |= {"seq_len": 18432, "image_tokens": 16384, "lora_rank": 8, "precision": "bf16"}


def _reason(**kw) -> str:
    result = advise.check(advise.parse(advise.CheckRequest, {**BIG_IMAGE, **kw}))
    assert not result.plan.fits
    return result.plan.reason


def test_a_masked_towers_peak_names_the_image_cap_not_a_shorter_sequence():
    """ms-swift 3.0-3.3's Qwen2.5-VL tower under transformers <=4.50 (Framework.tower_sdpa masked-3d): 65,536 patches
    in one call, 268 GiB of scores in the frozen tower's forward; the sequence's text is not what shrinks it."""
    reason = _reason(framework="swift@3")
    assert "the vision tower's attention over the images' patches 268.0 GiB" in reason
    assert "a lower MAX_PIXELS (the image's pixel cap)" in reason and "a shorter sequence" not in reason
    assert "flash attention" in reason
    assert "vision tower" not in _reason(framework="swift", seq_len=131072, image_tokens=1024)  # a long text instead


def test_the_towers_knob_is_said_in_each_frameworks_words():
    plan = advise.check(advise.parse(advise.CheckRequest, {**BIG_IMAGE, "framework": "swift@3"})).plan
    at = lambda fw, release="": plan.model_copy(update={"framework": fw, "release": release})
    assert tower_fix(at("swift", "3"), TILES) == "a lower MAX_NUM (InternVL's tiles an image)"
    assert tower_fix(at("trl"), PIXEL_CAP) == "a lower --max_pixels (the image's pixel cap)"
    assert tower_fix(at("llamafactory", "0.9.1"), PIXEL_CAP).startswith("a lower image_resolution")
    assert tower_fix(at("llamafactory"), PIXEL_CAP).startswith("a lower image_max_pixels")
    assert "--image-tokens" in tower_fix(at("hf"), PIXEL_CAP) and "--image-tokens" in tower_fix(at("swift"), 0)


def test_a_generation_prefill_decided_by_the_tower_says_so():
    """GRPO's prefill under the masked 3-D SDPA: the prompts' images through the tower, not the logits."""
    w = Workload(kind="grpo", max_prompt_length=2048, max_completion_length=256)
    knobs = Knobs(precision="bf16", framework="swift", release="3", workload=w)
    s = Setup(load_model("qwen2.5-vl-3b"), knobs, 8, 1, w.seq_len(), 4, 1, image_tokens=768)
    terms = generation_terms(s)
    assert terms["generation_tower_bytes"] == nograd_vision_bytes(s, 8) > terms["generation_transient_bytes"]


BIG_70B = {"model": "llama-3.1-70b", "gpu": "a10-24gb", "gpus_per_node": 8, "micro_batch": 1, "grad_accum": 1}
BIG_70B |= {"seq_len": 2048, "lora_rank": 16, "precision": "bf16", "framework": "swift@3.9"}  # on transformers 4.57


def offered(reason: str) -> list[dict]:
    """Each setting a reason names with its values ("--zero 3", "--quant nf4 --zero 3 ..."), as request fields."""
    fixes = reason.rsplit(": ", 1)[1]
    out = []
    for option in fixes.split(" or "):
        pairs = re.findall(r"--([a-z-]+) ([\w.+-]+)", option)
        fields = {
            ("zero_stage" if k == "zero" else k.replace("-", "_")): int(v) if v.isdigit() else v for k, v in pairs
        }
        out += [fields] if fields else []
    return out


@pytest.mark.parametrize(
    "change, sharding",
    [
        ({"quant": "ct-w4a16"}, None),  # spec_lora.UNSHARDED: FSDP and ZeRO-3 refuse these bases
        ({"quant": "hqq"}, None),
        ({"quant": "int8"}, None),
        ({"quant": "gptq"}, None),
        ({"quant": "nf4"}, "shard them (--zero 3 or --fsdp full)"),  # a bitsandbytes 4-bit base shards
        ({"model": "llama-3.1-8b", "lora_variant": "adalora", "zero_stage": 2}, None),  # AdaLoRA: ZeRO-1/2 only
        ({"model": "llama-3.1-8b", "lora_rank": 0, "dataparallel": True, "framework": "hf"}, None),
    ],
)
def test_every_setting_the_advice_offers_passes_the_rules(change, sharding):
    """A plan that does not fit is offered only settings its rules (memplan's and its framework's at its release)
    accept: a base or tuner that FSDP and ZeRO-3 refuse is not told to shard (a quantized one is told of the base
    that shards, bitsandbytes' 4-bit), and every setting named with its values is checked as a request again."""
    reason = _reason70(**change)
    assert ("shard them" in reason) == (sharding is not None), reason
    assert sharding is None or sharding in reason
    if change.get("quant") in ("ct-w4a16", "hqq", "int8", "gptq"):
        assert "shard a bitsandbytes 4-bit base instead (--quant nf4 --zero 3 on the unquantized model)" in reason
    settings = offered(reason)
    assert settings or "--" not in reason.rsplit(": ", 1)[1].replace("--lora-rank", ""), reason
    for fields in settings:
        advise.check(advise.parse(advise.CheckRequest, {**BIG_70B, **change, **fields}))  # a BadInput fails here


def _reason70(**kw) -> str:
    plan = advise.check(advise.parse(advise.CheckRequest, {**BIG_70B, **kw})).plan
    assert not plan.fits
    return plan.reason
