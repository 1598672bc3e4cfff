"""`planner check --evidence sim` answers for every catalog model (issue 3 acceptance): the real
transformers model of each entry is traced on fake tensors; VLMs text-only and with image tokens."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.cli import main
from planner.model.catalog import model_names


def _check(capsys, store, model, *extra):
    rc = main(
        [
            "check",
            "--model",
            model,
            "--gpu",
            "h100",
            "--seq-len",
            "256",
            "--micro-batch",
            "1",
            "--grad-accum",
            "1",
            "--precision",
            "bf16",
            "--checkpointing",
            "full",
            "--evidence",
            "sim",
            "--store",
            str(store),
            "--json",
            *extra,
        ]
    )
    out = json.loads(capsys.readouterr().out)
    return rc, out["plan"]


# the models whose `check --evidence sim` runs on every commit: a dense model, an MoE, a VLM, a family with no
# transformers class (analytic) and a prequantized checkpoint (through adapters). Every family's real model is traced
# on every commit by tests/probes/test_family_accuracy.py, against the analytic peak; the CLI's answer for each of
# the other catalog models is the sweep tier's (since stop 68, for CI's room: one of each family took 150 s of a worker)
ON_COMMIT = {"llama-3.2-1b", "qwen3-30b-a3b", "qwen2.5-vl-3b", "qwen-14b", "minicpm-v-2_6-int4"}


def _models() -> list:
    """Every catalog model; ON_COMMIT's on every commit, the others in the sweep tier (`make test-all`)."""
    from planner.model.catalog import load_model

    return [
        pytest.param(name, marks=() if name in ON_COMMIT else pytest.mark.sweep)
        for name in model_names()
        if not load_model(name).resident_params()  # a whole Omni: its thinker's row, its talker frozen weights alone
    ]


@pytest.mark.parametrize("model", _models())
def test_check_with_sim_evidence_answers_for_every_catalog_model(model, tmp_path, capsys):
    from planner.model.catalog import load_model

    # a prequantized checkpoint trains through adapters alone (the planner refuses it without them)
    adapters = ("--lora-rank", "8") if "quantization_config" in load_model(model).config else ()
    rc, plan = _check(capsys, tmp_path / "s.sqlite", model, *adapters)
    assert rc in (0, 3), rc  # fits, or does not fit: an answer either way
    from planner.model.catalog import load_model
    from planner.model.shapes import REMOTE_CODE_ONLY

    # a family transformers has no class for (Qwen v1) cannot be traced: its plan stays analytic, as a plan says
    remote = load_model(model).model_type in REMOTE_CODE_ONLY
    assert plan["evidence"] == ("analytic" if remote else "simulated")
    m = plan["memory"]
    assert m["peak_allocated_bytes"] == sum(
        m[k] for k in ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "temp_bytes")
    )


# the sweep tier's: InternVL's tile (32 s of a worker in make test at stop 69) since stop 70, Qwen2.5-VL's 4 windows (59 s
# at stop 74) since stop 74, for CI's room: every commit traces images' inputs in test_vlm_sim.py (against real CPU
# steps), each tower's blocks in test_vision_terms.py, and `check --evidence sim` on the text rows above
@pytest.mark.sweep
@pytest.mark.parametrize("model,tokens", [("qwen2.5-vl-3b", "64"), ("internvl2.5-8b", "256")])
def test_check_with_sim_evidence_traces_vlms_with_image_tokens(model, tokens, tmp_path, capsys):
    _, text_only = _check(capsys, tmp_path / "s.sqlite", model, "--seq-len", "512")
    _, with_images = _check(capsys, tmp_path / "s.sqlite", model, "--seq-len", "512", "--image-tokens", tokens)
    assert with_images["evidence"] == "simulated"
    # the real model's step on images' inputs: the tower's activations, gradients and states on top of the text's
    assert with_images["memory"]["peak_allocated_bytes"] > text_only["memory"]["peak_allocated_bytes"]
