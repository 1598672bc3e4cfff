"""ms-swift's bottleneck adapter measured in ms-swift's own venv (run by tests/probes/test_adapter.py with
MEMPLAN_SWIFT_PYTHON; PYTHONPATH the repository for probes.tracker and probes.amp, which import torch alone).

Reads {"config": a transformers config dict, "length": adapter_length, "act": adapter_act, "tokens": rows x width,
"steps": [{"micro", "seq", "knobs"}, ...], "model": false to run the steps alone} on stdin; writes JSON: the sim
probe's peak of each step (probes/sim.py with ms-swift's adapters in place of PEFT's: _swift_adapters), the trained parameters ms-swift's Swift.prepare_model makes with the AdapterConfig its
prepare_adapter builds for --tuner_type adapter (swift 4.6.0 pipelines/train/tuner.py:280-293: dim the text
hidden size, target_modules the architecture's MLP path, hidden_pos 0), their dtypes and count, the frozen rest;
and per precision what one AdapterModule's forward keeps for backward beyond its output and its transient peak,
over an MLP output that already exists (live-bytes tracker, CUDA's autocast replayed for bf16 AMP)."""

import json
import re
import sys

import torch
from swift.tuners import AdapterConfig, Swift
from swift.tuners.adapter import AdapterModule
from transformers import AutoConfig, AutoModelForCausalLM

from probes.amp import CudaAutocast
from probes.tracker import LiveBytes


def _model(config: dict, length: int, act: str):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config)).to(torch.bfloat16)
    base.requires_grad_(False)  # ms-swift freezes the base before its tuners (tuner.py:379-384)
    target = re.escape("model.layers.{}.mlp").replace(re.escape("{}"), r"\d+")  # model_arch.py:178, tuner.py:286
    cfg = AdapterConfig(
        dim=config["hidden_size"], target_modules=target, hidden_pos=0, adapter_length=length, act_layer=act
    )
    return Swift.prepare_model(base, cfg)


def _one_adapter(dim: int, length: int, act: str, tokens: int, precision: str) -> dict:
    from transformers.activations import ACT2CLS

    torch.manual_seed(0)
    m = AdapterModule(dim, "default", "mlp", length, ACT2CLS[act])
    m.set_activation("default", True)
    x = torch.randn(tokens, dim, dtype=torch.float32 if precision == "fp32" else torch.bfloat16)
    x.requires_grad_(True)  # the MLP's output: produced by the frozen down_proj from a trained path
    with LiveBytes() as t:
        start = t.live
        with CudaAutocast(torch.bfloat16) if precision == "bf16" else torch.enable_grad():
            y = m(x)
        kept = t.live - start - y.numel() * y.element_size()
    y.float().sum().backward()
    return {"kept": kept, "transient": t.peak - start - kept, "out_dtype": str(y.dtype)}


def _swift_adapters(model, knobs, quant_standin, spec):
    """recipe.model._adapters for an adapter plan: ms-swift's freeze and Swift.prepare_model (_model's config over
    the recipe's bf16 base), input gradients under checkpointing as for PEFT."""
    model.requires_grad_(False)
    target = re.escape("model.layers.{}.mlp").replace(re.escape("{}"), r"\d+")
    cfg = AdapterConfig(dim=spec.text.hidden, target_modules=target, hidden_pos=0, adapter_length=knobs.lora_rank)
    model = Swift.prepare_model(model, cfg)
    for m in model.modules():  # already where the step runs: the first forward's .to(x.device) (adapter.py:175-179)
        if isinstance(m, AdapterModule):  # would swap the fake tensors the tracker watches
            m._prepared = True
    if knobs.checkpointing not in ("off", "offload"):
        model.enable_input_require_grads()
    return model


def step(config: dict, length: int, micro: int, seq: int, knobs: dict) -> int:
    """The sim probe's peak (probes/sim.py: fake tensors, the traced layers extrapolated) of one step of the plan's
    model with ms-swift's adapters in place of PEFT's."""
    import recipe.model
    from planner.config.spec import Knobs
    from probes.sim import simulate
    from probes.step import Case

    recipe.model._adapters = _swift_adapters
    k = Knobs(lora_rank=length, lora_variant="adapter", framework="swift", **knobs)
    return simulate(Case(config, k, micro, 1, seq, 0)).peak_allocated_bytes


def main() -> None:
    req = json.load(sys.stdin)
    steps = [step(req["config"], req["length"], **one) for one in req.get("steps", [])]
    if not req.get("model", True):
        json.dump({"peaks": steps}, sys.stdout)
        return
    model = _model(req["config"], req["length"], req["act"])
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    out = {
        "trained": sum(p.numel() for _, p in trained),
        "trained_tensors": len(trained),
        "trained_dtypes": sorted({str(p.dtype) for _, p in trained}),
        "adapters": sum(1 for n, _ in model.named_modules() if n.endswith(".adapter_default")),
        "frozen": sum(p.numel() for p in model.parameters() if not p.requires_grad),
        "largest": max(p.numel() for _, p in trained),
    }
    ids = torch.randint(0, req["config"]["vocab_size"], (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()  # one real step's backward: every adapter gets its gradient
    out["grads"] = sum(1 for _, p in trained if p.grad is not None)
    for precision in ("bf16", "bf16-pure", "fp32"):
        out[precision] = _one_adapter(req["config"]["hidden_size"], req["length"], req["act"], req["tokens"], precision)
    json.dump({**out, "peaks": steps}, sys.stdout)


if __name__ == "__main__":
    main()
