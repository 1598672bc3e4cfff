"""One catalog model of each VLM family memplan counts (the VLM tests parametrize over them)."""

VLMS = [
    "qwen2.5-vl-3b",
    "qwen2-vl-7b",
    "internvl2.5-8b",
    "llava-1.5-7b",
    "llava-v1.6-mistral-7b",
    "gemma-3-4b",
    "smolvlm-instruct",
    "qwen3-vl-8b",
    "qwen3-vl-30b-a3b",
    "llama-3.2-11b-vision",
]
