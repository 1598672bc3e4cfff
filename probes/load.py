"""The host RAM a model's load holds, measured: from_pretrained of a local checkpoint in a fresh process, the
process's anonymous resident memory (RssAnon, Linux) before and after; mmapped file pages are not in it. With
"upcast", what accelerate 1.15's FSDP2 preparation then does to it (accelerate/utils/fsdp_utils.py:813-820: every
trainable parameter not in fp32 converted to fp32 on the host). What planner.estimate.lifecycle's load terms are
pinned to (tests/probes/test_save.py, benchmarks/accuracy_terms.py).

    python -m probes.load FOLDER auto|float32 plain|upcast
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path


def measure_load(folder: Path | str, dtype: str = "auto", mode: str = "plain") -> dict:
    """{"held": anonymous bytes the load (and the upcast) added, "params": parameters loaded}."""
    r = subprocess.run(
        [sys.executable, "-m", "probes.load", str(folder), dtype, mode],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=Path(__file__).resolve().parents[1],
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def write_checkpoint(folder: Path, hidden: int = 1024, layers: int = 4) -> Path:
    """A bf16 safetensors checkpoint of an untied Llama (hidden 1024, 4 layers, vocabulary 32000: 132.7M
    parameters, host RAM far above the process's own noise)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=8,
        vocab_size=32000,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(folder)
    return folder


def _anon() -> int:
    gc.collect()
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("RssAnon"))


def _main(folder: str, dtype: str, mode: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(folder)  # imports and caches first: what one load adds, after
    before = _anon()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype={"auto": "auto", "float32": torch.float32}[dtype])
    if mode == "upcast":
        for p in model.parameters():
            if p.requires_grad and p.dtype != torch.float32:
                p.data = p.data.to(torch.float32)
    held = _anon() - before
    print(json.dumps({"held": held, "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
