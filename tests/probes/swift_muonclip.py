"""ms-swift 4's MuonClip measured in ms-swift's own venv (run by tests/probes/test_muonclip.py with
MEMPLAN_SWIFT_PYTHON; PYTHONPATH the repository for probes.allocations, which imports torch alone).

Reads a list of {"config": a transformers Llama config dict, "dtype": "fp32" | "bf16", "lora_rank": 0 or r, "clip":
bool} on stdin; for each: Builds the model from its config (LoRA on every linear with PEFT's defaults where lora_rank: fp32 factors over a
frozen base), groups its parameters with MuonClipOptimizerCallback.create_optimizer itself (swift/optimizers/
muonclip.py:334-476; model_meta.model_arch names the embedding and the head as ms-swift's registry does), and runs two
forward, backward and step rounds. Writes a JSON list, one per request: the trained parameters, the bytes of the optimizer's state tensors,
the groups' sizes, and the CPU allocator's peak over the second step (probes.allocations), its max logit passed as
1e9 (the QK group clipped) where clip, else 0 (never clipped), oneDNN off (its bf16 GEMM allocates a scratch buffer
of its own on an avx512_bf16 CPU: tests/probes/test_muon_step.py)."""

import json
import sys
from types import SimpleNamespace

import torch
from swift.optimizers.muonclip import MuonClipOptimizerCallback
from transformers import LlamaConfig, LlamaForCausalLM

from probes.allocations import cpu_peak_bytes

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _model(config: dict, dtype: torch.dtype, rank: int):
    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in config.items() if k not in ("model_type", "architectures")})
    model = LlamaForCausalLM(cfg).to(dtype)
    if rank:
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(r=rank, target_modules="all-linear"))
    model.model_meta = SimpleNamespace(model_arch=SimpleNamespace(embedding="embed_tokens", lm_head="lm_head"))
    return model


def measure(req: dict) -> dict:
    model = _model(req["config"], DTYPES[req["dtype"]], req["lora_rank"])
    args = SimpleNamespace(optim_args=None, learning_rate=1e-3, weight_decay=0.1)
    opt = MuonClipOptimizerCallback(args, trainer=None).create_optimizer(model)
    peak = 0
    for _ in range(2):
        ids = torch.randint(0, req["config"]["vocab_size"], (2, 16))
        model(input_ids=ids, labels=ids).loss.backward()
        with torch.backends.mkldnn.flags(enabled=False):  # torch's own GEMM: no oneDNN bf16 scratch (test_muon_step)
            peak = cpu_peak_bytes(lambda: opt.step(max_logits=1e9 if req["clip"] else 0.0))[0]
    buffers = [st["momentum_buffer"] for st in opt.state.values()]
    return {
        "trained": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "state_bytes": sum(b.numel() * b.element_size() for b in buffers),
        "buffers": len(buffers),
        "groups": [len(g["params"]) for g in opt.param_groups],
        "qk": [bool(g.get("is_qk")) for g in opt.param_groups],
        "peak": peak,
    }


def main() -> None:
    json.dump([measure(req) for req in json.load(sys.stdin)], sys.stdout)


if __name__ == "__main__":
    main()
