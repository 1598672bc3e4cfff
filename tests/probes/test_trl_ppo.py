"""ms-swift's PPO as TRL's PPOTrainer runs it (planner.estimate.trl_ppo), against a real CPU step of that trainer
(tests/probes/trl_ppo_step.py, trl 0.29.1 in ms-swift 4.6.0's venv: MEMPLAN_SWIFT_PYTHON), every allocation tracked
(probes.tracker): debug-llama cut to 2 layers as policy, reference, value and reward model, fp32 and bf16, micro 2 x
accumulation 2, 32-token prompts and 32-token completions, the second update's peaks.

Measured 2026-12-05: the update 218,391,040 B, planned 218,911,744 (+0.2%: the policy's update step, the value
model's gradients and saved activations at the same backward, the kept fp32 scores 4.19 MB, the previous micro-step's
logits and softmax 6.29 MB); planned as two updates in turn, as before, 192,519,168 (-11.8%). The rollout's peak is
batch_generation padding the scores while the previous update's are still bound: 159,747,072 B, planned 160,745,472
(+0.6%; with two copies of the scores, 156,551,168). With 4 layers and 64 + 64 tokens: update 331,396,608 B against
326,183,936 (-1.6%; was 262,112,256, -20.9%), rollout 218,805,248 against 220,819,456 (+0.9%). In bf16 weights
(bf16-pure): update 112,129,024 B against 112,223,744 (+0.1%), rollout 86,193,152 against 86,763,520 (+0.7%).
With --num_mini_batches 2 (fp32, 2 layers): update 216,292,352 B against 212,620,288 (-1.7%: one mini-batch a
micro-step, no previous micro-step's tensors, the gradients still accumulated over both; unread before, as one
mini-batch: 218,911,744, +1.2%), rollout 159,747,072 against 160,745,472 (+0.6%, as without it)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner import checkconfig
from planner.model.catalog import model_config

ROOT = Path(__file__).resolve().parents[2]
PROMPT, COMPLETION, MICRO, ACCUM = 32, 32, 2, 2
# the model's dtype in TRL's run -> memplan's precision (bf16 weights and AdamW states, as ms-swift loads them)
DTYPES = {"float32": "fp32", "bfloat16": "bf16-pure"}
WITHIN = 0.02  # the update's head: TRL's selective_log_softmax against the plan's supervised head (-1.6% at 4 layers)


def measured(cfg: dict, dtypes: tuple[str, ...] = tuple(DTYPES), mini: int = 1) -> dict[str, dict[str, int]]:
    python = os.environ.get("MEMPLAN_SWIFT_PYTHON")
    if not python:
        pytest.skip("MEMPLAN_SWIFT_PYTHON is not set: ms-swift's venv carries TRL's PPOTrainer (TRL 1.16 has none)")
    run = subprocess.run(
        [
            python,
            str(ROOT / "tests/probes/trl_ppo_step.py"),
            json.dumps(cfg),
            *map(str, (PROMPT, COMPLETION, MICRO, ACCUM)),
            ",".join(dtypes),
            str(mini),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRL_EXPERIMENTAL_SILENCE": "1"},
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def planned(model_dir: Path, precision: str, mini: int = 1) -> tuple[dict[str, int], str]:
    script = model_dir / "ppo.sh"
    script.write_text(
        f"swift rlhf --rlhf_type ppo --model {model_dir} --reward_model {model_dir} --tuner_type full "
        f"--per_device_train_batch_size {MICRO} --gradient_accumulation_steps {ACCUM} --max_length {PROMPT} "
        f"--max_completion_length {COMPLETION} --local_rollout_forward_batch_size {MICRO} --num_ppo_epochs 1 "
        f"--num_mini_batches {mini}\n"
    )
    plan = checkconfig.check_config([str(script)], {"gpu": "h100", "precision": precision}).plan
    return {p.split(": ")[1]: v for p, v in plan.memory.phases.items()}, plan.knobs.checkpointing


def tiny(tmp_path: Path) -> dict:
    """debug-llama cut to 2 layers: its config.json written into tmp_path (the plan's model), the config returned."""
    cfg = {k: v for k, v in model_config("debug-llama").items() if k not in ("architectures", "model_type")}
    cfg["num_hidden_layers"] = 2
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "llama", "pad_token_id": 0}))
    cfg.pop("torch_dtype", None)
    return cfg


def test_trls_ppo_update_holds_policy_and_value_model_at_one_backward_and_the_kept_scores(tmp_path):
    got = measured(tiny(tmp_path))
    for dtype, precision in DTYPES.items():
        want, checkpointing = planned(tmp_path, precision)
        assert "critic-update" not in want  # no update of the value model alone
        assert checkpointing == "off"  # ms-swift's PPO checkpoints nothing (reader_ppo.NO_CHECKPOINTING)
        assert want["actor-update"] == pytest.approx(got[dtype]["train"], rel=WITHIN), (dtype, want, got)
        assert want["rollout"] == pytest.approx(got[dtype]["rollout"], rel=WITHIN), (dtype, want, got)


def test_num_mini_batches_splits_the_ranks_batch_and_frees_each_mini_batchs_tensors(tmp_path):
    """--num_mini_batches 2 over micro 2 x accumulation 2: TRL's mini-batch is one micro-batch (ppo_trainer.py:461-463,
    801-805) whose tensors are deleted at its end (:869), so no micro-step's logits live into the next; the rollout
    still generates and scores the rank's 4 rows. Planned as 2 mini-batches of 1 micro-step (not 2 x 2)."""
    got = measured(tiny(tmp_path), ("float32",), mini=2)["float32"]
    want, _ = planned(tmp_path, "fp32", mini=2)
    assert want["actor-update"] == pytest.approx(got["train"], rel=WITHIN), (want, got)
    assert want["rollout"] == pytest.approx(got["rollout"], rel=WITHIN), (want, got)
