"""A tiny LLaVA the bundled trainer runs on CPU in seconds, with its processor folder and a JSONL of rows with real
image files: LLaVA-1.5's catalog config cut to 64 wide (tests/probes/tiny_vlms.py), a 56-pixel CLIP tower (16 image
tokens an image), a 256-word vocabulary whose word-level tokenizer is built here (nothing downloaded), and
transformers' own LlavaProcessor with CLIP's image processor."""

import json
from pathlib import Path

from tests.probes.tiny_vlms import tiny_vlm

WORDS = [f"w{i}" for i in range(240)]
SPECIAL = ["[UNK]", "<s>", "</s>", "[PAD]", "<image>", "user", "assistant"]
VOCAB = 256
IMAGE_SIDE = 56  # 4 x 4 patches of 14 pixels: 16 image tokens (the CLS dropped, "default" features)
CHAT = (
    "{% for m in messages %}{{ m['role'] }} {% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image> {% elif c['type'] == 'text' %}{{ c['text'] }} "
    "{% endif %}{% endfor %}{% endif %} </s> {% endfor %}{% if add_generation_prompt %}assistant {% endif %}"
)


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="[PAD]",
        extra_special_tokens={"image_token": "<image>"},
    )


def config() -> dict:
    ids = {t: i for i, t in enumerate(SPECIAL)}
    cfg = tiny_vlm("llava-1.5-7b")
    cfg["vision_config"].update(image_size=IMAGE_SIDE)
    cfg["text_config"].update(vocab_size=VOCAB, pad_token_id=ids["[PAD]"])
    return {**cfg, "vocab_size": VOCAB, "image_token_index": ids["<image>"], "pad_token_id": ids["[PAD]"]}


def folders(root: Path) -> tuple[str, str]:
    """(model folder with config.json, processor folder)."""
    from transformers.models.clip import CLIPImageProcessorPil
    from transformers.models.llava.processing_llava import LlavaProcessor

    model, proc = root / "tiny-llava", root / "processor"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(config()))
    images = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIDE}, crop_size={"height": IMAGE_SIDE, "width": IMAGE_SIDE}
    )
    LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer(),
        patch_size=14,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
        chat_template=CHAT,
    ).save_pretrained(proc)
    return str(model), str(proc)


def words(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 37 + i * 11) % len(WORDS)] for i in range(n))


def rows(root: Path, n: int = 16) -> str:
    """A JSONL of n rows: some with one image, some with two, some with none, text of varying length; the images are
    PNG files of three sizes beside it (the processor resizes them)."""
    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    for k, size in enumerate([(56, 56), (120, 80), (300, 500)]):
        Image.new("RGB", size, (40 * k, 200 - 50 * k, 90)).save(root / f"im{k}.png")
    lines = []
    for i in range(n):
        images = [f"im{(i + j) % 3}.png" for j in range(i % 3)]
        text = ("<image> " if i % 6 == 1 else "") + words(4 + (i * 7) % 13, i)
        lines.append(json.dumps({"text": text, "images": images}))
    path = root / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)
