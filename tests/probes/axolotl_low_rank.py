"""axolotl 0.19.0's own optimizer construction for GaLore and APOLLO, run by its venv's python on the CPU: a 2-layer
Llama built from its config, AxolotlTrainer with AxolotlTrainingArguments(optim, optim_target_modules, optim_args
rank=), its create_optimizer (0.19.0 core/trainers/mixins/optimizer.py:107-115 hands a run without LoRA+ or lr groups
to transformers' Trainer.create_optimizer: 5.16.1 trainer_optimizer.py:111-162 groups the targets), one forward,
backward and step, then the bytes of every tensor the optimizer keeps (tests/probes/test_matrix_optim.py's count).
galore-torch 1.0 and apollo-torch 1.0.3 (and bitsandbytes, which galore_torch imports) are not in axolotl's venv:

    pip install --target /tmp/galpkgs --no-deps galore-torch==1.0 apollo-torch==1.0.3 bitsandbytes==0.50.2
    PYTHONPATH=.:/tmp/galpkgs MEMPLAN_AXOLOTL_PYTHON=.fwenv/axolotl/bin/python pytest tests/probes/test_axolotl_low_rank.py
"""

import json
import os
import subprocess
from pathlib import Path

STEP = """
import importlib.util, json, sys, types, torch, transformers
if importlib.util.find_spec("numba") is None:  # multipack's bin packing (never called here) jit-compiles with it
    sys.modules["numba"] = types.SimpleNamespace(njit=lambda f=None, **k: f if f is not None else (lambda g: g))
from axolotl.core.trainers.base import AxolotlTrainer
from axolotl.core.training_args import AxolotlTrainingArguments
config = {config!r}


def measure(optim, targets, rank, dtype):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**{{k: v for k, v in config.items() if k not in ("model_type", "architectures")}})
    model = transformers.LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    args = AxolotlTrainingArguments(output_dir={out!r}, optim=optim, optim_target_modules=targets,
        optim_args=f"rank={{rank}}", report_to=[], use_cpu=True)
    opt = AxolotlTrainer(model=model, args=args).create_optimizer()
    ids = torch.randint(0, config["vocab_size"], (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    storages = {{}}
    for state in opt.state.values():
        for key, v in state.items():
            mats = [v] if torch.is_tensor(v) and (v.dim() or key == "scaled_grad") else []
            if hasattr(v, "ortho_matrix") and v.ortho_matrix is not None:
                mats = v.ortho_matrix if isinstance(v.ortho_matrix, list) else [v.ortho_matrix]
            for m in mats:
                storages[m.untyped_storage().data_ptr()] = m.untyped_storage().nbytes()
    return sum(storages.values())


print(json.dumps([measure(*case) for case in {cases!r}]))
"""


def measured_state_bytes(python: str, config: dict, cases: list[tuple], out: Path) -> list[int]:
    """The optimizer's state bytes after one step under `python` (axolotl's venv), for each (optim,
    optim_target_modules, rank, torch dtype name) case, in one process (axolotl's import takes most of the time)."""
    root = Path(__file__).resolve().parents[2]
    code = STEP.format(config=config, out=str(out), cases=cases)
    paths = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TRL_EXPERIMENTAL_SILENCE": "1"}
    run = subprocess.run(
        [python, "-W", "ignore", "-c", code],
        check=False,
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=600,
    )
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    return json.loads(run.stdout.strip().splitlines()[-1])
