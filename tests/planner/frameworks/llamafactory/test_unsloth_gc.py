"""LLaMA-Factory's use_unsloth_gc (v0.9.0 on) as it runs: its "unsloth" checkpointing Function copies each checkpointed
layer's input to the host, runs the layer under no_grad and recomputes it in backward (0.9.5
src/llamafactory/model/model_utils/checkpointing.py:43-77, :55 `hidden_states.to("cpu")`): --checkpointing
offload-inputs, read and written with the same key; LF has no key that keeps every saved tensor on the host."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner import intake
from planner.cli import main
from planner.estimate import recipe_terms
from planner.model.catalog import load_model

YAML = "model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: sft\nfinetuning_type: lora\ncutoff_len: 1024\n{extra}\n"
SUGGEST = ["suggest", "--model", "qwen2.5-0.5b", "--gpu", "h100", "--global-batch", "8", "--seq-len", "1024"]


def _setting(tmp_path: Path, extra: str):
    path = tmp_path / "train.yaml"
    path.write_text(YAML.format(extra=extra))
    return next(s for s in intake.read([str(path)]).settings if s.field == "checkpointing")


@pytest.mark.parametrize(
    ("extra", "value"),
    [
        ("use_unsloth_gc: true", "offload-inputs"),
        # checkpointing.py:164 gates the whole block: no checkpoint, no offload
        ("use_unsloth_gc: true\ndisable_gradient_checkpointing: true", "off"),
        ("use_unsloth_gc: false", "full"),
    ],
)
def test_use_unsloth_gc_is_read_as_each_layers_input_on_the_host(tmp_path, extra, value):
    s = _setting(tmp_path, extra)
    assert s.value == value
    if value == "offload-inputs":
        assert "use_unsloth_gc" in s.source and "checkpointing.py:55" in s.source


def test_offload_inputs_is_written_as_use_unsloth_gc_and_read_back(tmp_path):
    argv = [*SUGGEST, "--checkpointing", "offload-inputs", "--framework", "llamafactory", "--emit", str(tmp_path)]
    assert main(argv) == 0
    text = (tmp_path / "llamafactory_train.yaml").read_text()
    assert "use_unsloth_gc: true" in text and "disable_gradient_checkpointing: false" in text
    back = intake.read([str(tmp_path / "llamafactory_train.yaml")])
    assert back.request["checkpointing"] == "offload-inputs"


def test_every_saved_tensor_on_the_host_and_a_line_before_use_unsloth_gc_are_refused_in_one_line(capsys):
    assert main([*SUGGEST, "--checkpointing", "offload", "--framework", "llamafactory"]) != 0
    err = capsys.readouterr().err
    assert "cannot run --checkpointing offload: it runs off, full, offload-inputs" in err and err.count("\n") == 1
    assert main([*SUGGEST, "--checkpointing", "offload-inputs", "--framework", "llamafactory@0.8"]) != 0
    err = capsys.readouterr().err
    assert "--checkpointing offload-inputs" in err and "release 0.8" in err and err.count("\n") == 1


MEASURE = """
import json, sys, types, torch
from llamafactory.model.model_utils import checkpointing as ckpt
from transformers import LlamaConfig, LlamaForCausalLM
cfg, seq, host = json.loads(sys.argv[1]), int(sys.argv[2]), []
make = ckpt.get_unsloth_gradient_checkpointing_func
def marked_make():  # prepare_model_for_training builds the Function through this name (checkpointing.py:123-124)
    fn = make()
    cls, fwd = fn.__self__, fn.__self__.forward
    def marked(ctx, f, h, *a):  # what the Function saves: `hidden_states.to("cpu")`, the host's on a GPU
        host.append(h.untyped_storage().data_ptr())
        return fwd(ctx, f, h, *a)
    cls.forward = staticmethod(marked)
    return fn
ckpt.get_unsloth_gradient_checkpointing_func = marked_make
def saved(unsloth):
    torch.manual_seed(0)
    host.clear()
    m = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.bfloat16).train()
    args = types.SimpleNamespace(upcast_layernorm=False, disable_gradient_checkpointing=False, use_unsloth_gc=unsloth,
                                 use_reentrant_gc=True, upcast_lmhead_output=False)
    ckpt.prepare_model_for_training(m, args)
    storages = {}
    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    ids = torch.randint(0, cfg["vocab_size"], (1, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m(input_ids=ids, labels=ids)
    on_host = sum(storages[p] for p in set(host))
    return sum(storages.values()) - on_host, on_host
(full, _), (device, host_bytes) = saved(False), saved(True)
print(json.dumps({"full_device": full, "device": device, "host": host_bytes}))
"""


@pytest.mark.sweep  # imports torch and transformers in LLaMA-Factory's venv (~11 s of CPU)
@pytest.mark.skipif(not os.environ.get("MEMPLAN_LLAMAFACTORY_PYTHON"), reason="LF's venv (Makefile FRAMEWORK_PYTHONS)")
def test_use_unsloth_gc_saves_each_layers_input_alone_as_offload_inputs_plans():
    """Measured: LLaMA-Factory 0.9.5's prepare_model_for_training with use_unsloth_gc on debug-llama (4 layers, hidden
    256), bf16, 128 tokens: the Function saves each layer's input (host memory on a GPU), 262,144 bytes,
    host_layer_inputs_bytes exactly; the rest saved is what LF's default (torch's reentrant checkpoint) saves less
    those inputs, the device difference text_activations_bytes plans (exact: no tolerance)."""
    model = load_model("debug-llama")
    cfg = {k: v for k, v in model.config.items() if k not in ("architectures", "torch_dtype")}
    cmd = [os.environ["MEMPLAN_LLAMAFACTORY_PYTHON"], "-c", MEASURE, json.dumps(cfg), "128"]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    host = recipe_terms.host_layer_inputs_bytes(model.text, 1, 128, "half")
    assert got["host"] == host == 262_144
    assert got["full_device"] - got["device"] == host
