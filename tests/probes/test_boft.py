"""BOFT (--lora-variant boft, PEFT's BOFTConfig with --lora-rank its block size, one butterfly factor) against PEFT
0.21.2's own code (its BOFT linear is 0.20.0's, ms-swift 4.6's pin): one BOFT linear's saved tensors and forward
transient on real CPU tensors (CUDA's autocast replayed, the live-bytes tracker) against planner.estimate.boft, the
trained parameters and permutation buffers of a real PEFT model, and the whole step's peak against the sim probe's
trace. Measured 2026-12-05: the linear exact at six shapes under bf16 AMP and bf16-pure; the steps +0.01% to +0.53%
(the table). The sim builds the model on the meta device, where PEFT's perm2mat cannot run: probes.sim makes the same
(d_in, d_in) fp32 buffer there."""

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
from planner.config.spec import GIB, Knobs
from planner.errors import BadInput
from planner.estimate import boft
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.state_terms import tuner_buffers_bytes
from planner.estimate.trained import trainable_params
from planner.model.catalog import load_model
from probes.amp import CudaAutocast
from probes.step import Case
from probes.tracker import LiveBytes


def _peft_model(base: torch.nn.Module, block: int, targets) -> torch.nn.Module:
    """PEFT's BOFT as ms-swift builds it (block size, no block count, one butterfly factor); on CPU PEFT's fbd_cuda
    extension cannot build, which it warns about and which changes nothing at one factor (both paths build the same
    fp32 d_in x d_in block-diagonal matrix: fbd/fbd_cuda_kernel.cu:64)."""
    cfg = peft.BOFTConfig(boft_block_size=block, boft_block_num=0, boft_n_butterfly_factor=1, target_modules=targets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return peft.get_peft_model(base, cfg)


def _one_linear(d_in: int, d_out: int, block: int, tokens: int, precision: str) -> tuple[int, int, int]:
    """(peak above the start beyond what is kept and the output, kept after the forward less the output, backward's
    peak above its start) of one PEFT BOFT linear on a bf16 base over a bf16 input that already exists (the layer's
    shared tensor), the output's gradient given; its trained elements and buffer bytes checked on the way."""
    torch.manual_seed(0)
    m = _peft_model(torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False).to(torch.bfloat16)), block, ["0"])
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == d_in * block + d_out
    assert sum(b.numel() * b.element_size() for b in m.buffers()) == boft.PERMUTATION_ELEMENT_BYTES * d_in**2
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, d_out, dtype=torch.bfloat16)
    with LiveBytes() as t:
        start = t.live
        with CudaAutocast(torch.bfloat16) if precision == "bf16" else torch.enable_grad():
            y = m(x)
        out = y.numel() * y.element_size()
        kept, transient = t.live - start - out, t.peak - t.live
        t.peak = backward_start = t.live
        y.backward(grad)
    return transient, kept, t.peak - backward_start


SHAPES = [(1024, 256, 32, 512), (1024, 256, 32, 1024), (2048, 256, 32, 512), (1024, 256, 64, 512), (1024, 256, 4, 512)]


@pytest.mark.parametrize(
    "precision,d_in,d_out,block,tokens",
    [
        ("bf16", 1024, 512, 16, 256),  # 2026-12-05: 6,757,376 kept, 5,242,880 transient, 2,883,584 backward (1 s)
        *(pytest.param(p, *s, marks=pytest.mark.sweep) for p in ("bf16", "bf16-pure") for s in SHAPES),
    ],
)
def test_one_boft_linears_saved_tensors_and_transient(precision, d_in, d_out, block, tokens):
    """The permutation's copy, the identity and the rotation (d_in^2 each), the solve's tensors, the unscaled output
    kept; PEFT's locals (block-diagonal matrix, bmm product), the rotated input and the fp32 scaled output held for
    a moment; in backward the rotation's gradient and the rotated input's beside the input's own (a frozen linear's
    2 tokens d_in): exact (bf16-pure the same bytes as AMP: the forward casts to the input's dtype)."""
    transient, kept, backward = _one_linear(d_in, d_out, block, tokens, precision)
    assert kept == boft.linear_saved_bytes(d_in, d_out, block, tokens)
    assert transient == boft.linear_forward_temp_bytes(d_in, d_out, tokens)
    assert backward == boft.linear_backward_temp_bytes(d_in, d_out, tokens) + 2 * tokens * d_in


@pytest.mark.sweep  # make test-all: 3-5 s each
@pytest.mark.parametrize("block", [4, 16])
def test_boft_trains_and_buffers_what_peft_makes(block):
    """A real PEFT model of debug-llama (CPU, from its config): its trained boft_R and boft_s and its boft_P buffers
    are the plan's (2026-12-05, block 16: 593,920 trained elements, 26,279,936 buffer bytes)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    model, k = load_model("debug-llama"), Knobs(lora_rank=block, lora_variant="boft")
    cfg = dict(model.config)
    base = AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg)).to(torch.bfloat16)
    m = _peft_model(base, block, "all-linear")
    trained = sum(p.numel() for p in m.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for n, b in m.named_buffers() if "boft_P" in n)
    s = Setup(model, k, 1, 1, 64)
    assert trainable_params(s) == boft.boft_params(model, k) == trained
    assert tuner_buffers_bytes(s) == boft.permutation_buffer_bytes(model, k) == buffers


@pytest.mark.sweep  # make test-all: 12-145 s each on 2 busy cores
@pytest.mark.parametrize(
    "name,micro,seq,block,knobs,within",
    [  # 2026-12-05: sim and planned peaks, MiB
        ("debug-llama", 2, 512, 16, {}, 0.005),  # 210.19, 210.92 (+0.35%)
        ("debug-llama", 2, 512, 16, {"checkpointing": "full"}, 0.005),  # 128.10, 128.50 (+0.31%)
        ("debug-llama", 2, 512, 8, {"precision": "bf16-pure"}, 0.005),  # 208.56, 209.29 (+0.35%)
        ("llama-3.2-1b", 1, 256, 32, {}, 0.005),  # 17,639.30, 17,663.16 (+0.14%)
        ("llama-3.2-1b", 1, 256, 32, {"checkpointing": "full"}, 0.005),  # 8,990.90, 9,006.25 (+0.17%)
        ("llama-3.2-1b", 1, 512, 64, {"checkpointing": "every-2"}, 0.01),  # 14,092.95, 14,167.86 (+0.53%)
        ("qwen2.5-0.5b", 1, 256, 32, {}, 0.005),  # 8,571.64, 8,575.97 (+0.05%)
        ("qwen2.5-0.5b", 2, 256, 8, {"checkpointing": "full"}, 0.005),  # 4,488.66, 4,489.27 (+0.01%)
    ],
)
def test_a_boft_step_is_the_sims_peak(name, micro, seq, block, knobs, within):
    """The whole step: BOFT's d_in^2 rotations dominate the layers' saved tensors (llama-3.2-1b: about 0.5 GiB a
    layer); under checkpointing the recomputed layer's rotations are live at its largest linear's forward
    (planner.estimate.memory._other_phases). Before that term the llama-3.2-1b full-checkpointing plan was 3.1%
    under the sim."""
    from probes.sim import simulate

    model, k = load_model(name), Knobs(lora_rank=block, lora_variant="boft", **knobs)
    sim = simulate(Case(model.config, k, micro, 1, seq, 0)).peak_allocated_bytes
    planned = breakdown(Setup(model, k, micro, 1, seq), 80 * GIB).peak_allocated_bytes
    assert planned == pytest.approx(sim, rel=within)


@pytest.mark.parametrize(
    "knobs,what",
    [
        ({"zero_stage": 2}, "--zero 2"),
        ({"fsdp": "full"}, "--fsdp full"),
        ({"quant": "nf4"}, "--quant nf4"),
        ({"lora_dropout": 0.1}, "--lora-dropout 0.1"),
    ],
)
def test_boft_where_unmeasured_is_refused_in_one_line(knobs, what):
    with pytest.raises(BadInput, match=f"^--lora-variant boft with {what} is not planned"):
        Knobs.make(lora_rank=16, lora_variant="boft", **knobs)


def test_a_block_size_peft_refuses_is_refused_in_one_line():
    """debug-llama's down_proj takes 688 = 16 x 43 inputs: block 32 does not divide it (PEFT raises, layer.py:322-326)."""
    from planner.config.spec_lora import boft_width_error

    model = load_model("debug-llama")
    err = boft_width_error(Knobs(lora_rank=32, lora_variant="boft"), model)
    assert err is not None and "input width 688" in str(err)
    assert boft_width_error(Knobs(lora_rank=16, lora_variant="boft"), model) is None


def test_boft_p_lies_on_the_gpu_but_under_ms_swift_3():
    """ms-swift loads with device_map cuda:<rank>: under its transformers-4 lines the model's hf_device_map stops the
    Trainer's move and boft_P stays on the CPU (planner.estimate.boft.buffers_on_gpu; the venvs' check below).
    qwen2.5-0.5b, all-linear: 24 layers x 4 (6 x 896^2 + 4,864^2) bytes = 2,500,362,240."""
    model = load_model("qwen2.5-0.5b")

    def buffers(framework, release):
        k = Knobs(lora_rank=4, lora_variant="boft", framework=framework, release=release)
        return boft.permutation_buffer_bytes(model, k)

    assert buffers("swift", "") == buffers("hf", "") == buffers("memplan", "") == 24 * 4 * (6 * 896**2 + 4864**2)
    assert buffers("swift", "3.9") == 0


HF_DEVICE_MAP = """
import sys, torch, transformers
from transformers import LlamaConfig, LlamaForCausalLM, AutoModelForCausalLM
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, vocab_size=128)
LlamaForCausalLM(cfg).save_pretrained(sys.argv[1])
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], device_map={"": "cpu"})
print(transformers.__version__.split(".")[0], getattr(m, "hf_device_map", None) is not None)
"""


@pytest.mark.sweep  # make test-all: about 15 s (two framework venvs)
@pytest.mark.parametrize("env,major,mapped", [("swift-3.12.6", "4", True), ("ms-swift", "5", False)])
def test_transformers_4_alone_marks_a_one_device_map(tmp_path, env, major, mapped):
    """What buffers_on_gpu rests on: from_pretrained(device_map={"": device}) leaves an hf_device_map on the model
    under transformers 4 (4.57.1, ms-swift 3.12.6's venv: MEMPLAN_FWENV_OLD) and none under 5 (5.19, ms-swift 4.6's:
    MEMPLAN_SWIFT_PYTHON), and HF's Trainer skips its model.to(device) where one is set (trainer.py's
    _move_model_to_device, both lines)."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    old = Path(os.environ.get("MEMPLAN_FWENV_OLD", root / ".fwenv-old")) / env / "bin/python"
    python = (
        old
        if env.startswith("swift-")
        else Path(os.environ.get("MEMPLAN_SWIFT_PYTHON", root / ".fwenv" / env / "bin/python"))
    )
    if not python.exists():
        pytest.skip(f"no {python}")
    run = subprocess.run(
        [python, "-c", HF_DEVICE_MAP, str(tmp_path)], check=False, capture_output=True, text=True, timeout=300
    )
    assert run.stdout.split()[-2:] == [major, str(mapped)], run.stderr[-2000:]


class _FbdStandIn:
    """PEFT's fbd_cuda extension as its kernel allocates (peft 0.21.2 tuners/boft/fbd/fbd_cuda_kernel.cu:64, :95: the
    (m, d_in, d_in) output zeroed and the blocks written in; backward the blocks' gradient, zeros_like the input),
    on CPU tensors: what FastBlockDiag runs where the extension compiles (layer.py:283-290, :616-621)."""

    @staticmethod
    def forward(blocks):
        z, n, b, _ = blocks.shape
        out = blocks.new_zeros(z, n * b, n * b)
        for i in range(n):
            out[:, i * b : (i + 1) * b, i * b : (i + 1) * b] = blocks[:, i]
        return [out]

    @staticmethod
    def backward(grad, blocks):
        n, b = blocks.shape[1], blocks.shape[2]
        out = torch.zeros_like(blocks)
        for i in range(n):
            out[:, i] = grad[:, i * b : (i + 1) * b, i * b : (i + 1) * b]
        return [out]


@pytest.mark.sweep  # make test-all: about 3 s
def test_the_cuda_extensions_path_keeps_what_the_torch_path_keeps_at_one_factor(monkeypatch):
    """With the extension (its stand-in) PEFT runs FastBlockDiag instead of torch.block_diag; at one butterfly factor
    the same bytes kept, held and in backward (2026-12-05: 6,952,448, 5,767,168 and 3,932,160 at d_in 1024, d_out 256,
    block 32, 512 tokens). A second factor (refused) doubles boft_P and keeps about 6.4 d_in^2 more a linear."""
    from peft.tuners.boft import layer

    torch_path = _one_linear(1024, 256, 32, 512, "bf16")
    monkeypatch.setattr(layer, "_FBD_CUDA", _FbdStandIn())
    assert _one_linear(1024, 256, 32, 512, "bf16") == torch_path
