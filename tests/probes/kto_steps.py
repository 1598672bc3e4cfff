"""TRL's KTOTrainer, two steps of micro 2 x accum 2 on CPU in fp32, run by another venv's python (its TRL), every
allocation counted (probes/rl.py): the measurement tests/planner/frameworks/trl/test_kto_entropy.py takes (the
trl@1.0, trl@1.7 and trl@1.10 lines', which axolotl 0.17 plans its KTO as: tests/planner/frameworks/axolotl/
test_rl_kinds.py). TRL before 1.16 has no compact log-prob head (probes.rl.compact_head patches 1.16's): its
whole-logits path runs. TRL 0.x's KTOConfig has max_prompt_length (512 by default), which cuts every completion of
these 96-token rows to nothing unless given (planner/frameworks/trl/kto_zero.py): the probe's prompt length is passed
where the field exists; transformers before 4.56 (the 0.14 .. 0.19 venvs) take torch_dtype, not dtype."""

import json
import os
import subprocess
from pathlib import Path

from tests.probes.test_rl import COMPLETION, PROMPT

STEPS = """
import contextlib, json, transformers, trl
from planner.config.workload import Workload
from planner.export import export
from probes import rl
from recipe import hf_config, trl_run
rl.compact_head = contextlib.nullcontext
w = Workload(kind="kto", max_length={rows}, max_prompt_length={prompt})
fields = export.trl_args(w)
if "max_prompt_length" in trl.KTOConfig.__dataclass_fields__:
    fields["max_prompt_length"] = {prompt}
if tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (4, 56):
    auto = trl_run._auto
    class Old:
        def __init__(self, cls): self.cls = cls
        def from_pretrained(self, path, dtype=None, **kw):
            return self.cls.from_pretrained(path, torch_dtype=dtype, **kw)
    trl_run._auto = lambda folder: Old(auto(folder))
config = hf_config({config!r})
config.use_cache = True
model = transformers.AutoModelForCausalLM.from_config(config)
print(json.dumps(rl.measure("kto", model, fields, 2, 2, {prompt}, {completion}, steps=2)))
"""


def measured_kto_steps(python: str, config: dict) -> dict:
    """Each phase's peak bytes ("training", "kl-forward", "reference-forward") of the steps under `python`."""
    root = Path(__file__).resolve().parents[2]
    code = STEPS.format(rows=PROMPT + COMPLETION, prompt=PROMPT, completion=COMPLETION, config=config)
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=root, env=env, timeout=600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
