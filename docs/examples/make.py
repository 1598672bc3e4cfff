"""Makes the README's example dataset and tokenizer (committed beside this file; run again to remake them):
docs/examples/vlm-chat.jsonl, 200 two-turn chats, most with an image given by its size, and
docs/examples/tokenizer/, a word-level tokenizer trained on the chats with a chat template.

    python docs/examples/make.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "table",
    "red",
    "blue",
    "big",
    "small",
    "image",
    "shows",
    "picture",
    "what",
    "is",
    "in",
    "this",
    "describe",
    "count",
    "how",
    "many",
    "colour",
    "left",
    "right",
    "top",
    "bottom",
    "near",
    "far",
    "there",
    "are",
    "two",
    "three",
    "one",
]


def main() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    rows = []
    for _ in range(200):
        turns = [
            {"role": r, "content": " ".join(rng.choices(WORDS, k=rng.randint(4, 120 if r == "assistant" else 30)))}
            for r in ("user", "assistant")
        ]
        row = {"messages": turns}
        if rng.random() < 0.8:
            row["images"] = [
                {"width": rng.choice([448, 640, 1024, 1280, 1920]), "height": rng.choice([336, 480, 768, 1080])}
            ]
        rows.append(row)
    (HERE / "vlm-chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
    fast.save_pretrained(HERE / "tokenizer")


if __name__ == "__main__":
    main()
