"""GKD's loss moment (planner.estimate.gkd.loss_bytes: both models' logits and the generalized JSD's temporaries)
against the frameworks' own loss code on real CPU tensors, every allocation tracked (probes.tracker.LiveBytes), forward
and backward: TRL 1.16's GKDTrainer.generalized_jsd_loss as compute_loss calls it (the [:, :-1] logits, the shifted
labels), in this venv; ms-swift 4.6.0's gkd_loss as GKDTrainer._compute_jsd_loss calls it (rolled labels, the
logits trimmed to the completion and the position before it, temperature 0.9), in ms-swift's venv
(MEMPLAN_SWIFT_PYTHON). The logits arrive as the trainers get them: cast to fp32 by accelerate's convert_to_fp32
(native AMP), or in bf16 (DeepSpeed). The student's bf16 logits exist before the tracker starts (under the cast
the plan counts its fp32 copy in their place); the teacher's are made inside it under no_grad and cast, as its
forward returns them. Forward, reverse and mixed JSD (beta 0, 1, 0.5), two or three completion lengths.
Measured 2026-12-04: TRL within 0.001% (12 cases), ms-swift within 0.03% (18 cases, 1 to 3 chunks); tolerance 0.5%
(the small tensors the terms leave out: labels, masks, scalars). trl 1.0.0 (its venv, MEMPLAN_FWENV_OLD): v1.0.0
gkd_trainer.py:374-385 slices the logits to the completion's positions (gkd_loss "completion"), within 0.5%."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import gkd
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

ROOT = Path(__file__).resolve().parents[3]
ROWS, WIDTH = 2, 256
MEASURE = """
import json, sys, torch
from accelerate.utils.operations import convert_to_fp32
from probes.tracker import LiveBytes
ROWS, WIDTH, VOCAB, WHO = {rows}, {width}, {vocab}, "{who}"
if WHO == "trl":
    from trl.experimental.gkd import GKDTrainer

    def loss_of(s, t, labels, beta, prompt):  # gkd_trainer.py:344-355
        return GKDTrainer.generalized_jsd_loss(s[:, :-1, :], t[:, :-1, :], labels[:, 1:], beta=beta)
elif WHO == "trl@1.0":
    from trl.experimental.gkd import GKDTrainer

    def loss_of(s, t, labels, beta, prompt):  # v1.0.0 gkd_trainer.py:374-385: the completion's positions
        return GKDTrainer.generalized_jsd_loss(
            s[:, prompt - 1 : -1, :], t[:, prompt - 1 : -1, :], labels[:, prompt:], beta=beta
        )
else:
    from swift.rlhf_trainers.gkd_loss import TeacherOutput, gkd_loss

    def loss_of(s, t, labels, beta, prompt):  # gkd_trainer.py:105-114
        shifted = torch.roll(labels, shifts=-1, dims=1)
        total, n = gkd_loss(s, TeacherOutput(full_logits=t, labels=shifted.clone()), shifted, beta, 0.9)
        return total / n

out = {{}}
for completion in {completions}:
    for upcast in (True, False):
        for beta in (0.5, 0.0, 1.0):
            width = WIDTH if WHO.startswith("trl") else completion + 1
            torch.manual_seed(0)
            s16 = torch.randn(ROWS, width, VOCAB, dtype=torch.bfloat16, requires_grad=True)
            labels = torch.randint(0, VOCAB, (ROWS, width))
            labels[:, : width - completion] = -100
            with LiveBytes() as tr:
                with torch.no_grad():
                    t16 = torch.randn(ROWS, width, VOCAB, dtype=torch.bfloat16)
                    t = convert_to_fp32(t16) if upcast else t16
                    del t16
                s = convert_to_fp32(s16) if upcast else s16
                loss_of(s, t, labels, beta, width - completion).backward()
                del s, t
            out[f"{{completion}} {{upcast}} {{beta}}"] = tr.peak
print(json.dumps(out))
"""


def _measure(python: str, who: str, vocab: int, completions: tuple[int, ...]) -> dict:
    script = MEASURE.format(rows=ROWS, width=WIDTH, vocab=vocab, who=who, completions=completions)
    run = subprocess.run(
        [python, "-c", script],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def _planned(who: str, completion: int, upcast: bool, beta: float) -> int:
    """gkd.loss_bytes of the measured step, less the student's bf16 logits made before the tracker (DeepSpeed)."""
    model = load_model("debug-llama")
    framework, _, release = who.partition("@")
    width = WIDTH if framework == "trl" else completion + 1  # ms-swift's rows: the prompt's last token, the completion
    w = Workload(kind="gkd", max_length=width, max_completion_length=completion, jsd_beta=beta)
    knobs = Knobs(framework=framework, release=release, workload=w, zero_stage=0 if upcast else 2)
    s = Setup(model, knobs, ROWS, 1, width)
    held = 0 if upcast else 2 * ROWS * gkd.logit_tokens(s) * model.text.vocab
    return gkd.loss_bytes(s, ROWS) - held


# trl 1.0.0's venv (tools/fwenv_old.sh trl 1.0.0, in its ci set), as tests/planner/export/test_old_releases_parse.py
TRL_100 = Path(os.environ.get("MEMPLAN_FWENV_OLD", ROOT / ".fwenv-old")) / "trl-1.0.0" / "bin" / "python"


@pytest.mark.parametrize("framework,python_env", [("trl", None), ("trl@1.0", ""), ("swift", "MEMPLAN_SWIFT_PYTHON")])
def test_gkd_loss_moment_matches_the_frameworks_own_loss(framework, python_env):
    python = os.environ.get(python_env) if python_env else sys.executable
    if framework == "trl@1.0":
        python = str(TRL_100) if TRL_100.exists() else ""
        python_env = "MEMPLAN_FWENV_OLD"
    if not python:
        pytest.skip(f"{python_env} is not set: the python of a venv with the framework installed runs this check")
    if python_env is None:
        pytest.importorskip("trl")
    vocab = load_model("debug-llama").text.vocab
    completions = (192, 64) if framework.startswith("trl") else (600, 300, 96)  # ms-swift: 3, 2 and 1 chunks of 512
    measured = _measure(python, framework if framework.startswith("trl") else "swift", vocab, completions)
    for key, peak in measured.items():
        completion, upcast, beta = key.split()
        planned = _planned(framework, int(completion), upcast == "True", float(beta))
        assert planned == pytest.approx(peak, rel=0.005), key
    mixed, forward = measured[f"{completions[0]} True 0.5"], measured[f"{completions[0]} True 0.0"]
    assert mixed > 1.3 * forward  # the mixture's stacked log-probs and two KL terms: beta is not a free knob
