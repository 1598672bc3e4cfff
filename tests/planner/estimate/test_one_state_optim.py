"""The one-state optimizers (planner.config.knobfields.ONE_STATE_OPTIMIZERS): transformers' optim names read and
written back by every framework that passes them, the per-parameter state bytes (pinned against real steps in
tests/probes/test_one_state_optim.py), and RMSprop's optim_args buffers said where they are not planned."""

import pytest

from planner.config.knobfields import ONE_STATE_OPTIMIZERS
from planner.config.spec import Knobs
from planner.estimate import state_terms
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params
from planner.frameworks.hf.keys import HF_OPTIM
from planner.intake import vocab
from planner.model.families import from_config
from tests.planner.estimate.test_torchao_optim import TINY

NAMES = {  # transformers 5.25 training_args.py:126-143
    "lion_32bit": "lion",
    "lion_8bit": "lion-8bit",
    "paged_lion_32bit": "paged-lion",
    "paged_lion_8bit": "paged-lion-8bit",
    "rmsprop": "rmsprop",
    "rmsprop_bnb": "rmsprop-bnb",
    "rmsprop_bnb_32bit": "rmsprop-bnb",
    "rmsprop_bnb_8bit": "rmsprop-bnb-8bit",
    "adagrad": "adagrad",
}


def test_transformers_names_read_and_write_back():
    assert {vocab.optimizer(n) for n in NAMES} == set(ONE_STATE_OPTIMIZERS)
    for name, ours in NAMES.items():
        assert vocab.optimizer(name) == ours
        assert vocab.optimizer(HF_OPTIM[ours]) == ours


def test_one_state_is_half_adamws():
    """torch's RMSprop and Adagrad keep one state in the parameters' dtype where AdamW keeps two; bitsandbytes' 32-bit
    Lion one fp32 state whatever the parameters."""
    s = lambda o, p: Setup(from_config(TINY, "tiny-llama"), Knobs(framework="hf", optimizer=o, precision=p), 1, 1, 16)
    for p, nbytes in (("fp32", 4), ("bf16-pure", 2)):
        assert 2 * state_terms.optimizer_bytes(s("rmsprop", p)) == state_terms.optimizer_bytes(s("adamw", p))
        assert state_terms.optimizer_bytes(s("adagrad", p)) == nbytes * trainable_params(s("adagrad", p))
        assert state_terms.optimizer_bytes(s("lion", p)) == 4 * trainable_params(s("lion", p))


@pytest.mark.parametrize(
    "framework,optimizer",
    [("llamafactory", "paged-lion"), ("swift", "lion-8bit"), ("axolotl", "adagrad"), ("llamafactory", "rmsprop")],
)
def test_the_optim_is_written_and_read_back(framework, optimizer, tmp_path):
    from tests.planner.intake.test_round_trip import written_and_read_back

    body = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 1, "micro_batch": 1, "grad_accum": 4}
    body |= {"seq_len": 2048, "framework": framework, "lora_rank": 16, "optimizer": optimizer}
    res, files, _, back = written_and_read_back(body, tmp_path)
    assert HF_OPTIM[optimizer] in "".join(files.values())
    assert back.plan.knobs.optimizer == optimizer == res.plan.knobs.optimizer


def test_rmsprops_momentum_is_said_not_planned(tmp_path):
    from planner import intake

    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 2 train.py --model_name_or_path Qwen/Qwen2.5-7B --per_device_train_batch_size 1 "
        '--max_length 1024 --optim rmsprop --optim_args "momentum=0.9, centered=true" --bf16\n'
    )
    reading = intake.read([str(script)])
    assert reading.request["optimizer"] == "rmsprop"
    assert any("RMSprop's momentum and centered buffers" in n for n in reading.unplanned)


def test_axolotls_adopt_is_read_written_and_refused_before_it_came(tmp_path):
    """axolotl's own adopt_adamw (utils/schemas/enums.py CustomSupportedOptimizers) is --optimizer adopt: written back
    under its name, refused on the lines before v0.5.2 and by every other framework."""
    from planner import advise
    from planner.errors import BadInput
    from tests.planner.intake.test_round_trip import written_and_read_back

    body = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 1, "micro_batch": 1, "grad_accum": 4}
    body |= {"seq_len": 2048, "framework": "axolotl", "lora_rank": 16, "optimizer": "adopt"}
    res, files, _, back = written_and_read_back(body, tmp_path)
    assert 'optimizer: "adopt_adamw"' in files["axolotl.yaml"]
    assert back.plan.knobs.optimizer == "adopt" == res.plan.knobs.optimizer
    for framework in ("axolotl@0.4", "axolotl@0.5", "llamafactory", "hf"):
        with pytest.raises(BadInput, match="adopt"):
            advise.check(advise.parse(advise.CheckRequest, {**body, "framework": framework}))
