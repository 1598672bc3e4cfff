"""InternLM-XComposer-2.5's image under ms-swift (planner/frameworks/swift/reader_media.py hands a 2.5 checkpoint
here): how many tokens an image becomes follows the image's own size, which a run's files do not give, so the reading
asks for them in one line unless the caller gives them (--image-tokens, --tokens-per-image or --data).

Cited at ms-swift 80d51bce4 (main on 2024-07-22; v2.2.3's lines are the same code 26 lines up), swift/llm/utils/:
- under --model_type internlm-xcomposer2-7b-chat (InternLMXComposer2Template, is_v2_5 False, template.py:1261) each
  image goes through the checkpoint's own vis_processor (template.py:1297), then encode_img (:1307-1308), which
  model.py:3997-4014 patches to call the checkpoint's img2emb (:4011). A 2.5 checkpoint's vis_processor is ToTensor and
  Normalize alone, no resize (modeling_internlm_xcomposer2.py __init__ as github.com/mbzuai-oryx/GeoPixel vendors it
  at 356b56a, model/IXC/), and its ViT cuts the image as it is into 560-pixel tiles beside a global view, without a cap
  (build_mlp.py CLIPVisionTower.forward; a side that is not a multiple of 560 fails its reshape):
  planner.model.xcomposer.hd_tokens of its tiles;
- under internlm-xcomposer2_5-7b-chat (is_v2_5 True, :1381) the template first resizes and pads it with the
  checkpoint's Image_transform at hd_num 24, 6 where a row holds several images (:1283-1290): tiles the image's
  shape decides.
ms-swift 3.x does the same by its template's version (v3.2.2 swift/llm/template/template/internlm.py:58-68 2.5's
Image_transform, HD_NUM from the environment; :81 vis_processor; :110 img2emb). Up to 3.3 --max_length counts the
text and the image's tokens come after it (planner.frameworks.swift.RELEASES): a row's length is not bounded by the
files, so no text-only plan stands for it; from 3.4 reader_media plans the text within --max_length and never asks.
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.intake.collect import GIVEN_FIELDS, Collector
from planner.model import xcomposer

AT = "ms-swift 80d51bce4 swift/llm/utils/"
AT3 = "v3.2.2 swift/llm/template/template/internlm.py"
# the model_type of 2.5's template: 2.x's (80d51bce4 model.py:3944-3953), 3.x's (v3.2.2 swift/llm/model/constant.py:155)
TWO_FIVE_TYPES = ("internlm-xcomposer2_5-7b-chat", "xcomposer2_5")
ANSWERS = ("image_tokens", "tokens_per_image", "data")  # the caller's flags that size the row's images


def _how(swift_type: str | None, release: str) -> str:
    """What the template in effect (by --model_type) does with a 2.5 checkpoint's image at ms-swift `release`."""
    two = release == "2"
    if swift_type in TWO_FIVE_TYPES:
        where = f"{AT}template.py:1283-1290" if two else f"{AT3}:58-68, HD_NUM from the environment"
        return (
            "its template resizes and pads each image with the checkpoint's Image_transform at hd_num 24, 6 where a "
            f"row holds several ({where}), into tiles the image's shape decides"
        )
    where = f"{AT}template.py:1297, 1307-1308; model.py:3997-4014" if two else f"{AT3}:81, 110"
    return (
        "its template (XComposer2's) hands each image at its own size to the checkpoint's vis_processor, which 2.5 "
        f"builds without a resize ({where}), and 2.5's ViT cuts it into 560-pixel tiles with no cap"
    )


def ask_image(c: Collector, hint: tuple[str, str] | None, seq_field: str, release: str) -> bool:
    """For a 2.5 checkpoint (xcomposer.is_2d5): one line asking for the images' tokens unless the caller gives them
    (ANSWERS: then the row's length is the text's and the given tokens, derived again from them); True where the
    model is 2.5's (the caller plans no image of its own), False for any other."""
    if c.model is None or not xcomposer.is_2d5(c.model.config):
        return False
    given = GIVEN_FIELDS.get()
    seq = c.setting(seq_field)
    if any(k in given for k in ANSWERS):
        if seq is not None and "image_tokens" in given:
            text = int(seq.value)
            c.derived[seq_field] = (("image_tokens",), lambda body: text + int(body.get("image_tokens") or 0))
        return True
    where = f"{hint[1]} over" if hint else "ms-swift over"
    one = xcomposer.hd_tokens(1, 1)
    raise BadInput(
        f"{where} InternLM-XComposer-2.5's weights: {_how(hint[0] if hint else None, release)}; an image of h x w tiles is "
        f"(h*w+1)*400 + 1 + (h+1)*20 tokens ({one:,} for one tile), inserted after the text --max_length keeps, and "
        "the files do not say the images' sizes: give --image-tokens (the row's length is the text's and these) or "
        "--data",
        "image_tokens",
    )
