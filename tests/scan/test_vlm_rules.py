"""The image-token rules of planner/model/image_rules.py against transformers 5.23's own image processors on real image files."""

import pytest

pytest.importorskip("transformers")
from PIL import Image

from planner.model import image_rules as vlm_rules
from planner.model.images import image_rule

SIZES = [(336, 336), (640, 480), (1920, 1080), (100, 2000), (4000, 3000), (500, 1400)]


def saved(tmp_path, size):
    path = tmp_path / "im.png"
    Image.new("RGB", size, (90, 140, 20)).save(path)
    return Image.open(path)


@pytest.mark.parametrize("size", SIZES)
def test_llava_next_is_the_processors(tmp_path, size):
    """LlavaNextImageProcessor's tiles and the processor's own feature count (_get_number_of_features)."""
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil
    from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor

    images = LlavaNextImageProcessorPil()
    out = images(saved(tmp_path, size), return_tensors="np")
    h, w = (int(x) for x in out["image_sizes"][0])
    proc = object.__new__(LlavaNextProcessor)  # the count needs no tokenizer
    proc.image_processor, proc.patch_size, proc.vision_feature_select_strategy = images, 14, "default"
    proc.num_additional_image_tokens = 1
    want = proc._get_number_of_features(h, w, 336, 336) - 1  # less the CLS under "default" (:79-80, :161-162)
    assert vlm_rules.llava_next_image_tokens(*size) == want
    assert image_rule("llava-next", None, None)(*size) == want


@pytest.mark.parametrize("size", SIZES + [(896, 1344), (2304, 384)])
def test_llava_onevision_is_the_processors(tmp_path, size):
    """LlavaOnevisionImageProcessor's grid and the processor's count with its checkpoints' settings (729 tokens a
    tile, "full" features, anyres_max_9) for one image a sample (replace_image_token, :74-95)."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )
    from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor

    images = LlavaOnevisionImageProcessorPil()
    out = images(saved(tmp_path, size), return_tensors="np")
    h, w = (int(x) for x in out["image_sizes"][0])
    proc = object.__new__(LlavaOnevisionProcessor)  # the count needs no tokenizer
    proc.image_processor, proc.num_image_tokens, proc.vision_aspect_ratio = images, 729, "anyres_max_9"
    want = proc._get_number_of_features(h, w, *out["pixel_values"][0][0].shape[-2:])
    assert vlm_rules.llava_onevision_image_tokens(*size) == want
    assert image_rule("llava-onevision", None, None)(*size) == want


@pytest.mark.parametrize("size", SIZES)
def test_idefics3_tiles_are_the_processors(tmp_path, size):
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    out = Idefics3ImageProcessorPil()(saved(tmp_path, size), return_tensors="np")
    tiles = out["pixel_values"].shape[1]  # (batch, tiles and the global image, channels, height, width)
    assert vlm_rules.idefics3_tiles(*size) == tiles
    assert image_rule("idefics3", None, None)(*size) == 169 * tiles


@pytest.mark.parametrize("size", SIZES)
def test_qwen3_vl_is_qwen2_vls_processor_with_16_pixel_patches(tmp_path, size):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, min_pixels=65536, max_pixels=16777216)
    grid = proc(saved(tmp_path, size), return_tensors="np")["image_grid_thw"][0]
    assert image_rule("qwen3-vl", None, None)(*size) == int(grid.prod()) // 4


@pytest.mark.parametrize("size", [*SIZES, (1200, 300), (300, 900), (700, 256)])
def test_gemma3_pan_and_scan_crops_are_the_processors(tmp_path, size):
    """Gemma-3's image processor with pan-and-scan on (its checkpoints' settings: 256-pixel crops, at most 4, from
    1.2 : 1): 256 tokens for the image and each crop."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    proc = Gemma3ImageProcessorPil(
        do_pan_and_scan=True,
        pan_and_scan_min_crop_size=256,
        pan_and_scan_max_num_crops=4,
        pan_and_scan_min_ratio_to_activate=1.2,
    )
    crops = int(proc(saved(tmp_path, size), return_tensors="np")["num_crops"][0])
    assert vlm_rules.gemma3_crops(*size) == crops
    assert image_rule("gemma3:pan-and-scan", None, None)(*size) == 256 * (1 + crops)


def test_fixed_families_and_the_refusal():
    assert image_rule("llava", None, None)(4000, 3000) == 576 and image_rule("gemma3", None, None)(10, 10) == 256
    with pytest.raises(Exception, match="accepted: qwen2-vl, qwen3-vl"):
        image_rule("llava-1.5", None, None)
