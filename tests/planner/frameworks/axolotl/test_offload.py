"""axolotl's offloaded checkpointing as each release line runs it (planner.frameworks.axolotl.reader_training
.offload_mode): Unsloth's checkpointer before v0.12.0 and torch's checkpoint under TRL's offloader after it keep each
layer's input in host RAM (--checkpointing offload-inputs); 0.19.0 offloads every saved tensor of an adapter run
(--checkpointing offload). The host and device bytes of offload-inputs pinned to the checkpointer measured on CPU."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner import checkconfig
from planner.estimate import recipe_terms
from planner.model.catalog import load_model

QLORA = "adapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n"
BASE = "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\nsequence_len: 128\nbf16: true\n"


def _checkpointing(tmp_path: Path, extra: str, release: str) -> str:
    path = tmp_path / "axolotl.yaml"
    path.write_text(BASE + extra)
    out = checkconfig.check_config([str(path)], {"gpu": "h100", "framework": f"axolotl@{release}"})
    return next(x for x in out.config["settings"] if x["field"] == "checkpointing")["value"]


@pytest.mark.parametrize(
    ("extra", "release", "value"),
    [
        ("gradient_checkpointing: offload\n" + QLORA, "0.8", "offload-inputs"),  # v0.8.0 utils/models.py:560-561
        ("gradient_checkpointing: unsloth\n" + QLORA, "0.5", "offload-inputs"),  # v0.5.0 utils/models.py:380-381
        ("gradient_checkpointing: offload\n" + QLORA, "0.12", "offload-inputs"),  # v0.12.0 loaders/model.py:232-239
        ("gradient_checkpointing: offload\n", "0.14", "offload-inputs"),  # full fine-tuning keeps the wrap
        ("gradient_checkpointing: offload\n" + QLORA, "0.14", "offload"),  # v0.18.0 loaders/model.py:357-369
        ("gradient_checkpointing: true\nactivation_offloading: hidden_states\n" + QLORA, "0.14", "offload-inputs"),
    ],
)
def test_each_line_reads_offloaded_checkpointing_as_it_runs_it(tmp_path, extra, release, value):
    assert str(_checkpointing(tmp_path, extra, release)) == value


def test_offload_inputs_moves_each_layers_input_off_the_device():
    """Host: layers x tokens x hidden x 2 bytes (bf16); the device keeps full checkpointing's less exactly that."""
    t = load_model("debug-llama").text
    host = recipe_terms.host_layer_inputs_bytes(t, 1, 128, "half")
    assert host == 4 * 128 * 256 * 2
    knobs = {c: _knobs(c) for c in ("full", "offload-inputs")}
    device = {c: recipe_terms.text_activations_bytes(t, k, 1, 128, "half") for c, k in knobs.items()}
    assert device["full"] - device["offload-inputs"] == host


def _knobs(checkpointing: str):
    from planner.config.spec import Knobs

    return Knobs.make(precision="bf16-pure", checkpointing=checkpointing)


MEASURE = """
import json, sys, torch
from axolotl.monkeypatch.gradient_checkpointing.offload_cpu import CPU_Offloaded_Gradient_Checkpointer as U
from transformers import LlamaConfig, LlamaForCausalLM
cfg, seq = json.loads(sys.argv[1]), int(sys.argv[2])
def saved(mode):
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.bfloat16).train()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if mode == "unsloth":  # 0.19.0 hf_grad_checkpoint_offload_wrapper on a GradientCheckpointingLayer
        for layer in m.model.layers:
            layer._gradient_checkpointing_func = lambda f, *a, use_reentrant=None: U.apply(f, *a)
    storages, host = {}, []
    fwd = U.forward
    def marked(ctx, f, h, *a):  # what the Function saves: `hidden_states.to("cpu")`, the host's on a GPU
        host.append(h.untyped_storage().data_ptr())
        return fwd(ctx, f, h, *a)
    U.forward = staticmethod(marked)
    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    ids = torch.randint(0, cfg["vocab_size"], (1, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        m(input_ids=ids, labels=ids)
    U.forward = staticmethod(fwd)
    on_host = sum(storages[p] for p in set(host))
    return sum(storages.values()) - on_host, on_host
(full, _), (device, host) = saved("full"), saved("unsloth")
print(json.dumps({"full_device": full, "device": device, "host": host}))
"""


@pytest.mark.sweep  # imports torch and transformers in axolotl's venv (~8 s of CPU)
@pytest.mark.skipif(not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's venv (Makefile FRAMEWORK_PYTHONS)")
def test_the_unsloth_checkpointer_saves_each_layers_input_alone_as_offload_inputs_plans():
    """Measured: axolotl 0.19.0's CPU_Offloaded_Gradient_Checkpointer (offload_cpu.py, the forward of v0.8.0
    utils/gradient_checkpointing/unsloth.py:39-46 unchanged) on debug-llama (4 layers, hidden 256), bf16, 128 tokens:
    the Function saves each layer's input (host memory on a GPU), 262,144 bytes, host_layer_inputs_bytes exactly;
    everything else saved is what full checkpointing saves less those inputs (torch's checkpoint saves them on the
    device), the device difference text_activations_bytes plans (exact: no tolerance)."""
    model = load_model("debug-llama")
    cfg = {k: v for k, v in model.config.items() if k not in ("architectures", "torch_dtype")}
    cmd = [os.environ["MEMPLAN_AXOLOTL_PYTHON"], "-c", MEASURE, json.dumps(cfg), "128"]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    host = recipe_terms.host_layer_inputs_bytes(model.text, 1, 128, "half")
    assert got["host"] == host == 262_144
    assert got["full_device"] - got["device"] == host
