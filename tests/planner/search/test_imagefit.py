"""Images planned from the processor's settings (planner.search.imagefit): `--images N` alone takes each image at the
worst case of the model family's rule under --min-pixels / --max-pixels, says so, and a configuration that does
not fit then is told the largest square image it fits (checked against plans at that image's token count and at the
next one)."""

import json

import pytest

from planner import advise
from planner.errors import BadInput
from planner.model.families import from_config
from planner.model.images import image_rule, worst_case
from planner.search import imagefit
from tests.planner.cli.helpers import planner

# Qwen2.5-VL-3B trained in full on 6 x H20 (the worked case of docs/vlms.md), two images a row at max_pixels 2,007,040
BASE = {
    "model": "qwen2.5-vl-3b",
    "gpu": "h20",
    "gpus_per_node": 6,
    "micro_batch": 4,
    "grad_accum": 4,
    "seq_len": 8192,
    "zero_stage": 2,
    "checkpointing": "full",
}


def check(**fields):
    return advise.check(advise.parse(advise.CheckRequest, {**BASE, **fields}))


def test_images_alone_take_the_worst_case_of_the_familys_rule():
    r = check(images=2, max_pixels=2007040)
    tokens, size = worst_case("qwen2-vl", None, 2007040)
    assert (r.images["rule"], r.images["tokens_per_image"], r.images["worst_case_size"]) == (
        "qwen2-vl",
        2560,
        list(size),
    )
    assert tokens == 2560 and r.goal["image_tokens"] == 2 * 2560
    given = check(images=2, tokens_per_image=2560)  # the same plan as the count given outright
    assert given.plan.memory == r.plan.memory and given.images is None


def test_the_largest_square_image_that_fits_is_the_edge():
    r = check(images=2, max_pixels=2007040)
    assert not r.plan.fits
    up = r.images["fits_up_to"]
    rule = image_rule("qwen2-vl", None, 2007040)
    assert rule(up["side"], up["side"]) == up["tokens_per_image"] < rule(up["side"] + 1, up["side"] + 1)
    assert check(images=2, tokens_per_image=up["tokens_per_image"]).plan.fits
    bigger = next(t for s in range(up["side"], 4000, 14) if (t := rule(s, s)) > up["tokens_per_image"])
    assert not check(images=2, tokens_per_image=bigger).plan.fits


def test_a_fitting_plan_names_no_edge_and_suggest_says_the_worst_case():
    r = check(images=1, max_pixels=200704, micro_batch=1)
    assert r.plan.fits and "fits_up_to" not in r.images
    body = {"model": "qwen3-vl-8b", "gpu": "h100", "global_batch": 8, "seq_len": 4096, "images": 1}
    s = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "max_pixels": 1048576}))
    assert (s.images["rule"], s.images["tokens_per_image"], s.goal["image_tokens"]) == ("qwen3-vl", 1024, 1024)


@pytest.mark.parametrize(
    "fields, said",
    [
        ({"max_pixels": 1003520}, "--min-pixels / --max-pixels size the images"),
        ({"images": 1, "max_pixels": 1003520, "model": "llava-1.5-7b"}, "the llava rule has no pixel budget"),
        ({"images": 1, "min_pixels": 9000, "max_pixels": 4000}, "--min-pixels 9000 is over --max-pixels 4000"),
        ({"images": 1, "image_rule": "qwen"}, "--image-rule 'qwen': accepted"),
    ],
)
def test_what_cannot_be_planned_is_one_line(fields, said):
    with pytest.raises(BadInput, match=said):
        check(**fields)


def test_a_family_without_a_rule_asks_for_one():
    onevision = from_config({"model_type": "smolvlm"}, "smolvlm")
    req = advise.parse(advise.CheckRequest, {**BASE, "model": "qwen2.5-vl-3b", "images": 1})
    with pytest.raises(BadInput, match="has no image rule of its own"):
        advise.check(req, resolver=lambda ref: onevision)


def test_the_cli_says_the_worst_case_and_the_edge():
    args = ["check", "--model", "qwen2.5-vl-3b", "--gpu", "h20", "--gpus-per-node", "6", "--micro-batch", "4"]
    args += ["--grad-accum", "4", "--seq-len", "8192", "--zero", "2", "--checkpointing", "full", "--images", "2"]
    out = planner(*args, "--max-pixels", "2007040")
    assert out.returncode == 3
    assert "images: 2 a sample at the qwen2-vl rule's worst case, max_pixels 2,007,040, 2,560 tokens" in out.stdout
    assert "this configuration fits images up to" in out.stdout
    got = json.loads(planner(*args, "--max-pixels", "2007040", "--json").stdout)
    assert got["images"]["fits_up_to"]["tokens_per_image"] < 2560


@pytest.mark.parametrize(
    "model, images, hint",
    [  # issue 50: InternVL's worst case is its tile cap, not a pixel budget (before: "lower --max-pixels" for all)
        ("internvl3-8b", 2, "cap InternVL's tiles (MAX_NUM / max_dynamic_patch) with --image-rule internvl:2, give"),
        ("internvl3-8b", 9, "cap InternVL's tiles (MAX_NUM / max_dynamic_patch) with fewer --images (one tile"),
        ("llava-1.5-7b", 4, "give fewer --images, give --tokens-per-image, or raise --seq-len"),
        ("qwen2.5-vl-3b", 4, "lower --max-pixels, give --tokens-per-image, or raise --seq-len"),
    ],
)
def test_a_worst_case_over_the_length_is_cut_after_the_tower_naming_the_rules_own_knob(model, images, hint):
    # issue 48 item 3: a cap is a bound, never a validation error; the hint to keep the images whole stays the rule's
    seq = 2048 if "internvl" in model else 1024
    r = check(model=model, images=images, seq_len=seq, micro_batch=1)
    assert r.images["cut_at"] == seq == r.goal["image_tokens"] < r.goal["tower_tokens"]
    assert hint in r.images["to_keep_whole"]
    if "internvl:2" in hint:  # the cap it names fits: 3 tiles of 256 tokens and 2 markers an image, 2 images
        assert check(model=model, images=images, seq_len=seq, micro_batch=1, image_rule="internvl:2").goal


def test_the_tower_runs_on_every_patch_before_the_text_is_cut():
    # VLM-R1's default cap (12,845,056 pixels: 16,384 tokens an image) with a 2,048-token cutoff: the tower's saved
    # activations are those of the whole image (pinned on an H200 within 1.3%: tests/benchmarks/test_gpu_terms.py),
    # the language model's those of 2,048 tokens
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model

    r = check(images=1, max_pixels=12845056, seq_len=2048, micro_batch=1, checkpointing="off")
    assert (r.goal["image_tokens"], r.goal["tower_tokens"]) == (2048, 16384)
    m, k = load_model("qwen2.5-vl-3b"), r.plan.knobs

    def acts(image_tokens, tower_tokens):
        return breakdown(Setup(m, k, 1, 4, 2048, 6, 1, image_tokens, tower_tokens), 96 * 2**30).activations_bytes

    cut = acts(2048, 16384)
    assert cut == r.plan.memory.activations_bytes
    assert cut > acts(2048, 0)  # a tower over the cut text alone would be 8 times smaller
    out = planner("check", *_flags({**BASE, "seq_len": 2048}), "--images", "1", "--max-pixels", "12845056")
    assert "16,384 tokens, over --seq-len 2,048: the tower runs on all their patches" in out.stdout


def _flags(fields: dict) -> list[str]:
    names = {"gpus_per_node": "--gpus-per-node", "micro_batch": "--micro-batch", "grad_accum": "--grad-accum"}
    names |= {"seq_len": "--seq-len", "zero_stage": "--zero", "checkpointing": "--checkpointing"}
    return [x for k, v in fields.items() for x in (names.get(k, f"--{k}"), str(v))]


def test_images_within_the_length_share_it_and_plan_as_one_image_holding_it():
    """Where a longer row is deleted (images_within_length, read from the framework's files), 2 images at 16,384
    tokens each share a 4,096-token row: planned at 4,096 image tokens, the tower on those alone (no cut after it).
    The tower's terms count a row's image tokens together, so this is the plan for one image of 4,096 tokens (the
    split of the row its attention is hungriest for) and for 2 of 2,048 alike; without deletion the tower runs on
    all 32,768 before the text is cut."""
    fields = {"model": "qwen2.5-vl-7b", "gpu": "h100", "micro_batch": 1, "grad_accum": 1, "seq_len": 4096}
    fields |= {"checkpointing": "full", "gpus_per_node": 1, "zero_stage": 3}  # the tower trained: its activations

    def plan(answer=False, **more):  # `answer`: the whole answer, its images' lines too; else the verdict alone
        return advise.check(advise.parse(advise.CheckRequest, {**fields, **more}), alternatives=answer)

    shared = plan(True, images=2, max_pixels=12845056, images_within_length=True)
    assert (shared.goal["image_tokens"], shared.goal["tower_tokens"]) == (4096, 0)
    assert shared.images["shared_length"] == 4096 and shared.images["tokens_per_image"] == 16384
    one = plan(image_tokens=4096).plan.memory
    halves = plan(images=2, tokens_per_image=2048).plan.memory
    assert shared.plan.memory.peak_allocated_bytes == one.peak_allocated_bytes == halves.peak_allocated_bytes
    cut = plan(images=2, max_pixels=12845056)
    assert cut.goal["tower_tokens"] == 32768  # the tower's checkpointed block inputs over 8 x the patches
    assert cut.plan.memory.activations_bytes > 5 * one.activations_bytes
    fits = plan(True, images=1, max_pixels=1003520, images_within_length=True)  # 1,280 tokens: within the row
    assert "shared_length" not in fits.images and fits.goal["image_tokens"] == 1280
    assert any(
        "a longer row is deleted, so a row that runs holds at most 4,096" in x for x in imagefit.lines(shared.images)
    )


# issue 47 item 5: where nothing caps an image, each Qwen-VL model's images are planned at its checkpoints'
# preprocessor_config.json bounds, what AutoProcessor.from_pretrained runs (planner.model.image_rules
# QWEN2_VL_CHECKPOINT_PIXELS, QWEN3_VL_PIXELS), not Qwen2VLImageProcessor's class default 1,003,520 (1,280 tokens)
QWEN2 = ("qwen2-vl-2b", "qwen2-vl-7b", "qwen2.5-vl-3b", "qwen2.5-vl-7b", "qwen2.5-vl-72b", "qwen2.5-omni-7b")
CHECKPOINT_CAPS = [(m, (3136, 12845056)) for m in QWEN2] + [
    (m, (65536, 16777216)) for m in ("qwen3-vl-2b", "qwen3-vl-4b", "qwen3-vl-8b")
]


@pytest.mark.parametrize("model, pixels", CHECKPOINT_CAPS)
def test_each_qwen_models_images_take_its_checkpoints_processor_bounds(model, pixels):
    from planner.model.catalog import load_model
    from planner.resolved import planned_pixels
    from planner.search import imagefit

    req = advise.parse(advise.CheckRequest, {**BASE, "model": model, "images": 1})
    b = imagefit.budget(req, load_model(model))
    assert (b.tokens_per_image, planned_pixels(req, b, None)) == (16384, pixels)
    line = imagefit.lines(b.json())[0]
    assert f"max_pixels {pixels[1]:,} (the checkpoint's processor; --max-pixels sets yours), 16,384 tokens" in line
    given = advise.parse(advise.CheckRequest, {**BASE, "model": model, "images": 1, "max_pixels": 1003520})
    assert planned_pixels(given, imagefit.budget(given, load_model(model)), None)[1] == 1003520


def test_a_run_that_loads_the_checkpoints_processor_plans_its_bounds():
    """axolotl 0.19 loads the checkpoint's processor (src/axolotl/loaders/processor.py:61-64) and resizes no Qwen-VL
    image (image_size None, utils/schemas/multimodal.py:63-71; a Qwen processor's size has no width or height to take
    it from, loaders/processor.py:67-90), as an HF or TRL script's AutoProcessor.from_pretrained does: `--images 1`
    on its Qwen2.5-VL example plans 16,384 tokens an image within 12,845,056 pixels."""
    from planner import checkconfig
    from tests.planner.cli.helpers import ROOT

    example = ROOT / "tests/data/frameworks/axolotl/examples/qwen2_5-vl/lora-7b.yaml"
    out = checkconfig.check_config([str(example)], {"gpu": "h100", "images": 1})
    assert out.images["tokens_per_image"] == 16384 and out.context[2].pixels == (3136, 12845056)
