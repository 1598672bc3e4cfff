"""torchao's AdamW4bit / AdamW8bit (transformers' optim adamw_torch_4bit / adamw_torch_8bit) against real steps: a
2-layer Llama built by transformers from its config on the CPU (its embedding, head, q/o and MLP weights quantized;
its 64-element norms and 2048-element k/v projections, under 4096, kept as zeros_like), fp32 and bf16, the block
transformers 5.x passes (256) and torchao's own 4-bit default (128, transformers 4.x), two steps, then the bytes of
every tensor the states hold: a quantized state's codes, scale and qmap (its __tensor_flatten__ attributes), a plain
one's storage; the CPU step counters left out. Exact. Sweep tier: torchao is not in the project's venv; the figures in
planner/estimate/torchao_optim.py came from

    python -m pip install --no-deps --target /tmp/aopkgs torchao==0.18.0
    PYTHONPATH=.:/tmp/aopkgs python -m pytest -m sweep tests/probes/test_torchao_optim.py

torch.compile of the per-parameter step is switched off (the step runs eagerly: 2 s, not 90): the states are allocated
before the compiled call (torchao 0.18 optim/adam.py:117-121), so their bytes are the same either way."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import state_terms
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_tensor_sizes
from planner.model.families import from_config
from tests.planner.estimate.test_torchao_optim import TINY

CONFIG = TINY  # the 2-layer Llama of tests/probes/test_matrix_optim.py
CLASSES = {"adamw-torchao-4bit": "AdamW4bit", "adamw-torchao-8bit": "AdamW8bit"}


def _inner_bytes(t) -> int:
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if is_traceable_wrapper_subclass(t):
        return sum(_inner_bytes(getattr(t, name)) for name in t.__tensor_flatten__()[0])
    return t.untyped_storage().nbytes()


def _measured(optimizer: str, dtype, block: int, monkeypatch) -> int:
    optim = pytest.importorskip("torchao.optim")
    monkeypatch.setattr(torch, "compile", lambda fn, **_: fn)  # adam.py:142 compiles at each step's call
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**{k: v for k, v in CONFIG.items() if k not in ("model_type", "architectures")})
    model = transformers.LlamaForCausalLM(cfg).to(dtype)
    opt = getattr(optim, CLASSES[optimizer])(model.parameters(), lr=1e-3, block_size=block)
    for _ in range(2):
        ids = torch.randint(0, CONFIG["vocab_size"], (2, 16))
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
    return sum(_inner_bytes(v) for st in opt.state.values() for key, v in st.items() if key != "step")


@pytest.mark.sweep
@pytest.mark.parametrize(
    "optimizer,block", [("adamw-torchao-4bit", 256), ("adamw-torchao-4bit", 128), ("adamw-torchao-8bit", 256)]
)
@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("bf16-pure", "bfloat16")])
def test_torchao_low_bit_states_are_the_terms_bytes(optimizer, block, precision, dtype, monkeypatch):
    from planner.estimate.torchao_optim import torchao_low_bit_state_bytes

    s = Setup(
        from_config(CONFIG, "tiny-llama"), Knobs(framework="hf", optimizer=optimizer, precision=precision), 1, 1, 16
    )
    got = _measured(optimizer, getattr(torch, dtype), block, monkeypatch)
    nbytes = 4 if dtype == "float32" else 2
    assert torchao_low_bit_state_bytes(optimizer, trainable_tensor_sizes(s), nbytes, block) == got
    if block == 256:  # transformers 5.x's block: the plan's own optimizer bytes
        assert state_terms.optimizer_bytes(s) == got
